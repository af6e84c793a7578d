"""Reductions and softmax."""

from __future__ import annotations

import functools
import math

import numpy as np

from ._float16 import via_float32
from ._threads import single_threaded_blas


def _axes(x, attrs):
    axes = attrs.get("axes")
    return tuple(range(x.ndim)) if axes is None else tuple(axes)


def _reducer(fn):
    def kernel(ins, outs, attrs):
        x = ins[0]
        fn(x, axis=_axes(x, attrs), keepdims=attrs.get("keepdims", False), out=outs[0])

    return kernel


def _sum(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axes = _axes(x, attrs)
    keep = attrs.get("keepdims", False)
    if x.dtype == np.float16:  # accumulate in float32 like the GPU libraries do
        out[...] = np.sum(x, axis=axes, keepdims=keep, dtype=np.float32)
    elif not _sum_outer(x, axes, out):
        np.sum(x, axis=axes, keepdims=keep, out=out)


def _sum_outer(x, axes, out) -> bool:
    """Sum of a contiguous float array over leading and trailing axes, keeping a middle run
    of axes (a bias gradient: ``(N, C, H, W)`` over ``(0, 2, 3)``): the trailing axes by a
    BLAS matrix-vector product with ones, then the leading ones. numpy's own reduction over
    such axes runs 5-6x slower (measured: 120 vs 21 us on 64x20x24x24 floats). False when the
    pattern does not apply."""
    kept = [a for a in range(x.ndim) if a not in axes]
    if (not kept or kept != list(range(kept[0], kept[-1] + 1)) or kept[-1] == x.ndim - 1
            or x.dtype not in (np.float32, np.float64) or not x.flags.c_contiguous
            or not out.flags.c_contiguous):
        return False
    lead = math.prod(x.shape[:kept[0]])  # math.prod: np.prod of a tuple costs ~3 us
    mid = math.prod(x.shape[kept[0]:kept[-1] + 1])
    tail = x.size // max(1, lead * mid)
    if x.size == 0 or tail < 2:
        return False
    # one leading row (global average pooling at batch 1): the product is the sum itself
    rows = out.reshape(mid) if lead == 1 else np.empty(lead * mid, x.dtype)
    with single_threaded_blas():
        np.matmul(x.reshape(lead * mid, tail), _ones(tail, x.dtype), out=rows)
    if lead > 1:
        np.sum(rows.reshape(lead, mid), axis=0, out=out.reshape(mid))
    return True


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype) -> np.ndarray:
    """A read-only vector of ``n`` ones (the reductions' matrix-vector products)."""
    v = np.ones(n, dtype)
    v.flags.writeable = False
    return v


def _mean(ins, outs, attrs):
    """mean = sum / count. Over trailing axes (global average pooling, (N, C, H, W) over
    (2, 3), and a squeeze-excitation block's squeeze) the sum is :func:`_sum_outer`'s
    matrix-vector product with ones: numpy's mean runs one short reduction per row (1152 x
    7x7 floats 35 -> 11 us, 32 x 112x112 71 -> 32 us, AMD Zen 4, 1 thread)."""
    x, out = ins[0], outs[0]
    axes = tuple(a % x.ndim for a in _axes(x, attrs)) if x.ndim else ()
    if x.dtype != np.float16 and out.size and _sum_outer(x, axes, out):
        np.divide(out, x.size // out.size, out=out)
        return
    out[...] = np.mean(x, axis=axes, keepdims=attrs.get("keepdims", False),
                       dtype=np.float32 if x.dtype == np.float16 else None)


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


def _softmax(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axis = attrs.get("axis", -1)
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)


def _log_softmax(ins, outs, attrs):
    x, out = ins[0], outs[0]
    axis = attrs.get("axis", -1)
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    out -= np.log(np.exp(out).sum(axis=axis, keepdims=True))


def _softmax_backward(ins, outs, attrs):
    y, dy = ins
    out = outs[0]
    axis = attrs.get("axis", -1)
    np.multiply(dy, y, out=out)
    s = out.sum(axis=axis, keepdims=True)
    np.subtract(dy, s, out=out)
    out *= y


# several numpy passes each: float16 is computed in float32 and rounded once (see Sigmoid)
_softmax = via_float32(_softmax)
_log_softmax = via_float32(_log_softmax)
_softmax_backward = via_float32(_softmax_backward)

KERNELS = {
    "Sum": _sum,
    "ReduceMean": _mean,
    "ReduceMax": _reducer(np.max),
    "ReduceMin": _reducer(np.min),
    "ArgMax": _argmax,
    "Asum": _asum,
    "Nrm2": _nrm2,
    "Softmax": _softmax,
    "LogSoftmax": _log_softmax,
    "SoftmaxBackward": _softmax_backward,
}
