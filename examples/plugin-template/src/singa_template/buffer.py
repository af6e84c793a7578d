"""The native memory of the template device: where a real accelerator's buffers plug in.

A real backend replaces :class:`Buffer` with its device allocation (a pointer or handle) and
:meth:`View.host_array` with kernel launches on that pointer; core never looks inside either.
"""

from __future__ import annotations

import numpy as np
from singa.backend import ITEMSIZE, NP_DTYPE


class Buffer:
    """``nbytes`` bytes of device memory; a sub-buffer aliases a byte range of its parent."""

    __slots__ = ("mem",)

    def __init__(self, mem: memoryview):
        self.mem = mem

    @property
    def nbytes(self) -> int:
        return self.mem.nbytes

    def __repr__(self) -> str:
        return f"<Buffer {self.nbytes}B>"


class Allocator:
    """Raw memory for the device's pool (see ``singa.backend.Allocator``)."""

    def alloc(self, nbytes: int) -> Buffer:
        return Buffer(memoryview(bytearray(nbytes)))

    def free(self, buf: Buffer) -> None:
        """Called when the pool releases a buffer (empty_cache, a graph's arena). Python's GC
        owns this memory; a real device returns its allocation here."""

    def zero(self, buf: Buffer, nbytes: int) -> None:
        buf.mem[:nbytes] = bytes(nbytes)

    def sub(self, buf: Buffer, offset: int, nbytes: int) -> Buffer:
        """Bytes [offset, offset + nbytes) of ``buf``, aliased: graphs pack arenas with it."""
        return Buffer(buf.mem[offset:offset + nbytes])


class View:
    """What kernels receive: elements ``offset + sum(i_k * strides[k])`` of a Buffer, with
    ``offset`` and ``strides`` counted in elements (as a CTensor has them), dtype ``code``."""

    __slots__ = ("buf", "code", "shape", "strides", "offset")

    def __init__(self, buf: Buffer, code: int, shape: tuple, strides: tuple, offset: int):
        self.buf, self.code, self.shape = buf, code, tuple(shape)
        self.strides, self.offset = tuple(strides), offset

    def host_array(self) -> np.ndarray:
        """The view as a numpy array over the buffer's memory (no copy): this device's
        "kernel launch", since its memory is host memory."""
        isz = ITEMSIZE[self.code]
        return np.ndarray(self.shape, NP_DTYPE[self.code], self.buf.mem, self.offset * isz,
                          tuple(s * isz for s in self.strides))

    def __repr__(self) -> str:
        return f"<View {list(self.shape)} strides {list(self.strides)} offset {self.offset}>"
