"""Test backend ``cudaxp``: the CUDA backend's shared array-module kernels on numpy.

Also ``cudahost``: the CUDA C kernels of ``cu/*.cu``, built for the CPU with g++ (see
``hostcu.py``) and launched by the GPU's own launcher code, so the conformance kit checks them
too.

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

    def __init__(self, backend="cudaxp"):
        super().__init__(backend, 0, _Bytes())
        self.rng = PhiloxState()
        self.am = numpy_module()

    def native(self, ct):
        isz = ITEMSIZE[ct.dtype_code]
        return np.ndarray(ct.dims, NP_DTYPE[ct.dtype_code], ct.block.data, ct.offset * isz,
                          tuple(s * isz for s in ct.strides))

    def native_to_numpy(self, arr):
        return np.array(arr, copy=True)

    def numpy_into_native(self, src, arr):
        np.copyto(arr, src, casting="unsafe")

    def _seed(self, seed):
        self.rng.reseed(seed)


def _cu_table(dev):
    """The CUDA C kernels (``cu_kernels.kernels``, the GPU's launchers) over host builds of the
    ``.cu`` sources, plus the shared kernels the fused ones are checked against or built on:
    Copy (the dispatcher makes inputs contiguous with it), Conv2d (which the fused
    convolutions run before their epilogue, as the GPU runs cuDNN's), and Add and ReLU (the
    fused Add+ReLU and the epilogues are checked bitwise against them); ReLUBackward, the
    second half of the fused pooling backward, is elementwise.cu's."""
    from hostcu import HostModules

    from singa_cuda import cu_kernels

    shared = shared_table(dev.am, lambda: dev.rng)
    table = {name: shared[name] for name in ("Copy", "Conv2d", "Add", "ReLU")}
    table.update(cu_kernels.kernels(dev, modules=HostModules(), conv=shared["Conv2d"]))
    return table


def _full_table(dev):
    """The whole kernel table a CudaGPU registers (``kernels.kernel_table``) except cuDNN:
    the shared kernels, then every CUDA C kernel (host builds) over the ops the plan gives
    them, the fused convolutions running the shared Conv2d as the GPU runs cuDNN's."""
    from hostcu import HostModules

    from singa_cuda import cu_kernels

    table = shared_table(dev.am, lambda: dev.rng)
    table.update(cu_kernels.kernels(dev, modules=HostModules(), conv=table["Conv2d"]))
    return table


def _cu_probe():
    from hostcu import compiler

    if compiler() is None:
        raise RuntimeError("no C++ compiler (g++) to build the .cu kernels for the host")


@hookimpl
def singa_backends():
    return [
        BackendSpec(name="cudaxp", api_version=BACKEND_API_VERSION,
                    create_device=lambda index: HostXpDevice(),
                    kernels=lambda dev: shared_table(dev.am, lambda: dev.rng),
                    device_count=lambda: 1),
        BackendSpec(name="cudahost", api_version=BACKEND_API_VERSION,
                    create_device=lambda index: HostXpDevice("cudahost"), kernels=_cu_table,
                    probe=_cu_probe, device_count=lambda: 1),
        BackendSpec(name="cudafull", api_version=BACKEND_API_VERSION,
                    create_device=lambda index: HostXpDevice("cudafull"), kernels=_full_table,
                    probe=_cu_probe, device_count=lambda: 1),
    ]
