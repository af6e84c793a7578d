"""Index-producing and sequence-shaped ops: CumProd, Einsum, ReverseSequence (composed from
autograd ops), and Unique / NonMaxSuppression, whose outputs are data-dependent index lists
computed on the host like NonZero (no gradient flows through indices)."""

from __future__ import annotations

import numpy as np
from singa import autograd

from ._registry import register


@register("CumProd", attrs=("exclusive", "reverse"), static_inputs=(1,))
def cum_prod(ctx, attrs, x, axis):
    """Running products along ``axis``, one multiply per step (exact for zeros and signs)."""
    x = ctx.tensor(x)
    ax = ctx.axis(ctx.int_list(axis, "input 'axis'", length=1)[0], "input 'axis'",
                  len(x.shape))
    n = x.shape[ax]
    steps = [autograd.slice(x, [i], [i + 1], [ax]) for i in range(n)]
    order = list(range(n))[::-1] if attrs.get("reverse", 0) else list(range(n))
    out = [None] * n
    run = None
    for i in order:
        if attrs.get("exclusive", 0):
            out[i] = run if run is not None else autograd.mul(
                steps[i], ctx.tensor(np.float32(0), like=x))
            if run is None:
                out[i] = autograd.add(out[i], ctx.tensor(np.float32(1), like=x))
            run = steps[i] if run is None else autograd.mul(run, steps[i])
        else:
            run = steps[i] if run is None else autograd.mul(run, steps[i])
            out[i] = run
    return autograd.cat(out, ax) if n > 1 else autograd.identity(out[0])


@register("Einsum", attrs=("equation",))
def einsum(ctx, attrs, *xs):
    """Einstein summation: operands aligned on one letter order, multiplied with
    broadcasting, summed over the letters not in the output (repeated letters in one operand
    and ellipses are not supported)."""
    eq = attrs["equation"].replace(" ", "")
    lhs, _, rhs = eq.partition("->")
    terms = lhs.split(",")
    if "." in eq or any(len(set(t)) != len(t) for t in terms):
        raise ctx.error(f"Einsum {eq!r}: ellipses and repeated indices are not supported")
    if not _:
        rhs = "".join(sorted(c for c in set(lhs) - {","} if lhs.count(c) == 1))
    letters = list(rhs) + sorted(set("".join(terms)) - set(rhs))
    ts = [ctx.tensor(x) for x in xs]
    first = ts[0]
    ts = [ctx.tensor(t, like=first) for t in ts]
    aligned = []
    for t, term in zip(ts, terms):
        present = [c for c in letters if c in term]
        y = autograd.transpose(t, [term.index(c) for c in present]) if len(term) > 1 else t
        y = autograd.identity(y) if len(term) > 1 else y
        shape = [y.shape[present.index(c)] if c in present else 1 for c in letters]
        aligned.append(autograd.reshape(y, shape))
    prod = aligned[0]
    for y in aligned[1:]:
        prod = autograd.mul(prod, y)
    summed = list(range(len(rhs), len(letters)))
    if summed:
        prod = autograd.reduce_sum(prod, summed, 0)
        want = [prod.shape[i] for i in range(len(rhs))] if rhs else []
        if list(prod.shape) != want:
            prod = autograd.reshape(prod, want)
    return prod


@register("ReverseSequence", attrs=("batch_axis", "time_axis"), static_inputs=(1,))
def reverse_sequence(ctx, attrs, x, lens):
    """Reverse the first lens[b] steps along ``time_axis`` of each batch entry (one gather of
    the permuted flat indices)."""
    x = ctx.tensor(x)
    b_ax, t_ax = attrs.get("batch_axis", 1), attrs.get("time_axis", 0)
    ls = ctx.host(lens).astype(np.int64)
    grids = list(np.indices(x.shape))
    t, b = grids[t_ax], grids[b_ax]
    n = ls[b]
    grids[t_ax] = np.where(t < n, n - 1 - t, t)
    lin = np.ravel_multi_index(tuple(grids), x.shape)
    flat = autograd.reshape(x, [x.size()])
    return autograd.reshape(autograd.gather(flat, 0, lin.reshape(-1).astype(np.int32)),
                            list(x.shape))


@register("Unique", attrs=("axis", "sorted"))
def unique(ctx, attrs, x):
    """Unique values (or slices along ``axis``), first-occurrence indices, inverse indices
    and counts (host values)."""
    h = ctx.host(x)
    axis = attrs.get("axis")
    y, idx, inv, cnt = np.unique(h, return_index=True, return_inverse=True,
                                 return_counts=True, axis=axis)
    if not attrs.get("sorted", 1):
        order = np.argsort(idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if axis is None else axis)
        idx, cnt, inv = idx[order], cnt[order], rank[inv.reshape(-1)]
    return y, idx.astype(np.int64), inv.reshape(-1).astype(np.int64), cnt.astype(np.int64)


@register("NonMaxSuppression", attrs=("center_point_box",), static_inputs=(2, 3, 4))
def non_max_suppression(ctx, attrs, boxes, scores, max_out=None, iou_thr=None,
                        score_thr=None):
    """Greedy NMS per batch and class: (selected, 3) rows [batch, class, box] (host)."""
    bx, sc = ctx.host(boxes).astype(np.float64), ctx.host(scores).astype(np.float64)
    k = int(ctx.host(max_out).reshape(-1)[0]) if max_out is not None else 0
    iou_t = float(ctx.host(iou_thr).reshape(-1)[0]) if iou_thr is not None else 0.0
    s_t = float(ctx.host(score_thr).reshape(-1)[0]) if score_thr is not None else -np.inf
    if attrs.get("center_point_box", 0):
        c, wh = bx[..., :2], bx[..., 2:] / 2
        y1x1, y2x2 = c - wh, c + wh
        corners = np.concatenate([y1x1, y2x2], -1)
    else:
        a, b = bx[..., :2], bx[..., 2:]
        corners = np.concatenate([np.minimum(a, b), np.maximum(a, b)], -1)
    out = []
    for bi in range(sc.shape[0]):
        for ci in range(sc.shape[1]):
            s = sc[bi, ci]
            order = [i for i in np.argsort(-s, kind="stable") if s[i] > s_t]
            keep = []
            for i in order:
                if len(keep) >= k:
                    break
                if all(_iou(corners[bi, i], corners[bi, j]) <= iou_t for j in keep):
                    keep.append(i)
            out += [[bi, ci, i] for i in keep]
    return np.array(out, np.int64).reshape(-1, 3)


def _iou(a, b):
    inter = np.prod(np.clip(np.minimum(a[2:], b[2:]) - np.maximum(a[:2], b[:2]), 0, None))
    union = np.prod(a[2:] - a[:2]) + np.prod(b[2:] - b[:2]) - inter
    return inter / union if union > 0 else 0.0
