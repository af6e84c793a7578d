"""Shape and indexing ONNX ops.

Shapes, axes, pads and similar operands are read as host values (``ctx.shape``,
``ctx.axes``, ``ctx.ints``): in an exported model they are constants, folded at prepare time,
so the graph keeps no host reads. Each is checked there with core's shape rule (see
:class:`~._registry.Context`): a float, negative, out-of-range or wrong-length value from the
file is a SingaONNXError naming the node and the attribute or input, never wrapped or
truncated.
``Shape``/``Size`` return host values, so shape arithmetic after them never touches the device.
"""

from __future__ import annotations

import numpy as np
from singa import autograd, tensor

from ._registry import register


def _axes(ctx, attrs, axes_input, rank, name="axes"):
    """Distinct axes in [-rank, rank) from the input (opset >= 13) or the attribute, as
    non-negative ints; None when neither is given."""
    if axes_input is not None:
        return ctx.axes(axes_input, f"input {name!r}", rank)
    return ctx.axes(attrs.get(name), f"attribute {name!r}", rank)


@register("Reshape", attrs=("allowzero",), static_inputs=(1,))
def reshape(ctx, attrs, x, shape):
    """y = x with ``shape`` (0 copies the input's dim unless allowzero, -1 is inferred)."""
    x = ctx.tensor(x)
    target = ctx.ints(shape, "input 'shape'")
    if attrs.get("allowzero", 0) and 0 in target:
        raise ctx.error("Reshape with allowzero=1 to a zero-sized dim (empty tensors are not "
                        "supported)")
    target = [x.shape[i] if d == 0 and i < len(x.shape) else d for i, d in enumerate(target)]
    dims = ctx.shape(target, f"input 'shape' (reshaping {tuple(x.shape)})", infer=True,
                     size=x.size())
    return autograd.reshape(x, list(dims))


@register("Flatten", attrs=("axis",))
def flatten(ctx, attrs, x):
    """y = x as (prod(shape[:axis]), prod(shape[axis:]))."""
    x = ctx.tensor(x)
    axis = ctx.axis(attrs.get("axis", 1), "attribute 'axis'", len(x.shape), inclusive=True)
    return autograd.flatten(x, axis)


@register("Squeeze", attrs=("axes",), static_inputs=(1,))
def squeeze(ctx, attrs, x, axes=None):
    """Drop the size-1 ``axes`` (all size-1 axes when none are given)."""
    x = ctx.tensor(x)
    a = _axes(ctx, attrs, axes, len(x.shape))
    return autograd.squeeze(x, [] if a is None else a)


@register("Unsqueeze", attrs=("axes",), static_inputs=(1,))
def unsqueeze(ctx, attrs, x, axes=None):
    """Insert size-1 ``axes`` (positions in the output)."""
    x = ctx.tensor(x)
    given = ctx.ints(axes, "input 'axes'") if axes is not None else \
        ctx.int_list(attrs.get("axes"), "attribute 'axes'")
    if given is None:
        raise ctx.error("Unsqueeze needs axes (an input from opset 13, an attribute before)")
    a = _axes(ctx, attrs, axes, len(x.shape) + len(given))
    return autograd.unsqueeze(x, sorted(a))


