"""Transposing copies through OpenBLAS's ``cblas_somatcopy`` / ``cblas_domatcopy``.

numpy copies a transposed view (``np.copyto(out, a.T)``) in the output's order, so every
element it writes reads another cache line of the source; when the source's rows are a
power-of-two number of bytes apart those lines also fall into one cache set. OpenBLAS's
``omatcopy`` (``B = alpha A^T``) copies block by block, but a call costs ~14 us whatever the
size. Measured on the 2-vCPU AMD Zen 3 host of docs/benchmarks.md (numpy 2.4.6, OpenBLAS
0.3.31, float32, us per copy of one matrix A (rows x cols) seen transposed, numpy / omatcopy):
256x1024 892 / 97, 1024x256 417 / 117, 512x512 602 / 97, 256x256 86 / 28, 64x512 73 / 19,
128x256 43 / 20, 256x128 41 / 20; but 512x64 33 / 36, 200x300 21 / 24, 128x128 20 / 16,
128x64 3.5 / 15, and 32 matrices of 128x64 147 / 269. So a matrix goes to omatcopy from
``MIN_MATRIX_ITEMS`` elements whose source rows are at least ``MIN_LDA_BYTES`` apart.

:func:`copy` takes a copy whose output is C-contiguous and whose source, once adjacent axes
that are contiguous with each other are merged, has a contiguous second-last axis and a
strided last axis: a batch of transposed matrices (a Linear layer's weight seen transposed,
attention's keys as (batch, heads, dim, seq), NHWC to NCHW). Each matrix is one call.

The elements are copied bit for bit (the probe below checks it on every float class) with
one exception: OpenBLAS multiplies by ``alpha = 1``, so a *signaling* NaN comes out as the
quiet NaN of the same payload, as from any arithmetic. No op of singa makes one; numpy's copy
keeps it. ``ENABLED = False`` leaves every copy to numpy.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from . import _threads

#: Whether :func:`copy` may take a copy (else numpy's ``copyto`` does all of them).
ENABLED = True

#: Copies of fewer elements stay numpy's.
MIN_ITEMS = 32768

#: A batch of more matrices than this stays numpy's (one call per matrix).
MAX_MATRICES = 4096

#: The matrices of a batch have at least this many elements each (else numpy's copy: an
#: omatcopy call costs ~14 us, numpy's copy of a smaller matrix less; see above).
MIN_MATRIX_ITEMS = 32768

#: ... and their source rows are at least this many bytes apart (closer rows share cache
#: lines and sets less, and numpy's copy is as fast; 512x64 float32 above).
MIN_LDA_BYTES = 512

# (float32 symbol, float64 symbol, 64-bit integers): numpy's own wheels are ILP64
_SYMBOLS = (("scipy_cblas_somatcopy64_", "scipy_cblas_domatcopy64_", True),
            ("cblas_somatcopy64_", "cblas_domatcopy64_", True),
            ("scipy_cblas_somatcopy", "scipy_cblas_domatcopy", False),
            ("cblas_somatcopy", "cblas_domatcopy", False))

_ROW_MAJOR, _TRANS = 101, 112  # CBLAS_ORDER.CblasRowMajor, CBLAS_TRANSPOSE.CblasTrans

_fns = None  # {np.dtype: ctypes function}, empty when there are none or the probe failed


def _typed(fn, real, ilp64):
    """``fn`` (an omatcopy) with its ctypes argument types: CBLAS enums as C ints, integers
    64-bit (ILP64) or 32-bit, ``alpha`` as ``real``."""
    integer = ctypes.c_int64 if ilp64 else ctypes.c_int32
    fn.restype = None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, integer, integer, real, ctypes.c_void_p,
                   integer, ctypes.c_void_p, integer]
    return fn


def _probe(fn, dtype) -> bool:
    """Whether ``fn`` transposes a matrix of every class of value (random bits: normal
    numbers, subnormals, zeros of both signs, infinities, quiet NaNs with payloads) bit for bit;
    signaling NaNs are left out (they come out quiet, see the module's docstring)."""
    ints = np.uint32 if dtype == np.float32 else np.uint64
    bits = np.random.default_rng(0).integers(0, np.iinfo(ints).max, size=(13, 21), dtype=ints,
                                             endpoint=True)
    a = bits.view(dtype)
    signaling = np.isnan(a) & ((bits >> ints(22 if dtype == np.float32 else 51)) & ints(1) == 0)
    a[signaling] = np.nan  # replaced by numpy's quiet NaN
    a[0, :6] = [0.0, -0.0, np.inf, -np.inf, np.finfo(dtype).smallest_subnormal, np.nan]
    out = np.empty((21, 13), dtype)
    fn(_ROW_MAJOR, _TRANS, 13, 21, 1.0, a.ctypes.data, 21, out.ctypes.data, 13)
    return bool((out.view(ints) == a.T.view(ints)).all())


def _functions() -> dict:
    global _fns
    if _fns is None:
        found = _threads._symbol_pair(_SYMBOLS)
        typed = {} if found is None else {
            np.dtype(np.float32): _typed(found[0], ctypes.c_float, found[2][2]),
            np.dtype(np.float64): _typed(found[1], ctypes.c_double, found[2][2])}
        _fns = {dt: fn for dt, fn in typed.items() if _probe(fn, dt)}
    return _fns


def symbol() -> str | None:
    """The float32 function :func:`copy` calls (its symbol name), or None (numpy copies)."""
    fn = _functions().get(np.dtype(np.float32))
    return None if fn is None else fn.__name__


def _merged(shape, strides):
    """``shape`` and element ``strides`` without length-1 axes and with every pair of
    adjacent axes that are contiguous with each other (in the source) merged into one."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    out = []
    for n, s in dims:
        if out and out[-1][1] == s * n:
            out[-1] = (out[-1][0] * n, s)
        else:
            out.append((n, s))
    return out


def copy(src: np.ndarray, dst: np.ndarray) -> bool:
    """``dst[...] = src`` as a batch of transposing copies (see the module's docstring);
    False, having done nothing, where the copy does not take that form (numpy's then)."""
    if (not ENABLED or dst.size < MIN_ITEMS or src.dtype != dst.dtype
            or dst.dtype.type not in (np.float32, np.float64) or src.shape != dst.shape
            or not dst.flags.c_contiguous or src.flags.c_contiguous):
        return False
    isz = dst.itemsize
    if any(s <= 0 or s % isz for s in src.strides):
        return False
    dims = _merged(src.shape, [s // isz for s in src.strides])
    if len(dims) < 2 or dims[-2][1] != 1:
        return False
    (cols, _), (rows, lda) = dims[-2], dims[-1]  # source matrices: rows x cols, lda apart
    if lda < cols:
        return False
    outer = dims[:-2]
    count = math.prod(n for n, _ in outer)
    if count > MAX_MATRICES or rows * cols < MIN_MATRIX_ITEMS or lda * isz < MIN_LDA_BYTES:
        return False
    fn = _functions().get(dst.dtype)
    if fn is None or np.may_share_memory(src, dst):
        return False
    a0, b0, step = src.ctypes.data, dst.ctypes.data, rows * cols * isz
    for k, idx in enumerate(np.ndindex(*(n for n, _ in outer))):
        off = sum(i * s for i, (_, s) in zip(idx, outer)) * isz
        fn(_ROW_MAJOR, _TRANS, rows, cols, 1.0, a0 + off, lda, b0 + k * step, rows)
    return True


def contiguous(a: np.ndarray) -> np.ndarray:
    """``np.ascontiguousarray(a)``, a transposed ``a`` copied by :func:`copy`."""
    if a.flags.c_contiguous:
        return a
    out = np.empty(a.shape, a.dtype)
    if not copy(a, out):
        np.copyto(out, a)
    return out
