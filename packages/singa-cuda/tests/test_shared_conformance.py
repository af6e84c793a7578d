"""The conformance kit over the CUDA backend's shared array-module kernels, run on numpy.

Every op whose CUDA kernel is the shared array-module code (see ``singa_cuda.kernels.PLAN``)
is checked forward, on strided layouts, in place, and (random ops) statistically and for
seeding, on the ``cudaxp`` test device of ``conftest.py``.
"""

from singa.testing.conformance import *  # noqa: F401,F403