@register("Transpose", attrs=("perm",))
def transpose(ctx, attrs, x):
    """Permute the axes by ``perm`` (reverse them by default)."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    perm = ctx.int_list(attrs.get("perm"), "attribute 'perm'", length=nd)
    if perm is not None and sorted(perm) != list(range(nd)):
        raise ctx.refuse("attribute 'perm'", f"{perm} is not a permutation of "
                          f"{list(range(nd))} (the axes of an input of rank {nd})")
    y = autograd.transpose(x, perm)
    # a strided view: the next ops expect contiguous data
    return autograd.identity(y) if y.is_transpose() else y


@register("Concat", attrs=("axis",))
def concat(ctx, attrs, *xs):
    """Join along ``axis``."""
    first = next((x for x in xs if isinstance(x, tensor.Tensor)), None)
    ts = [ctx.tensor(x, like=first) for x in xs]
    axis = ctx.axis(attrs["axis"], "attribute 'axis'", len(ts[0].shape))
    ts = [t for t in ts if t.size() > 0] or ts[:1]
    return ts[0] if len(ts) == 1 else autograd.cat(ts, axis)


@register("Split", attrs=("axis", "split", "num_outputs"), static_inputs=(1,))
def split(ctx, attrs, x, sizes=None):
    """Split along ``axis`` into ``split`` sizes or equal parts (the last may be smaller)."""
    x = ctx.tensor(x)
    axis = ctx.axis(attrs.get("axis", 0), "attribute 'axis'", len(x.shape))
    n_out = attrs["__noutputs__"]
    what = "input 'split'" if sizes is not None else "attribute 'split'"
    given = sizes if sizes is not None else attrs.get("split")
    if given is not None:
        parts = ctx.shape(given, what, length=n_out)
        if sum(parts) != x.shape[axis]:
            raise ctx.refuse(what, f"parts {list(parts)} sum to {sum(parts)}, not to axis "
                             f"{axis}'s size {x.shape[axis]} (input shape {tuple(x.shape)})")
    else:
        k = ctx.int_list(attrs.get("num_outputs", n_out), "attribute 'num_outputs'")[0]
        if k != n_out:
            raise ctx.refuse("attribute 'num_outputs'", f"{k} parts for {n_out} outputs")
        step = -(-x.shape[axis] // k)
        parts = [max(min(step, x.shape[axis] - i * step), 0) for i in range(k)]
    if any(p <= 0 for p in parts):
        raise ctx.error(f"Split: zero-sized parts {list(parts)} are not supported")
    return tuple(autograd.split(x, axis, list(parts)))


@register("Slice", attrs=("starts", "ends", "axes"), static_inputs=(1, 2, 3, 4))
def slice_(ctx, attrs, x, starts=None, ends=None, axes=None, steps=None):
    """numpy-style slicing per axis, with negative steps."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    if starts is None:  # opset < 10: attributes
        where = "attribute"
        st = ctx.int_list(attrs["starts"], "attribute 'starts'")
        en = ctx.int_list(attrs["ends"], "attribute 'ends'", length=len(st))
        ax = ctx.axes(attrs.get("axes"), "attribute 'axes'", nd)
        sp = None
    else:
        where = "input"
        st = ctx.ints(starts, "input 'starts'")
        en = ctx.ints(ends, "input 'ends'")
        if len(en) != len(st):
            raise ctx.refuse("input 'ends'", f"holds {len(en)} values, 'starts' {len(st)}")
        ax = ctx.axes(axes, "input 'axes'", nd)
        sp = ctx.ints(steps, "input 'steps'")
    ax = list(range(len(st))) if ax is None else ax
    if len(ax) != len(st) or len(st) > nd:
        raise ctx.refuse(f"{where} 'axes'", f"{len(ax)} axes for {len(st)} starts (input of "
                         f"rank {nd})")
    if sp is not None and (len(sp) != len(st) or 0 in sp):
        raise ctx.refuse("input 'steps'", f"{sp}: needs {len(st)} nonzero steps")
    return autograd.slice(x, st, en, ax, sp)


def _linear_take(ctx, x, lin_idx, out_shape):
    """y = flatten(x)[lin_idx] reshaped: gathers of any form as one differentiable take."""
    flat = autograd.reshape(x, [x.size()])
    y = autograd.gather(flat, 0, lin_idx.reshape(-1).astype(np.int32))
    return autograd.reshape(y, list(out_shape))


