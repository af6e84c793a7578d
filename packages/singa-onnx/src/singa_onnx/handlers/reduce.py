"""Reductions, arg-max/min, TopK and CumSum.

Axes come from the ``axes`` attribute (opset < 13, or < 18 for all but ReduceSum) or the
``axes`` input; with none, every axis is reduced unless ``noop_with_empty_axes``, which
reduces over no axis: what remains is the reduction's elementwise part (|x| for L1 and L2,
x^2 for SumSquare, log x for LogSum, x itself for the others), as onnx's reference and
onnxruntime compute it.
"""

from __future__ import annotations

import numpy as np
from singa import autograd
from singa.ops import REDUCTIONS

from ._registry import register

_REDUCE_ATTRS = ("axes", "keepdims", "noop_with_empty_axes")


def _reduce_axes(ctx, attrs, x, axes):
    nd = len(x.shape)
    a = ctx.axes(axes, "input 'axes'", nd) if axes is not None else \
        ctx.axes(attrs.get("axes"), "attribute 'axes'", nd)
    if a is None or len(a) == 0:
        return None if attrs.get("noop_with_empty_axes", 0) else list(range(nd))
    return sorted(a)


def _reduction(body, over_no_axis=autograd.identity):
    """A reduce handler from ``body(ctx, x, axes, keepdims)``; ``over_no_axis(x)`` is the
    reduction over an empty set of axes (``noop_with_empty_axes``)."""

    def handler(ctx, attrs, x, axes=None):
        x = ctx.tensor(x)
        ax = _reduce_axes(ctx, attrs, x, axes)
        if ax is None:
            return over_no_axis(x)
        keep = attrs.get("keepdims", 1)
        y = body(ctx, x, ax, keep)
        want = [1 if i in ax else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i not in ax]
        # some singa reductions keep a length-1 axis for a full reduction: ONNX wants ()
        return y if list(y.shape) == want else autograd.reshape(y, want)

    handler.__doc__ = body.__doc__
    return handler


def _record(decl):
    """The body of the reduce handler of a reduction record (``singa.ops.REDUCTIONS``): its
    autograd function, with ONNX's axes and keepdims."""
    function = getattr(autograd, decl.autograd)

    def body(ctx, x, ax, k):
        return function(x, ax, k)

    body.__doc__ = f"y = {decl.formula} over axes (singa's {decl.op})."
    return body


def _l1(ctx, x, ax, k):
    """sum |x| over axes."""
    return autograd.reduce_sum(autograd.abs(x), ax, k)


def _sum_square(ctx, x, ax, k):
    """sum x^2 over axes."""
    return autograd.reduce_sum(autograd.mul(x, x), ax, k)


def _l2(ctx, x, ax, k):
    """sqrt(sum x^2) over axes."""
    return autograd.sqrt(_sum_square(ctx, x, ax, k))


def _log_sum(ctx, x, ax, k):
    """log(sum x) over axes."""
    return autograd.log(autograd.reduce_sum(x, ax, k))


def _log_sum_exp(ctx, x, ax, k):
    """log(sum exp(x)) over axes, shifted by the max for stability."""
    m = autograd.reduce_max(x, ax, 1)
    # the shift cancels in value; its gradient path through max cancels too
    s = autograd.reduce_sum(autograd.exp(autograd.sub(x, m)), ax, 1)
    y = autograd.add(autograd.log(s), m)
    if k:
        return y
    return autograd.reshape(y, [d for i, d in enumerate(x.shape) if i not in ax])


def _prod(ctx, x, ax, k):
    """product over axes (host-free: exp(sum log|x|) with the sign and zeros restored)."""
    zero = ctx.tensor(np.zeros((), np.float32), like=x)
    one = ctx.tensor(np.ones((), np.float32), like=x)
    is_zero = autograd.equal(x, zero)
    safe = autograd.add(autograd.abs(x), is_zero)  # |x|, with 1 where x == 0
    mag = autograd.exp(autograd.reduce_sum(autograd.log(safe), ax, k))
    neg = autograd.reduce_sum(autograd.less(x, zero), ax, k)
    # sign = 1 - 2 (neg mod 2); any zero makes the product 0
    half = autograd.mul(neg, ctx.tensor(np.float32(0.5), like=x))
    odd = autograd.mul(autograd.sub(half, autograd.floor(half)),
                       ctx.tensor(np.float32(4.0), like=x))
    sign = autograd.sub(one, odd)
    nz = autograd.sub(one, autograd.reduce_max(is_zero, ax, k))
    return autograd.mul(autograd.mul(mag, sign), nz)


