"""The pyref device: bytearray memory, PyView native arrays, Python's random generator."""

from __future__ import annotations

import random

import numpy as np
from singa.backend import NP_DTYPE, Device

from .view import PyView


class ByteAllocator:
    """Raw memory as ``bytearray`` (never a numpy array)."""

    def alloc(self, nbytes: int) -> bytearray:
        return bytearray(nbytes)

    def free(self, buf) -> None:
        pass

    def zero(self, buf: bytearray, nbytes: int) -> None:
        buf[:nbytes] = bytes(nbytes)


class PyRefDevice(Device):
    """A device whose kernels are plain Python loops over :class:`PyView` objects."""

    lang = "python"

    def __init__(self, index: int):
        super().__init__("pyref", index, ByteAllocator())
        self.rng = random.Random()

    def native(self, ct) -> PyView:
        return PyView(ct.block.data, ct.dtype_code, ct.dims, ct.strides, ct.offset)

    def native_to_numpy(self, arr: PyView):
        return np.array(arr.read(), dtype=NP_DTYPE[arr.code]).reshape(arr.shape)

    def numpy_into_native(self, src, arr: PyView) -> None:
        arr.write(np.asarray(src).reshape(-1).tolist())

    def _seed(self, seed: int) -> None:
        self.rng = random.Random(seed)