@register("Gather", attrs=("axis",))
def gather(ctx, attrs, x, indices):
    """y = take(x, indices, axis) (negative indices count from the end)."""
    x = ctx.tensor(x)
    axis = ctx.axis(attrs.get("axis", 0), "attribute 'axis'", len(x.shape))
    if not ctx.is_host(indices) and axis == 0:
        # an embedding lookup by runtime ids stays on the device (no host read in graph mode)
        return autograd.embedding(indices, x)
    idx = ctx.host(indices).astype(np.int64)
    n = x.shape[axis]
    if idx.size and (idx.max() >= n or idx.min() < -n):
        raise ctx.error(f"Gather: indices out of range for axis {axis} of size {n}")
    idx = np.where(idx < 0, idx + n, idx)
    if idx.ndim == 0:
        y = autograd.gather(x, axis, [int(idx)])
        return autograd.squeeze(y, [axis])
    y = autograd.gather(x, axis, idx.reshape(-1).astype(np.int32))
    shape = list(x.shape[:axis]) + list(idx.shape) + list(x.shape[axis + 1:])
    return autograd.reshape(y, shape)


@register("GatherElements", attrs=("axis",))
def gather_elements(ctx, attrs, x, indices):
    """y[i..] = x[..., indices[i..], ...] along ``axis``."""
    x = ctx.tensor(x)
    idx = ctx.host(indices).astype(np.int64)
    axis = ctx.axis(attrs.get("axis", 0), "attribute 'axis'", len(x.shape))
    n = x.shape[axis]
    if idx.size and (idx.max() >= n or idx.min() < -n):
        raise ctx.error("GatherElements: indices out of range")
    idx = np.where(idx < 0, idx + n, idx)
    grids = list(np.indices(idx.shape))
    grids[axis] = idx
    lin = np.ravel_multi_index(tuple(grids), x.shape)
    return _linear_take(ctx, x, lin, idx.shape)


@register("GatherND", attrs=("batch_dims",))
def gather_nd(ctx, attrs, x, indices):
    """y = x[indices[..., :]] with ``batch_dims`` leading batch axes."""
    x = ctx.tensor(x)
    idx = ctx.host(indices).astype(np.int64)
    b = attrs.get("batch_dims", 0)
    shape = x.shape
    k = idx.shape[-1]
    batch = idx.shape[:b]
    tail = shape[b + k:]
    base = np.arange(int(np.prod(batch, dtype=np.int64))).reshape(batch + (1,) * (idx.ndim - b - 1))
    sizes = shape[b:b + k]
    if idx.size and (np.any(idx >= np.array(sizes)) or np.any(idx < -np.array(sizes))):
        raise ctx.error("GatherND: indices out of range")
    idx = np.where(idx < 0, idx + np.array(sizes), idx)
    inner = np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), sizes) if k else 0
    row = base * int(np.prod(sizes, dtype=np.int64)) + inner  # row in x as (rows, tail)
    tail_n = int(np.prod(tail, dtype=np.int64))
    lin = row[..., None] * tail_n + np.arange(tail_n)
    return _linear_take(ctx, x, lin, idx.shape[:-1] + tuple(tail))


@register("Expand", static_inputs=(1,))
def expand(ctx, attrs, x, shape):
    """Broadcast x against ``shape``."""
    x = ctx.tensor(x)
    dims = ctx.shape(shape, "input 'shape'")
    try:
        out = np.broadcast_shapes(tuple(x.shape), dims)
    except ValueError:
        raise ctx.refuse("input 'shape'", f"{list(dims)} does not broadcast with the input's "
                         f"shape {tuple(x.shape)}") from None
    ctx.budget(out)
    return x if tuple(out) == tuple(x.shape) else autograd.expand(x, list(out))


