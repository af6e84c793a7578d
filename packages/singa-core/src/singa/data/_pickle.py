"""A restricted unpickler for CIFAR's python-pickle batches.

A pickle can call any importable function while loading, so an untrusted pickle is a program.
:class:`RestrictedUnpickler` admits only the handful of globals that a pickled numpy array
needs, and even those are replaced by local builders: numpy's own ``__setstate__`` never sees
data from the file. Arrays must have a plain numeric dtype; the loaded object may contain
only dicts, lists, tuples, bytes, str, numbers, None and such arrays. Everything else raises
:class:`UnsafePickleError` naming the offending global.
"""

from __future__ import annotations

import io
import os
import pickle
import re

import numpy as np

from ..errors import SingaError

__all__ = ["RestrictedUnpickler", "UnsafePickleError", "restricted_load"]

# plain numeric dtypes only: bool, (u)int 1/2/4/8 bytes, float 2/4/8 bytes
_TYPESTR = re.compile(r"^[|<>=]?(b1|[iu][1248]|f[248])$")
_MAX_ELEMENTS = 1 << 31


class UnsafePickleError(SingaError, pickle.UnpicklingError):
    """A pickle asked for something a data batch never needs (a function, a class, ...)."""


class _NDArrayType:
    """Stands for ``numpy.ndarray`` inside a pickle; it can be named but never called."""

    def __init__(self, *args, **kwargs):
        raise UnsafePickleError("a pickle tried to call numpy.ndarray directly; refused")


class _DtypeBuilder:
    """Stands for ``numpy.dtype(typestr, align, copy)`` until its state gives the byte order."""

    def __init__(self, typestr=None, align=False, copy=True):
        if isinstance(typestr, bytes):
            typestr = typestr.decode("ascii", "replace")
        if not isinstance(typestr, str) or not _TYPESTR.match(typestr):
            raise UnsafePickleError(f"dtype {typestr!r} refused: only plain numeric dtypes "
                                    "(bool, int, uint, float) are allowed")
        self.typestr = typestr
        self.dtype = np.dtype(typestr)

    def __setstate__(self, state):
        # numpy's dtype state: (version, byteorder, subdescr, names, fields, elsize, ...)
        if not isinstance(state, tuple) or len(state) < 5:
            raise UnsafePickleError(f"malformed dtype state {state!r}")
        order, sub, names, fields = state[1], state[2], state[3], state[4]
        if sub is not None or names is not None or fields is not None:
            raise UnsafePickleError("structured or sub-array dtypes are refused")
        if isinstance(order, bytes):
            order = order.decode("ascii", "replace")
        if order not in ("<", ">", "|", "="):
            raise UnsafePickleError(f"dtype byte order {order!r} refused")
        base = self.typestr.lstrip("|<>=")
        self.dtype = np.dtype(base if order in ("|", "=") else order + base)


def _resolve_dtype(d) -> np.dtype:
    if isinstance(d, _DtypeBuilder):
        return d.dtype
    raise UnsafePickleError(f"array dtype must come from numpy.dtype, got {type(d).__name__}")


def _shape(shape) -> tuple:
    if not isinstance(shape, tuple) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise UnsafePickleError(f"array shape {shape!r} refused")
    if int(np.prod(shape, dtype=np.int64)) > _MAX_ELEMENTS:
        raise UnsafePickleError(f"array shape {shape} is implausibly large")
    return shape


def _from_bytes(raw, dtype: np.dtype, shape: tuple, fortran: bool) -> np.ndarray:
    if isinstance(raw, str):  # protocol-2 pickles written by Python 2 under encoding="latin1"
        raw = raw.encode("latin1")
    if not isinstance(raw, (bytes, bytearray)):
        raise UnsafePickleError(f"array data must be bytes, got {type(raw).__name__}")
    n = int(np.prod(shape, dtype=np.int64))
    if len(raw) != n * dtype.itemsize:
        raise UnsafePickleError(f"array data has {len(raw)} bytes; shape {shape} of {dtype} "
                                f"needs {n * dtype.itemsize}")
    flat = np.frombuffer(bytes(raw), dtype=dtype)
    return flat.reshape(shape, order="F" if fortran else "C").copy()


class _ArrayBuilder:
    """Stands for ``numpy.core.multiarray._reconstruct(ndarray, shape, typecode)``; the
    array itself is built from the validated state."""

    def __init__(self, subtype, shape, typecode):
        if subtype is not _NDArrayType:
            raise UnsafePickleError("only plain numpy.ndarray may be reconstructed, not "
                                    f"{subtype!r}")
        self.array = None

    def __setstate__(self, state):
        # numpy's ndarray state: (version, shape, dtype, is_fortran, rawdata) or without version
        if isinstance(state, tuple) and len(state) == 5:
            state = state[1:]
        if not isinstance(state, tuple) or len(state) != 4:
            raise UnsafePickleError("malformed ndarray state")
        shape, dtype, fortran, raw = state
        self.array = _from_bytes(raw, _resolve_dtype(dtype), _shape(tuple(shape)),
                                 bool(fortran))