# ReduceSum, ReduceMean, ReduceMax, ReduceMin: one per reduction record that names its ONNX
# operator, made from the record; the others are compositions of those, written out above
_REDUCERS = {**{decl.onnx.op_type: _record(decl) for decl in REDUCTIONS.values()
                if decl.onnx is not None and decl.autograd},
             "ReduceL1": _l1, "ReduceL2": _l2, "ReduceSumSquare": _sum_square,
             "ReduceLogSum": _log_sum, "ReduceLogSumExp": _log_sum_exp, "ReduceProd": _prod}

# the elementwise part each reduction keeps when it reduces over no axis (identity otherwise)
_OVER_NO_AXIS = {"ReduceL1": autograd.abs, "ReduceL2": autograd.abs,
                 "ReduceSumSquare": lambda x: autograd.mul(x, x), "ReduceLogSum": autograd.log}

for _op, _body in _REDUCERS.items():
    register(_op, attrs=_REDUCE_ATTRS, static_inputs=(1,))(
        _reduction(_body, _OVER_NO_AXIS.get(_op, autograd.identity)))


def _arg(negate):
    def handler(ctx, attrs, x):
        x = ctx.tensor(x)
        axis = ctx.axis(attrs.get("axis", 0), "attribute 'axis'", len(x.shape))
        if negate:
            x = autograd.negative(x)
        last = attrs.get("select_last_index", 0)
        n = x.shape[axis]
        if last:  # the first maximum of the reversed axis is the last one of the original
            x = autograd.slice(x, [n - 1], [-n - 1], [axis], [-1])
        idx = autograd.argmax(x, axis, attrs.get("keepdims", 1))
        if last:
            idx = autograd.sub(ctx.tensor(np.array(n - 1, np.int32), like=idx), idx)
        return idx

    return handler


register("ArgMax", attrs=("axis", "keepdims", "select_last_index"))(_arg(False))
register("ArgMin", attrs=("axis", "keepdims", "select_last_index"))(_arg(True))


@register("TopK", attrs=("axis", "largest", "sorted"), static_inputs=(1,))
def top_k(ctx, attrs, x, k):
    """The k largest (or smallest) values along ``axis`` and their indices.

    The order is found on the host (a stable sort, so ties keep the lower index as ONNX
    requires); the values are then gathered on the device, so they carry gradients.
    """
    x = ctx.tensor(x)
    kk = ctx.int_list(k, "input 'K'", length=1)[0]
    axis = ctx.axis(attrs.get("axis", -1), "attribute 'axis'", len(x.shape))
    if not 0 <= kk <= x.shape[axis]:
        raise ctx.error(f"TopK: k={kk} is out of range for axis {axis} of size {x.shape[axis]}")
    h = ctx.host(x)
    key = -h if attrs.get("largest", 1) else h
    idx = np.take(np.argsort(key, axis=axis, kind="stable"), np.arange(kk), axis=axis)
    grids = list(np.indices(idx.shape))
    grids[axis] = idx
    lin = np.ravel_multi_index(tuple(grids), x.shape)
    flat = autograd.reshape(x, [x.size()])
    vals = autograd.reshape(autograd.gather(flat, 0, lin.reshape(-1).astype(np.int32)),
                            list(idx.shape))
    return vals, idx.astype(np.int64)


@register("CumSum", attrs=("exclusive", "reverse"), static_inputs=(1,))
def cum_sum(ctx, attrs, x, axis):
    """Running sums along ``axis``, as a product with a triangular 0/1 matrix."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    ax = ctx.axis(ctx.int_list(axis, "input 'axis'", length=1)[0], "input 'axis'", nd)
    n = x.shape[ax]
    i, j = np.indices((n, n))
    # y[..., j] = sum_i x[..., i] T[i, j]
    if attrs.get("reverse", 0):
        tri = (i > j) if attrs.get("exclusive", 0) else (i >= j)
    else:
        tri = (i < j) if attrs.get("exclusive", 0) else (i <= j)
    perm = [d for d in range(nd) if d != ax] + [ax]
    xt = autograd.transpose(x, perm) if ax != nd - 1 else x
    y = autograd.matmul(autograd.identity(xt) if ax != nd - 1 else xt,
                        ctx.tensor(tri.astype(np.float32), like=x))
    if ax != nd - 1:
        y = autograd.transpose(y, list(np.argsort(perm)))
        y = autograd.identity(y)
    return y