@register("Tile", static_inputs=(1,))
def tile(ctx, attrs, x, repeats):
    """Repeat the whole tensor ``repeats[i]`` times along axis i."""
    x = ctx.tensor(x)
    reps = list(ctx.shape(repeats, "input 'repeats'", length=len(x.shape)))
    ctx.budget([d * r for d, r in zip(x.shape, reps)])
    if len(reps) <= 3:
        return autograd.tile(x, reps)
    # singa's tile broadcasts through a view of twice the rank; backends cap strided views
    # (OpenCL's copy kernels at 6 dims), so higher ranks tile one axis at a time on a 3-D view
    shape = list(x.shape)
    for axis, r in enumerate(reps):
        if r == 1:
            continue
        pre, post = int(np.prod(shape[:axis])), int(np.prod(shape[axis + 1:]))
        x = autograd.tile(autograd.reshape(x, (pre, shape[axis], post)), (1, r, 1))
        shape[axis] *= r
        x = autograd.reshape(x, tuple(shape))
    return x


_PAD_MODES = {"constant", "reflect", "edge"}


def _check_pad(attrs):
    mode = attrs.get("mode", "constant")
    return [] if mode in _PAD_MODES else [f"mode={mode!r}"]


@register("Pad", attrs=("mode", "pads", "value"), check=_check_pad, static_inputs=(1, 2, 3))
def pad(ctx, attrs, x, pads=None, value=None, axes=None):
    """Pad with a constant, the reflection, or the edge values; pads as begins then ends."""
    x = ctx.tensor(x)
    nd = len(x.shape)
    ax = ctx.axes(axes, "input 'axes'", nd)
    n = 2 * (nd if ax is None else len(ax))
    p = ctx.ints(pads, "input 'pads'") if pads is not None else \
        ctx.int_list(attrs["pads"], "attribute 'pads'")
    if len(p) != n:
        raise ctx.refuse("input 'pads'" if pads is not None else "attribute 'pads'",
                         f"holds {len(p)} values {p[:8]}, needs {n} (begins then ends of "
                         f"{n // 2} axes)")
    if ax is not None:
        full = [0] * (2 * nd)
        for i, a in enumerate(ax):
            full[a], full[a + nd] = p[i], p[i + len(ax)]
        p = full
    if any(v < 0 for v in p):
        raise ctx.error(f"Pad: negative pads {p} are not supported")
    v = float(ctx.host(value).reshape(-1)[0]) if value is not None and ctx.host(
        value).size else float(attrs.get("value", 0.0))
    ctx.budget([d + p[i] + p[i + nd] for i, d in enumerate(x.shape)],
               "output shape (the input's plus 'pads')")
    return autograd.pad(x, attrs.get("mode", "constant"), p, v)


@register("Shape", attrs=("start", "end"))
def shape(ctx, attrs, x):
    """The shape of x (a host int64 array; slice by ``start``/``end``)."""
    s = list(x.shape)
    start, end = attrs.get("start", 0), attrs.get("end", len(s))
    return np.array(s[start:end] if "end" in attrs else s[start:], np.int64)


@register("Size")
def size(ctx, attrs, x):
    """The number of elements of x (a host int64 scalar)."""
    return np.array(int(np.prod(x.shape)), np.int64)


@register("ConstantOfShape", attrs=("value",), static_inputs=(0,))
def constant_of_shape(ctx, attrs, shape):
    """A host tensor of ``shape`` filled with ``value`` (float32 0 by default)."""
    dims = ctx.shape(shape, "input 'shape'")
    ctx.budget(dims)
    v = attrs.get("value")
    v = np.zeros(1, np.float32) if v is None else np.asarray(v).reshape(-1)
    return np.full(dims, v[0], dtype=v.dtype)


@register("Range", static_inputs=(0, 1, 2))
def range_(ctx, attrs, start, limit, delta):
    """A host array start, start + delta, ... < limit."""
    s, lim, d = (ctx.host(v).reshape(()) for v in (start, limit, delta))
    if d == 0:
        raise ctx.error("Range: delta is 0")
    steps = np.ceil((lim - s) / d)
    if not np.isfinite(steps):
        raise ctx.refuse("inputs", f"start {s}, limit {lim}, delta {d} give no finite length")
    n = max(int(steps), 0)
    ctx.budget([n])
    return (s + np.arange(n, dtype=np.asarray(s).dtype) * d).astype(np.asarray(s).dtype)


