"""Reductions and softmax."""

from __future__ import annotations

import math

import numpy as np
from singa.backend import Kernel

from ._float16 import via_float32
from ._jit import njit
from ._threads import single_threaded_blas


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
