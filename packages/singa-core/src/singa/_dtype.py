"""SINGA dtype codes and their numpy equivalents.

SINGA names dtypes by the integer codes of its protobuf enum (``kFloat32 = 0`` ...). Those codes
are the public currency (``tensor.float32``); numpy dtypes are the lingua franca of kernels.
"""

from __future__ import annotations

import numpy as np

from .errors import DtypeMismatchError

kFloat32 = 0
kFloat16 = 1
kInt = 2
kChar = 3
kDouble = 4
kUChar = 5

NP_DTYPE = {
    kFloat32: np.dtype(np.float32),
    kFloat16: np.dtype(np.float16),
    kInt: np.dtype(np.int32),
    kChar: np.dtype(np.int8),
    kDouble: np.dtype(np.float64),
    kUChar: np.dtype(np.uint8),
}
NAME = {
    kFloat32: "float32",
    kFloat16: "float16",
    kInt: "int32",
    kChar: "int8",
    kDouble: "float64",
    kUChar: "uint8",
}
ITEMSIZE = {code: dt.itemsize for code, dt in NP_DTYPE.items()}
FLOATS = frozenset((kFloat32, kFloat16, kDouble))
_FROM_NP = {dt: code for code, dt in NP_DTYPE.items()}
_FROM_STR = {
    "float": kFloat32, "float32": kFloat32, "float16": kFloat16, "half": kFloat16,
    "int": kInt, "int32": kInt, "int8": kChar, "char": kChar, "float64": kDouble,
    "double": kDouble, "uint8": kUChar,
}


def code_of(dtype) -> int:
    """Normalise a SINGA code, numpy dtype or name to a SINGA dtype code."""
    if type(dtype) is int and dtype in NP_DTYPE:
        return dtype
    if isinstance(dtype, str):
        try:
            return _FROM_STR[dtype]
        except KeyError:
            pass
    else:
        try:
            return _FROM_NP[np.dtype(dtype)]
        except (TypeError, KeyError):
            pass
    raise DtypeMismatchError(
        f"unsupported dtype {dtype!r}; SINGA supports {sorted(_FROM_STR)} "
        "(tensor.float32, tensor.float16, tensor.int32, ...)"
    )


def name_of(code: int) -> str:
    return NAME.get(code, f"dtype#{code}")