@register("DepthToSpace", attrs=("blocksize", "mode"))
def depth_to_space(ctx, attrs, x):
    """(N, C, H, W) -> (N, C/b^2, H b, W b)."""
    return autograd.depth_to_space(ctx.tensor(x), _blocksize(ctx, attrs),
                                   attrs.get("mode", "DCR"))


@register("SpaceToDepth", attrs=("blocksize",))
def space_to_depth(ctx, attrs, x):
    """(N, C, H, W) -> (N, C b^2, H/b, W/b)."""
    return autograd.space_to_depth(ctx.tensor(x), _blocksize(ctx, attrs), "DCR")


def _blocksize(ctx, attrs):
    b = ctx.int_list(attrs.get("blocksize"), "attribute 'blocksize'", length=1)
    if b is None or b[0] < 1:
        raise ctx.refuse("attribute 'blocksize'", f"{b}: a positive integer is required")
    return b[0]


_RESIZE_ATTRS = ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a",
                 "exclude_outside", "extrapolation_value", "antialias", "axes",
                 "keep_aspect_ratio_policy", "scales")


def _check_resize(attrs):
    bad = []
    if attrs.get("mode", "nearest") not in ("nearest", "linear"):
        bad.append(f"mode={attrs['mode']!r} (nearest and linear only)")
    if attrs.get("antialias", 0):
        bad.append("antialias=1")
    if attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        bad.append("coordinate_transformation_mode='tf_crop_and_resize'")
    return bad


# input coordinate of output index i: (i, out size, in size, scale) -> float
_COORD = {
    "half_pixel": lambda i, o, n, s: (i + 0.5) / s - 0.5,
    "pytorch_half_pixel": lambda i, o, n, s: (i + 0.5) / s - 0.5 if o > 1 else 0.0 * i,
    "align_corners": lambda i, o, n, s: i * (n - 1) / (o - 1) if o > 1 else 0.0 * i,
    "asymmetric": lambda i, o, n, s: i / s,
    "tf_half_pixel_for_nn": lambda i, o, n, s: (i + 0.5) / s,
    "half_pixel_symmetric": lambda i, o, n, s: (n / 2) * (1 - o / (s * n)) + (i + 0.5) / s
    - 0.5,
}
_ROUND = {
    "round_prefer_floor": lambda c: np.ceil(c - 0.5),
    "round_prefer_ceil": lambda c: np.floor(c + 0.5),
    "floor": np.floor, "ceil": np.ceil,
}


def _resize_sizes(ctx, attrs, x, scales, sizes):
    """Output sizes and per-axis scales (ONNX's rules, incl. axes and aspect-ratio policy)."""
    nd = len(x.shape)
    axes = ctx.axes(attrs.get("axes", range(nd)), "attribute 'axes'", nd)
    if scales is not None:
        sc = [float(v) for v in np.asarray(scales).reshape(-1)]
        if len(sc) != len(axes) or not all(np.isfinite(sc)) or min(sc) <= 0:
            raise ctx.refuse("input 'scales'", f"{sc[:8]}: needs {len(axes)} finite positive "
                             "values, one per axis")
        out = [int(np.floor(x.shape[a] * s + 1e-9)) for a, s in zip(axes, sc)]
    else:
        out = list(ctx.shape(sizes, "input 'sizes'", length=len(axes)))
        sc = [o / x.shape[a] for a, o in zip(axes, out)]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            s = pick(sc)
            sc = [s] * len(axes)
            out = [int(np.floor(x.shape[a] * s + 0.5)) for a in axes]
    full_out, full_sc = list(x.shape), [1.0] * nd
    for a, o, s in zip(axes, out, sc):
        full_out[a], full_sc[a] = o, s
    return full_out, full_sc


@register("Resize", "Upsample", attrs=_RESIZE_ATTRS, check=_check_resize,
          static_inputs=(1, 2, 3))
