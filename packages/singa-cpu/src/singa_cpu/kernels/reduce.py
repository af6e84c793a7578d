"""Reductions and softmax."""

from __future__ import annotations

import math

import numpy as np
from singa.backend import Kernel

from ._expf import exp_neg_parts32, neg_pow2_bits
from ._float16 import via_float32
from ._jit import helper, njit
from ._threads import run_ranges, single_threaded_blas


def _axes(x, attrs):
    axes = attrs.get("axes")
    return tuple(range(x.ndim)) if axes is None else tuple(axes)


def _normalized_axes(x, attrs) -> tuple:
    """:func:`_axes` with negative axes counted from the end (none for a 0-d x)."""
    return tuple(a % x.ndim for a in _axes(x, attrs)) if x.ndim else ()


def _reducer(fn):
    def kernel(ins, outs, attrs):
        x = ins[0]
        fn(x, axis=_axes(x, attrs), keepdims=attrs.get("keepdims", False), out=outs[0])

    return kernel


def _sum(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axes = _normalized_axes(x, attrs)
    keep = attrs.get("keepdims", False)
    if x.dtype == np.float16:  # accumulate in float32 like the GPU libraries do
        out[...] = np.sum(x, axis=axes, keepdims=keep, dtype=np.float32)
    elif not _sum_outer(x, axes, out):
        np.sum(x, axis=axes, keepdims=keep, out=out)


@njit(nogil=True, fastmath={"reassoc"})
def _row_sums(x2, out, count):
    """``out[i] = sum(x2[i]) / count`` (``count`` 0: the sums themselves), each row summed in
    vector lanes (``reassoc``: numba vectorises the sum; the bits follow the vector width)."""
    rows, n = x2.shape
    zero = x2.dtype.type(0)
    for i in range(rows):
        s = zero
        for j in range(n):
            s += x2[i, j]
        out[i] = s / count if count else s


def _outer(x, axes, out):
    """``(lead, mid, tail)`` when ``x`` reduced over ``axes`` into ``out`` is a sum over its
    leading and trailing axes keeping a middle run (a bias gradient: ``(N, C, H, W)`` over
    ``(0, 2, 3)``; global average pooling: over ``(2, 3)``, lead 1) on contiguous float
    arrays; else None."""
    kept = [a for a in range(x.ndim) if a not in axes]
    if (not kept or kept != list(range(kept[0], kept[-1] + 1)) or kept[-1] == x.ndim - 1
            or x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous
            or not out.flags.c_contiguous or x.size == 0):
        return None
    lead = math.prod(x.shape[:kept[0]])  # math.prod: np.prod of a tuple costs ~3 us
    mid = math.prod(x.shape[kept[0]:kept[-1] + 1])
    tail = x.size // max(1, lead * mid)
    return (lead, mid, tail) if tail >= 2 else None


def _outer_kernel(x, out, shape, mean: bool):
    """The sum (``mean``: the mean) of ``x`` over the leading and trailing axes of ``shape``
    (see :func:`_outer`) into ``out``, as a function of no arguments: each row of the trailing
    axes summed by :func:`_row_sums` (numpy's reduction over such axes runs one short reduction
    per row: 1152 x 7x7 floats 35 us, 32 x 112x112 71 us; a BLAS product with ones 5.8 and
    ~20 us, these row sums 3.7 and ~10; one AMD Zen 4 core), then the leading axes summed."""
    lead, mid, tail = shape
    x2, out1 = x.reshape(lead * mid, tail), out.reshape(mid)
    sums = _row_sums.serial()
    if lead == 1:  # the mean's division in the same pass
        count = x.dtype.type(tail if mean else 0)
        return lambda: sums(x2, out1, count)
    rows = np.empty(lead * mid, x.dtype)
    zero, count = x.dtype.type(0), x.dtype.type(x.size // mid)

    def run():
        sums(x2, rows, zero)
        np.sum(rows.reshape(lead, mid), axis=0, out=out1)
        if mean:
            np.divide(out1, count, out=out1)

    return run


def _sum_outer(x, axes, out, mean: bool = False) -> bool:
    """:func:`_outer_kernel` run once, when the pattern applies (True), else False."""
    shape = _outer(x, axes, out)
    if shape is None:
        return False
    _outer_kernel(x, out, shape, mean)()
    return True


def _mean(ins, outs, attrs):
    """mean = sum / count; over leading and trailing axes (global average pooling, (N, C, H,
    W) over (2, 3), a squeeze-excitation block's squeeze) by :func:`_outer_kernel`."""
    x, out = ins[0], outs[0]
    axes = _normalized_axes(x, attrs)
    if x.dtype != np.float16 and out.size and _sum_outer(x, axes, out, mean=True):
        return
    out[...] = np.mean(x, axis=axes, keepdims=attrs.get("keepdims", False),
                       dtype=np.float32 if x.dtype == np.float16 else None)


def _bind_outer(mean: bool):
    def bind(ins, outs, attrs):
        """On a replay's arrays, the reduction over leading and trailing axes with its views
        and loop resolved once (see ``bind`` in docs/plugin-authoring.md); None otherwise."""
        x, out = ins[0], outs[0]
        axes = _normalized_axes(x, attrs)
        shape = _outer(x, axes, out)  # None for float16 and empty arrays too
        if shape is None:
            return None
        run = _outer_kernel(x, out, shape, mean)
        return lambda _ins, _outs, _attrs: run()

    return bind


def _argmax(ins, outs, attrs):
    outs[0][...] = np.argmax(ins[0], axis=attrs["axis"], keepdims=attrs.get("keepdims", False))


def _asum(ins, outs, attrs):
    x = ins[0]
    outs[0][...] = np.abs(x).sum(dtype=np.float64 if x.dtype == np.float64 else np.float32)


def _nrm2(ins, outs, attrs):
    x = ins[0]
    acc = np.float64 if x.dtype == np.float64 else np.float32
    flat = x.astype(acc, copy=False).reshape(-1)
    with single_threaded_blas():
        outs[0][...] = np.sqrt(np.dot(flat, flat))


_f32 = np.float32
_F32 = np.dtype(np.float32)
#: Softmax and LogSoftmax (and Softmax's backward) over at least this many elements split
#: their rows across the threads. Measured on 2 cores (AMD Zen 3, float32, medians of 7 x 20
#: calls), one thread / split, ms: forward (8192, 64) 1.19 / 0.79, (2048, 256) 1.25 / 0.78,
#: (1024, 64) 0.18 / 0.25, (64, 1000) 0.16 / 0.23; backward 0.40 / 0.30, 0.39 / 0.34,
#: 0.06 / 0.15, 0.06 / 0.14 (a parallel section costs ~0.1 ms on this VM).
SOFTMAX_PARALLEL_MIN_ITEMS = 1 << 18
SOFTMAX_BACKWARD_PARALLEL_MIN_ITEMS = 1 << 19


U = np.uint64  # unsigned indices in the row loops: signed ones are checked for wraparound,
#               which keeps LLVM from vectorising them (see conv._im2col)


@helper(inline="always", error_model="numpy")
def _max32(a, n):
    """Largest of the first ``n`` (>= 1) elements of the 1-D float32 ``a`` by four running
    maxima (independent chains, so the loop is not bound by one select's latency). NaNs are
    passed over unless the first element is one: the softmax's NaN then comes from the NaN
    element's own ``max - x``, which makes the row sum NaN, as numpy's max would."""
    m0 = m1 = m2 = m3 = a[0]
    j = U(1)
    while j + U(4) <= n:
        v0, v1, v2, v3 = a[j], a[j + U(1)], a[j + U(2)], a[j + U(3)]
        m0 = v0 if v0 > m0 else m0
        m1 = v1 if v1 > m1 else m1
        m2 = v2 if v2 > m2 else m2
        m3 = v3 if v3 > m3 else m3
        j += U(4)
    while j < n:
        v0 = a[j]
        m0 = v0 if v0 > m0 else m0
        j += U(1)
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    return m2 if m2 > m0 else m0


@helper(inline="always", error_model="numpy")
def _dot32(a, b, n, products):
    """Sum of the first ``n`` elements of the 1-D float32 ``a`` (times ``b``'s, each product
    rounded to float32, when ``products``), accumulated in float64 by four running sums and
    rounded to float32 once: as accurate as numpy's pairwise float32 sum on short rows and
    more so on long ones (four float32 sums over a 300000-element row were 1e-4 off)."""
    zero = 0.0
    s0 = s1 = s2 = s3 = zero
    j = U(0)
    while j + U(4) <= n:
        if products:
            s0 += np.float64(a[j] * b[j])
            s1 += np.float64(a[j + U(1)] * b[j + U(1)])
            s2 += np.float64(a[j + U(2)] * b[j + U(2)])
            s3 += np.float64(a[j + U(3)] * b[j + U(3)])
        else:
            s0 += np.float64(a[j])
            s1 += np.float64(a[j + U(1)])
            s2 += np.float64(a[j + U(2)])
            s3 += np.float64(a[j + U(3)])
        j += U(4)
    while j < n:
        s0 += np.float64(a[j] * b[j] if products else a[j])
        j += U(1)
    return _f32((s0 + s1) + (s2 + s3))


@njit(nogil=True, error_model="numpy")
def _softmax_rows32(x, out, r0, r1, log):
    """Softmax (``log``: LogSoftmax) along the last axis of rows r0..r1 of the 2-D
    C-contiguous float32 ``x`` into ``out`` (which may be ``x``): numpy's passes per row (max,
    ``x - max``, exp, sum, then the division, or ``(x - max) - log(sum)``), with the same
    float32 roundings of ``x - max``, of the division and of the difference; exp from
    :func:`._expf.exp_neg_parts32` (only multiplies, adds and selects, which LLVM vectorises;
    relative error under 2e-7 against 1-2 ulps of numpy's), the sum in float64 (as accurate
    as numpy's pairwise float32 sum or more) and its log in float64, rounded once.
    ``x - max <= -87`` gives exp 0 where numpy gives a subnormal (under 2e-38); NaN
    propagates as in numpy: a NaN or +inf in a row, or a row of -inf, makes the row NaN. The
    exps go to a scratch row and ``out`` is written last (a loop that writes the array it
    reads is not vectorised, see elementwise._BLOCK)."""
    n = U(x.shape[1])
    zero = _f32(0.0)
    e = np.empty(n, np.float32)
    bits = np.empty(n, np.int32)
    scale = bits.view(np.float32)  # 2^-k
    for r in range(r0, r1):
        xr, outr = x[r], out[r]
        m = _max32(xr, n)
        for j in range(n):
            kf, e[j] = exp_neg_parts32(m - xr[j])
            bits[j] = neg_pow2_bits(kf)
        for j in range(n):
            t = m - xr[j]
            e[j] = scale[j] * e[j] if t < _f32(87.0) else (t if t != t else zero)
        s = _dot32(e, e, n, False)
        if log:
            lse = _f32(np.log(np.float64(s)))
            for j in range(n):
                e[j] = (xr[j] - m) - lse
            for j in range(n):
                outr[j] = e[j]
        else:
            for j in range(n):
                outr[j] = e[j] / s


@njit(nogil=True, error_model="numpy")
def _softmax_backward_rows32(y, dy, out, r0, r1):
    """``out = (dy - sum(dy * y)) * y`` along the last axis of rows r0..r1 (2-D C-contiguous
    float32; ``out`` may be ``y`` or ``dy``): numpy's roundings (each product, the row sum
    rounded to float32, the difference, the product), the sum by :func:`_dot32`."""
    n = U(y.shape[1])
    g = np.empty(n, np.float32)
    for r in range(r0, r1):
        yr, dyr, outr = y[r], dy[r], out[r]
        s = _dot32(dyr, yr, n, True)
        for j in range(n):
            g[j] = (dyr[j] - s) * yr[j]
        for j in range(n):
            outr[j] = g[j]


def _last_axis_rows(axis, *arrays):
    """The arrays as 2-D (rows, last axis) float32 views when the softmax runs along the last
    axis of C-contiguous float32 arrays of one shape (the rows the loops take), else None (an
    empty last axis too: the ops refuse it, and the loops read a row's first element)."""
    a = arrays[0]
    if (a.ndim == 0 or a.shape[-1] == 0 or axis % a.ndim != a.ndim - 1 or a.dtype != _F32
            or any(b.dtype != _F32 or b.shape != a.shape or not b.flags.c_contiguous
                   for b in arrays)):
        return None
    n = a.shape[-1]
    return [b.reshape(-1, n) for b in arrays]


def _run_rows(loop, rows2d, min_items, *args):
    """``loop(*rows2d, r0, r1, *args)`` over every row, the rows split across the threads
    from ``min_items`` elements on (rows are independent)."""
    rows, size = rows2d[0].shape[0], rows2d[0].size
    run_ranges(lambda r0, r1: loop(*rows2d, r0, r1, *args), rows,
               parallel=size >= min_items and rows > 1)


def _softmax(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axis = attrs.get("axis", -1)
    rows = _last_axis_rows(axis, x, out)
    if rows is not None:
        _run_rows(_softmax_rows32, rows, SOFTMAX_PARALLEL_MIN_ITEMS, False)
        return
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)


def _log_softmax(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axis = attrs.get("axis", -1)
    rows = _last_axis_rows(axis, x, out)
    if rows is not None:
        _run_rows(_softmax_rows32, rows, SOFTMAX_PARALLEL_MIN_ITEMS, True)
        return
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))


def _softmax_backward(ins, outs, attrs):
    y, dy = ins
    out = outs[0]
    axis = attrs.get("axis", -1)
    rows = _last_axis_rows(axis, y, dy, out)
    if rows is not None:
        _run_rows(_softmax_backward_rows32, rows, SOFTMAX_BACKWARD_PARALLEL_MIN_ITEMS)
        return
    np.multiply(dy, y, out=out)
    s = out.sum(axis=axis, keepdims=True)
    np.subtract(dy, s, out=out)
    out *= y


# several numpy passes each: float16 is computed in float32 and rounded once (see Sigmoid)
_softmax = via_float32(_softmax)
_log_softmax = via_float32(_log_softmax)
_softmax_backward = via_float32(_softmax_backward)

KERNELS = {
    "Sum": Kernel(_sum, bind=_bind_outer(False)),
    "ReduceMean": Kernel(_mean, bind=_bind_outer(True)),
    "ReduceMax": _reducer(np.max),
    "ReduceMin": _reducer(np.min),
    "ArgMax": _argmax,
    "Asum": _asum,
    "Nrm2": _nrm2,
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "SoftmaxBackward": _softmax_backward,
}
