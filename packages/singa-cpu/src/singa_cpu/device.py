"""CppCPU: numpy arrays as native buffers."""

from __future__ import annotations

import numpy as np
from singa.backend import ITEMSIZE, NP_DTYPE, Device

_ALIGN = 64


class NumpyAllocator:
    """Raw host buffers: 64-byte aligned uint8 numpy arrays (freed by the garbage collector)."""

    def alloc(self, nbytes: int):
        raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
        shift = (-raw.ctypes.data) % _ALIGN
        return raw[shift:shift + nbytes]

    def free(self, buf) -> None:
        pass

    def zero(self, buf, nbytes: int) -> None:
        buf[:nbytes] = 0

    def sub(self, buf, offset: int, nbytes: int):
        """Bytes [offset, offset + nbytes) of ``buf`` (a view: graphs pack arenas with it)."""
        return buf[offset:offset + nbytes]


class CppCPU(Device):
    """The host CPU (SINGA's CppCPU); its id() is -1."""

    lang = "cpp"

    def __init__(self):
        super().__init__("cpu", -1, NumpyAllocator())
        self.rng = np.random.default_rng(self.rand_seed)  # SetRandSeed reseeds it (_seed)
        self._chains = None

    def make_native(self, ct, buf):
        isz = ITEMSIZE[ct.dtype_code]
        if ct.contig:
            return np.ndarray(ct.dims, NP_DTYPE[ct.dtype_code], buf, ct.offset * isz)
        return np.ndarray(ct.dims, NP_DTYPE[ct.dtype_code], buf, ct.offset * isz,
                          tuple(s * isz for s in ct.strides))

    @property
    def conv_workspace(self):
        """The im2col buffers the convolution kernels share (:meth:`Device.workspace`)."""
        return self.workspace("conv")

    def chain_compiler(self):
        """Elementwise chains compiled with numba (see kernels.chains)."""
        if self._chains is None:
            from .kernels.chains import ChainCompiler

            self._chains = ChainCompiler()
        return self._chains

    def native_to_numpy(self, arr):
        return np.array(arr, copy=True)

    def numpy_into_native(self, src, arr) -> None:
        np.copyto(arr, src, casting="unsafe")

    def _seed(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