def resize(ctx, attrs, x, roi=None, scales=None, sizes=None):
    """Nearest-neighbour resize, any factor and coordinate mode: one gather per axis with
    the input indices ONNX's formula gives (differentiable, any backend)."""
    x = ctx.tensor(x)
    if ctx.op_type == "Upsample":
        scales, sizes = (roi if roi is not None else attrs.get("scales")), None
        ctm, nm = "asymmetric", "floor"
    else:
        ctm = attrs.get("coordinate_transformation_mode", "half_pixel")
        nm = attrs.get("nearest_mode", "round_prefer_floor")
    sc = ctx.host(scales) if scales is not None and ctx.host(scales).size else None
    sz = ctx.host(sizes) if sc is None else None
    if sc is None and sz is None:
        raise ctx.error("Resize needs scales or sizes")
    out, full_sc = _resize_sizes(ctx, attrs, x, sc, sz)
    ctx.budget(out)
    if ctm not in _COORD or nm not in _ROUND:
        raise ctx.error(f"Resize: coordinate_transformation_mode {ctm!r} / nearest_mode "
                        f"{nm!r} is not supported")
    linear = attrs.get("mode", "nearest") == "linear"
    y = x
    for axis, (o, n, s) in enumerate(zip(out, x.shape, full_sc)):
        if o == n and s == 1.0:
            continue
        c = _COORD[ctm](np.arange(o, dtype=np.float64), o, n, s)
        if not linear:
            idx = np.clip(_ROUND[nm](c), 0, n - 1).astype(np.int32)
            y = autograd.gather(y, axis, idx)
            continue
        # linear: y = x contracted with an (n, o) matrix of the two taps' weights
        c = np.clip(c, 0, n - 1)
        lo = np.floor(c).astype(np.int64)
        hi = np.minimum(lo + 1, n - 1)
        w = c - lo
        m = np.zeros((n, o), np.float32)
        np.add.at(m, (lo, np.arange(o)), 1 - w)
        np.add.at(m, (hi, np.arange(o)), w)
        nd = len(y.shape)
        perm = [d for d in range(nd) if d != axis] + [axis]
        yt = autograd.identity(autograd.transpose(y, perm)) if axis != nd - 1 else y
        yt = autograd.matmul(yt, ctx.tensor(m, like=y))
        y = autograd.identity(autograd.transpose(yt, list(np.argsort(perm)))) \
            if axis != nd - 1 else yt
    return y if y is not x else autograd.identity(x)


@register("OneHot", attrs=("axis",), static_inputs=(1, 2))
def one_hot(ctx, attrs, indices, depth, values):
    """y = values[1] where the index matches, values[0] elsewhere, along ``axis``."""
    idx = ctx.host(indices).astype(np.int64)
    d = int(ctx.host(depth).reshape(-1)[0])
    ctx.budget(list(idx.shape) + [d])
    idx = np.where(idx < 0, idx + d, idx)
    vals = ctx.host(values).reshape(-1)
    t = ctx.tensor(idx.astype(np.int32))
    return autograd.onehot(attrs.get("axis", -1), t, d, vals.astype(np.float32))


@register("NonZero")
def nonzero(ctx, attrs, x):
    """The indices of the nonzero elements, (ndim, nnz) int64 (computed on the host)."""
    return np.array(np.nonzero(ctx.host(x)), np.int64)


@register("ScatterElements", "Scatter", attrs=("axis", "reduction"),
          check=lambda a: [] if a.get("reduction", "none") == "none"
          else [f"reduction={a['reduction']!r}"])
def scatter_elements(ctx, attrs, x, indices, updates):
    """y = x with ``updates`` written at ``indices`` along ``axis``."""
    x = ctx.tensor(x)
    idx = ctx.host(indices).astype(np.int64)
    axis = ctx.axis(attrs.get("axis", 0), "attribute 'axis'", len(x.shape))
    idx = np.where(idx < 0, idx + x.shape[axis], idx).astype(np.int32)
    return autograd.scatter_elements(x, idx, ctx.host(updates), axis)
