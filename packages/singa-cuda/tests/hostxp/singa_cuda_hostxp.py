"""Test backend ``cudaxp``: the CUDA backend's shared array-module kernels on numpy.

A real backend registered through the real entry-point machinery (``conftest.py`` writes its
dist-info), whose kernel table is exactly what :func:`singa_cuda.kernels.shared_table` gives the
CudaGPU device, bound to numpy instead of cupy. The conformance kit then checks those kernels
(forward, strided layouts, in-place aliasing, random statistics and seeding) on the CPU. It
fakes nothing: no cupy call is mocked; the cupy-specific lines (allocation, streams, cuDNN,
NVRTC launches) are simply not part of this device.
"""

from __future__ import annotations

import numpy as np
from singa.backend import BACKEND_API_VERSION, ITEMSIZE, NP_DTYPE, BackendSpec, Device, hookimpl

from singa_cuda.kernels import shared_table
from singa_cuda.xp import numpy_module
from singa_cuda.xp.random import PhiloxState


class _Bytes:
    def alloc(self, nbytes):
        return np.empty(nbytes, np.uint8)

    def free(self, buf):
        pass

    def zero(self, buf, nbytes):
        buf[:nbytes] = 0

    def sub(self, buf, offset, nbytes):
        return buf[offset:offset + nbytes]


class HostXpDevice(Device):
    """numpy buffers; kernels from singa_cuda's shared table on numpy."""

    def __init__(self):
        super().__init__("cudaxp", 0, _Bytes())
        self.rng = PhiloxState()

    def native(self, ct):
        isz = ITEMSIZE[ct.dt]
        return np.ndarray(ct.shp, NP_DTYPE[ct.dt], ct.block.data, ct.off * isz,
                          tuple(s * isz for s in ct.strd))

    def native_to_numpy(self, arr):
        return np.array(arr, copy=True)

    def numpy_into_native(self, src, arr):
        np.copyto(arr, src, casting="unsafe")

    def _seed(self, seed):
        self.rng.reseed(seed)


@hookimpl
def singa_backends():
    return [BackendSpec(name="cudaxp", api_version=BACKEND_API_VERSION,
                        create_device=lambda index: HostXpDevice(),
                        kernels=lambda dev: shared_table(numpy_module(), lambda: dev.rng),
                        device_count=lambda: 1)]
