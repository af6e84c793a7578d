"""A minimal numpy-backed device and a BackendSpec factory shared by the test plugins."""

from __future__ import annotations

import numpy as np
from singa.backend import BACKEND_API_VERSION, ITEMSIZE, NP_DTYPE, BackendSpec, Device


class _Alloc:
    def alloc(self, nbytes):
        return np.zeros(nbytes, np.uint8)

    def free(self, buf):
        pass

    def zero(self, buf, nbytes):
        buf[:nbytes] = 0


class FakeDevice(Device):
    """Native arrays are numpy views of uint8 buffers (like the CPU backend, minus kernels)."""

    def __init__(self, backend: str, index: int):
        super().__init__(backend, index, _Alloc())

    def native(self, ct):
        isz = ITEMSIZE[ct.dtype_code]
        return np.ndarray(
            ct.dims, NP_DTYPE[ct.dtype_code], ct.block.data, ct.offset * isz,
            tuple(s * isz for s in ct.strides)
        )

    def native_to_numpy(self, arr):
        return np.array(arr)

    def numpy_into_native(self, src, arr):
        np.copyto(arr, src, casting="unsafe")


def _copy(ins, outs, attrs):
    np.copyto(outs[0], ins[0])


def _add(ins, outs, attrs):
    np.add(ins[0], ins[1], out=outs[0])


KERNELS = {"Copy": _copy, "Add": _add}


def spec(name: str = "fake", count: int = 2, **kw) -> BackendSpec:
    """A BackendSpec for a FakeDevice backend ``name`` with ``count`` devices."""
    kw.setdefault("api_version", BACKEND_API_VERSION)
    return BackendSpec(
        name=name,
        create_device=lambda index: FakeDevice(name, index),
        kernels=lambda device: KERNELS,
        device_count=lambda: count,
        install_hint=f"pip install singa-{name}",
        **kw,
    )