def _frombuffer(buf, dtype, shape, order):
    """Protocol-5 arrays: ``numpy._core.numeric._frombuffer(buffer, dtype, shape, order)``."""
    if isinstance(buf, pickle.PickleBuffer):
        buf = bytes(buf.raw())
    return _from_bytes(buf, _resolve_dtype(dtype), _shape(tuple(shape)), order == "F")


def _latin1_encode(text, encoding="utf-8", errors="strict"):
    """Protocol-2 pickles from Python 3 store bytes as ``_codecs.encode(str, 'latin1')``."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise UnsafePickleError(f"_codecs.encode is allowed only for latin1 text, got "
                                f"{type(text).__name__} with encoding {encoding!r}")
    return text.encode("latin1")


_ALLOWED = {
    ("numpy", "ndarray"): _NDArrayType,
    ("numpy", "dtype"): _DtypeBuilder,
    ("numpy.core.multiarray", "_reconstruct"): _ArrayBuilder,
    ("numpy._core.multiarray", "_reconstruct"): _ArrayBuilder,
    ("numpy.core.numeric", "_frombuffer"): _frombuffer,
    ("numpy._core.numeric", "_frombuffer"): _frombuffer,
    ("_codecs", "encode"): _latin1_encode,
}


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickle numpy arrays, lists, dicts, tuples, bytes, str and numbers; refuse the rest.

    ``find_class`` answers only the globals a pickled numpy array needs (with local builders
    standing in for numpy's functions); any other global raises :class:`UnsafePickleError`.
    ``encoding='bytes'`` (default) reads Python 2 pickles such as the CIFAR batches.
    """

    def __init__(self, file, *, source: str = "<pickle>", encoding: str = "bytes"):
        super().__init__(file, encoding=encoding)
        self.source = source

    def find_class(self, module, name):
        """The global ``module.name`` if a pickled numpy array needs it, else refuse.

        Raises
        ------
        UnsafePickleError
            For any global outside the allowed table (loading it could run code).
        """
        entry = _ALLOWED.get((module, name))
        if entry is None:
            raise UnsafePickleError(
                f"{self.source}: refusing to unpickle {module}.{name}. A data batch may hold "
                "only numpy arrays, lists, dicts and bytes; this file is not such a batch or "
                "has been tampered with (loading it with plain pickle could run code)."
            )
        return entry

    def persistent_load(self, pid):
        """Refuse every persistent id (a data batch has none).

        Raises
        ------
        UnsafePickleError
            Always.
        """
        raise UnsafePickleError(f"{self.source}: persistent ids are refused")

    def load(self):
        """Read one object, then replace the array builders by numpy arrays and check every
        nested value is an allowed type.

        Returns
        -------
        object
            Arrays, lists, dicts, tuples, bytes, str and numbers only.
        """
        return _finish(super().load(), self.source)


_SCALARS = (str, bytes, int, float, bool, type(None))


def _finish(obj, source, depth=0, memo=None):
    """Replace array builders by their arrays and check that nothing else slipped in.

    ``memo`` maps ``id`` of every container already converted to its result, so an object the
    pickle shares (its memo lets 258 bytes name 2**22 paths to one list: "billion laughs") is
    converted once and stays shared, as plain pickle would leave it.
    """
    if memo is None:
        memo = {}
    if depth > 100:
        raise UnsafePickleError(f"{source}: nesting is implausibly deep")
    if isinstance(obj, _SCALARS):
        return obj
    key = id(obj)
    if key in memo:
        return memo[key][1]
    if isinstance(obj, _ArrayBuilder):
        if obj.array is None:
            raise UnsafePickleError(f"{source}: an array was declared but never filled")
        out = obj.array
    elif isinstance(obj, np.ndarray):
        out = obj
    elif isinstance(obj, bytearray):
        out = bytes(obj)
    elif isinstance(obj, dict):
        out = {}
        memo[key] = (obj, out)  # registered before the children: cycles end here
        for k, v in obj.items():
            if not isinstance(k, (str, bytes, int)):
                raise UnsafePickleError(f"{source}: dict key of type {type(k).__name__} "
                                        "refused")
            out[k] = _finish(v, source, depth + 1, memo)
        return out
    elif isinstance(obj, list):
        out = []
        memo[key] = (obj, out)
        out.extend(_finish(v, source, depth + 1, memo) for v in obj)
        return out
    elif isinstance(obj, tuple):
        out = tuple(_finish(v, source, depth + 1, memo) for v in obj)
    else:
        raise UnsafePickleError(f"{source}: objects of type {type(obj).__name__} are refused; "
                                "only arrays, lists, dicts and bytes are allowed")
    memo[key] = (obj, out)  # keep obj alive so its id is not reused while converting
    return out


def restricted_load(file_or_path):
    """Load a pickle with :class:`RestrictedUnpickler` from a path, bytes or binary file."""
    if isinstance(file_or_path, (bytes, bytearray)):
        return RestrictedUnpickler(io.BytesIO(file_or_path), source="<bytes>").load()
    if isinstance(file_or_path, (str, os.PathLike)):
        with open(file_or_path, "rb") as fh:
            return RestrictedUnpickler(fh, source=os.fspath(file_or_path)).load()
    return RestrictedUnpickler(file_or_path,
                               source=getattr(file_or_path, "name", "<file>")).load()
