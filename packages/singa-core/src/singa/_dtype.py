"""SINGA dtype codes and their numpy equivalents.

SINGA names dtypes by the integer codes of its protobuf enum (``kFloat32 = 0`` ...). Those codes
are the public currency (``tensor.float32``); numpy dtypes are the lingua franca of kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import DtypeMismatchError

kFloat32 = 0
kFloat16 = 1
kInt = 2
kChar = 3
kDouble = 4
kUChar = 5

NP_DTYPE: dict[int, np.dtype[Any]] = {
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


def _promoted(a: int, b: int) -> int:
    if (a in FLOATS) != (b in FLOATS):  # an integer meets a float: the float's dtype
        return a if a in FLOATS else b
    r = np.promote_types(NP_DTYPE[a], NP_DTYPE[b])
    return _FROM_NP.get(r, kInt)  # uint8 with int8 is int16 in numpy, not a SINGA dtype


#: ``PROMOTE[a, b]``: the dtype an elementwise op on tensors of dtypes ``a`` and ``b``
#: computes in and returns. numpy's ``promote_types`` (float16 with float32 is float32, int8
#: with int32 is int32), except where an integer meets a float: the result is the float's
#: dtype, as in PyTorch and JAX (numpy widens int32 with float32 or float16 to float64, which
#: would put an int mask added to float32 activations into float64). uint8 with int8 gives
#: int32, the smallest SINGA integer that holds both. See docs/compatibility.md.
PROMOTE = {(a, b): _promoted(a, b) for a in NP_DTYPE for b in NP_DTYPE}


def code_of(dtype: Any) -> int:
    """Normalise a SINGA code, numpy dtype or name to a SINGA dtype code.

    Parameters
    ----------
    dtype : int, str or numpy dtype-like
        A SINGA code (``tensor.float32``), a name (``"float32"``, ``"half"``) or anything
        ``numpy.dtype`` accepts.

    Returns
    -------
    int
        The SINGA dtype code. Raises :class:`singa.errors.DtypeMismatchError` for a dtype
        SINGA does not support.
    """
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
    """The numpy name of SINGA dtype ``code`` (``"float32"``), or ``"dtype#<code>"`` for an
    unknown code."""
    return NAME.get(code, f"dtype#{code}")
