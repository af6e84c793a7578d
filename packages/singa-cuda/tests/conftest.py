"""singa-cuda's own tests.

Registers the ``cudaxp`` and ``cudahost`` test backends (the CUDA backend's shared array-module
kernels bound to numpy; its CUDA C kernels built for the CPU) through a dist-info written to a
temporary directory on ``sys.path``, so discovery goes through ``importlib.metadata`` as for an
installed plugin, and makes ``cudaxp`` the conformance kit's device unless ``--singa-backend``
names another.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
_SITE = Path(tempfile.mkdtemp(prefix="singa_cuda_hostxp_"))
_info = _SITE / "singa_cuda_hostxp-0.1.dist-info"
_info.mkdir()
(_info / "METADATA").write_text("Metadata-Version: 2.1\nName: singa-cuda-hostxp\nVersion: 0.1\n")
(_info / "entry_points.txt").write_text("[singa]\ncudaxp = singa_cuda_hostxp\n")
#: what a subprocess needs on PYTHONPATH to see the test backends
TEST_BACKEND_PATHS = [str(HERE / "hostxp"), str(_SITE)]
sys.path[:0] = TEST_BACKEND_PATHS


def pytest_configure(config):
    if not config.getoption("--singa-backend", default=None):
        config.option.singa_backend = "cudaxp"
