"""Kernels written once against an array module (numpy or cupy).

Each module here exposes ``kernels(am) -> {op_name: kernel}`` where ``am`` is an
:class:`ArrayModule`: the array namespace (``numpy`` or ``cupy``) plus the few functions the two
spell differently. On a GPU the CudaGPU device binds them to cupy; in CI the same functions run
on numpy through the conformance kit (``packages/singa-cuda/tests``), so everything in this
package is tested on the CPU even where no GPU exists.

Rules for code here: only functions that numpy and cupy both provide with the same meaning
(ufuncs with ``out=``, reductions, ``matmul``, slicing, ``pad``, ``take``, ``repeat``); no
``np.vectorize``, no numba, no host round trips (``float(arr)``) in a kernel; anything else goes
through :class:`ArrayModule`.
"""

from ._module import ArrayModule, numpy_module
from .table import shared_kernels

__all__ = ["ArrayModule", "numpy_module", "shared_kernels"]
