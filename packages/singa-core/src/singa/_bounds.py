"""Range checks of index tensors, shared by every backend so all raise one error and message.

A kernel that indexes memory with values it reads from a tensor (Take, ScatterAdd,
GatherElements, ScatterElements, the class ids of the losses) calls :func:`check_indices` on a
host copy of the indices before it launches; nothing is read or written out of bounds.
"""

from __future__ import annotations

import numpy as np

from .errors import DtypeMismatchError, IndexOutOfRangeError

__all__ = ["check_indices", "integer_indices"]


def check_indices(op: str, idx: np.ndarray, n: int, negative: bool = True,
                  what: str = "index") -> None:
    """Raise :class:`~singa.errors.IndexOutOfRangeError` unless every value of ``idx`` lies in
    ``[-n, n)`` (``negative=True``, Python/ONNX convention) or ``[0, n)``.

    Parameters
    ----------
    op : str
        Operator name, for the message.
    idx : numpy.ndarray
        Host copy of the indices (any integer dtype).
    n : int
        Length of the indexed axis (number of classes for a loss).
    negative : bool
        Whether ``-k`` means ``n - k``.
    what : str
        What the values are ("index", "class id"), for the message.
    """
    if idx.size == 0:
        return
    lo = -n if negative else 0
    if idx.min() >= lo and idx.max() < n:  # the common case: two reductions, no mask
        return
    bad = (idx < lo) | (idx >= n)
    first = int(idx[bad].flat[0])
    valid = f"[{lo}, {n})" if n else "none (the axis is empty)"
    raise IndexOutOfRangeError(
        f"{op}: {what} {first} is out of range for an axis of length {n} "
        f"({int(bad.sum())} of {idx.size} values are outside {valid}); check the ids against "
        "the size they index (e.g. Embedding's vocabulary size, the number of classes)"
    )


def integer_indices(op: str, values) -> np.ndarray:
    """``values`` (a list, an array, a tensor's host copy) as an int64 array of indices.

    Integer values pass; so do floats that hold whole numbers (SINGA's tensors default to
    float32, so ids often arrive as 1.0, 2.0). A fractional, infinite or NaN value, a bool or
    a non-numeric value raises :class:`~singa.errors.DtypeMismatchError` naming it: 1.9 is
    never truncated to 1.
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iu" or arr.size == 0:
        return arr.astype(np.int64)
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr) & (np.floor(arr) == arr)
        if whole.all():
            return arr.astype(np.int64)
        bad = arr[~whole].flat[0].item()
        raise DtypeMismatchError(
            f"{op}: index {bad!r} is not a whole number ({int((~whole).sum())} of {arr.size} "
            f"{arr.dtype} indices are not); indices are integers: pass ints or an int32 tensor "
            "(round or floor the values first if that is what you mean)")
    raise DtypeMismatchError(f"{op}: indices must be integers, got {arr.dtype} values "
                             f"{arr.ravel()[:3].tolist()}; pass ints or an int32 tensor")
