"""PyView: a strided view of a bytearray, the pyref backend's native array type."""

from __future__ import annotations

import math
import struct

from singa import backend as sb

#: struct format of each SINGA dtype (little-endian, no padding).
FORMATS = {
    sb.kFloat32: "<f",
    sb.kFloat16: "<e",
    sb.kDouble: "<d",
    sb.kInt: "<i",
    sb.kChar: "<b",
    sb.kUChar: "<B",
}
_STRUCTS = {code: struct.Struct(fmt) for code, fmt in FORMATS.items()}
_INT_BITS = {sb.kInt: 32, sb.kChar: 8, sb.kUChar: 8}


def is_float(code: int) -> bool:
    return code in sb.FLOATS


def convert(code: int, value):
    """``value`` as stored in dtype ``code``: floats round, ints truncate toward zero and wrap."""
    if is_float(code):
        return float(value)
    v = math.trunc(value)
    bits = _INT_BITS[code]
    if code == sb.kUChar:
        return v % (1 << bits)
    half = 1 << (bits - 1)
    return (v + half) % (1 << bits) - half


class PyView:
    """Elements ``offset + sum(i_k * strides[k])`` (in elements) of a bytearray."""

    __slots__ = ("buf", "code", "shape", "strides", "offset", "_st")

    def __init__(self, buf: bytearray, code: int, shape: tuple, strides: tuple, offset: int):
        self.buf = buf
        self.code = code
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offset = offset
        self._st = _STRUCTS[code]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def positions(self, shape: tuple | None = None) -> list[int]:
        """Element positions in row-major order, broadcast to ``shape`` (numpy rules)."""
        shape = self.shape if shape is None else tuple(shape)
        pad = len(shape) - self.ndim
        strides = [0] * pad + [0 if d == 1 else s for d, s in zip(self.shape, self.strides)]
        pos = [self.offset]
        for d, s in zip(shape, strides):
            pos = [p + i * s for p in pos for i in range(d)]
        return pos

    def read(self, shape: tuple | None = None) -> list:
        """Values in row-major order (broadcast to ``shape``)."""
        unpack = self._st.unpack_from
        size = self._st.size
        buf = self.buf
        return [unpack(buf, p * size)[0] for p in self.positions(shape)]

    def write(self, values) -> None:
        """Store ``values`` (row-major, converted to this dtype) into the view."""
        pack = self._st.pack_into
        size = self._st.size
        buf = self.buf
        code = self.code
        for p, v in zip(self.positions(), values):
            v = convert(code, v)
            try:
                pack(buf, p * size, v)
            except (OverflowError, struct.error):  # beyond the float range: infinity
                pack(buf, p * size, math.copysign(math.inf, v))

    def __repr__(self) -> str:
        return (
            f"<PyView {sb.dtype_name(self.code)}{list(self.shape)} strides "
            f"{list(self.strides)} offset {self.offset}>"
        )
