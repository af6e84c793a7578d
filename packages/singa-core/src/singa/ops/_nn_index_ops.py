"""Declarations of the indexing, padding and resampling ops used by the NN layers and the ONNX
importer: ScatterAdd, Pad/PadBackward, Where, OneHot, ScatterElements, GatherElements,
UpsampleNearest/UpsampleNearestBackward.

Index tensors are int32. Where an op accepts negative indices, ``-k`` means ``n - k`` for an
axis of length ``n`` (Python/ONNX convention); indices outside ``[-n, n)`` are an error (the CPU
backend raises ``IndexError``; other backends may produce unspecified values) except in OneHot,
which defines them.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from ..errors import DtypeMismatchError, ShapeError
from . import _rules as rules
from ._registry import NUM, defop

__all__: list[str] = []

_F16 = _dtype.kFloat16
_INT = _dtype.kInt


def _check_index(op: str, what: str, t) -> None:
    if t.dtype_code != _INT:
        raise DtypeMismatchError(
            f"{op}: {what} must be int32, got {_dtype.name_of(t.dtype_code)}; convert with "
            "idx.as_type(tensor.int32)"
        )


def _small_shape(g, min_dims=1, max_dims=3, lo=1, hi=4) -> tuple:
    return tuple(g.integers(lo, hi) for _ in range(g.integers(min_dims, max_dims)))


def _some_negative(g, idx: np.ndarray, n: int) -> np.ndarray:
    """Rewrite a random subset of non-negative indices into their negative form ``i - n``."""
    return np.where(g.mask(idx.shape), idx - n, idx).astype(np.int32)


# ============================================================== ScatterAdd
def _scatter_add_ref(idx, src, shape, axis=0):
    out = np.zeros(tuple(shape), src.dtype)
    axis = axis % len(shape)
    # out[..., idx[j], ...] += src[..., j, ...]; np.add.at accumulates duplicate indices
    out_view = np.moveaxis(out, axis, 0)
    src_view = np.moveaxis(src, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))
    np.add.at(out_view, idx, src_view)
    return out


def _scatter_add_infer(ins, attrs):
    idx, src = ins
    _check_index("ScatterAdd", "idx", idx)
    if attrs.get("shape") is None:
        raise ShapeError("ScatterAdd: attribute 'shape' (the output shape) is required")
    shape = tuple(int(d) for d in attrs["shape"])
    if not shape:
        raise ShapeError("ScatterAdd: the output shape must have at least one axis")
    ax = rules.check_axis("ScatterAdd", attrs.get("axis", 0), len(shape))
    want = shape[:ax] + idx.dims + shape[ax + 1:]
    if src.dims != want:
        raise ShapeError(
            f"ScatterAdd: src has shape {src.dims} but output {shape} with idx {idx.dims} on axis "
            f"{ax} needs src of shape {want} (out.shape with axis {ax} replaced by idx.shape)"
        )
    return [(shape, src.dtype_code)]


def _scatter_add_sample(g, dtype):
    shape = _small_shape(g)
    ax = g.integers(0, len(shape) - 1)
    idx = _some_negative(g, g.index_array(_small_shape(g, 0, 2), shape[ax]), shape[ax])
    src = g.array(shape[:ax] + idx.shape + shape[ax + 1:], dtype, -3, 3)
    return [idx, src], {"shape": shape, "axis": ax}


defop("ScatterAdd", 2, _scatter_add_infer, _scatter_add_ref, _scatter_add_sample, dtypes=NUM,
      tol={_F16: (1e-2, 2e-2)},
      doc="""Scatter-add along an axis (the adjoint of ``Take``):
    ``(idx[int32, I], src) -> out`` of shape ``attrs["shape"]``, zero-filled, then::

        out[a..., idx[j...], b...] += src[a..., j..., b...]     (axis = len(a))

    ``src.shape == shape[:axis] + idx.shape + shape[axis+1:]``; duplicate indices accumulate;
    negative indices count from the end. Attributes ``shape`` (required), ``axis`` (default 0).
    """)


# ============================================================== Pad / PadBackward
_PAD_MODES = ("constant", "reflect", "edge")


def _pad_widths(op: str, shape: tuple, pads, mode: str) -> list:
    """ONNX ``pads`` (all begins, then all ends) as numpy ``[(begin, end), ...]``, checked."""
    nd = len(shape)
    pads = tuple(int(p) for p in pads)
    if len(pads) != 2 * nd or min(pads, default=0) < 0:
        raise ShapeError(
            f"{op}: pads={pads} must hold 2*{nd} non-negative ints (ONNX order: the "
            f"begin of every axis, then the end of every axis) for a {nd}-D tensor {shape}"
        )
    if mode not in _PAD_MODES:
        raise ShapeError(f"{op}: mode={mode!r}; use one of {_PAD_MODES}")
    widths = list(zip(pads[:nd], pads[nd:]))
    for ax, (d, (lo, hi)) in enumerate(zip(shape, widths)):
        if mode == "reflect" and max(lo, hi) > d - 1:
            raise ShapeError(
                f"{op}: reflect padding {(lo, hi)} on axis {ax} of length {d} must be at most "
                f"{d - 1} on each side; use mode='edge' or pad less"
            )
        if mode == "edge" and d == 0 and lo + hi:
            raise ShapeError(f"{op}: cannot edge-pad the empty axis {ax} of {shape}")
    return widths


def _pad_ref(x, pads, mode="constant", value=0.0):
    widths = _pad_widths("Pad", x.shape, pads, mode)
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode=mode)


def _pad_backward_ref(dy, pads, x_shape, mode="constant", value=0.0):
    x_shape = tuple(x_shape)
    widths = _pad_widths("PadBackward", x_shape, pads, mode)
    # Pad is a gather: out cell k copies x cell src[k] (or the constant when src[k] = -1).
    # Its adjoint scatters dy back, accumulating every cell copied from the same source.
    ids = np.arange(math.prod(x_shape)).reshape(x_shape)
    src = (np.pad(ids, widths, mode="constant", constant_values=-1) if mode == "constant"
           else np.pad(ids, widths, mode=mode)).ravel()
    dx = np.zeros(math.prod(x_shape), dy.dtype)
    keep = src >= 0
    np.add.at(dx, src[keep], dy.ravel()[keep])
    return dx.reshape(x_shape)


def _pad_infer(ins, attrs):
    x = ins[0]
    widths = _pad_widths("Pad", x.dims, attrs.get("pads", ()), attrs.get("mode", "constant"))
    return [(tuple(d + lo + hi for d, (lo, hi) in zip(x.dims, widths)), x.dtype_code)]


def _pad_backward_infer(ins, attrs):
    dy = ins[0]
    if attrs.get("x_shape") is None:
        raise ShapeError("PadBackward: attribute 'x_shape' (the shape of Pad's input) is required")
    x_shape = tuple(int(d) for d in attrs["x_shape"])
    widths = _pad_widths("PadBackward", x_shape, attrs.get("pads", ()),
                         attrs.get("mode", "constant"))
    want = tuple(d + lo + hi for d, (lo, hi) in zip(x_shape, widths))
    if dy.dims != want:
        raise ShapeError(
            f"PadBackward: dy has shape {dy.dims} but padding x_shape {x_shape} by "
            f"{attrs.get('pads')} gives {want}; pass Pad's attrs unchanged"
        )
    return [(x_shape, dy.dtype_code)]


def _sample_pad(g):
    mode = g.choice(list(_PAD_MODES))
    shape = _small_shape(g, 1, 3, 1 if mode != "reflect" else 2, 4)
    begins = [g.integers(0, min(2, d - 1) if mode == "reflect" else 2) for d in shape]
    ends = [g.integers(0, min(2, d - 1) if mode == "reflect" else 2) for d in shape]
    return shape, mode, tuple(begins + ends)


def _pad_sample(g, dtype):
    shape, mode, pads = _sample_pad(g)
    attrs = {"pads": pads, "mode": mode}
    if mode == "constant":
        attrs["value"] = g.choice([0.0, 1.5, -2.0]) if dtype != _INT else g.integers(-2, 2)
    return [g.array(shape, dtype, -3, 3)], attrs


def _pad_backward_sample(g, dtype):
    shape, mode, pads = _sample_pad(g)
    nd = len(shape)
    out = tuple(d + pads[i] + pads[nd + i] for i, d in enumerate(shape))
    return [g.array(out, dtype, -3, 3)], {"pads": pads, "mode": mode, "x_shape": shape}


_PAD_DOC = """
    ``pads`` lists the begin padding of every axis, then the end padding of every axis (ONNX
    order, ``2 * x.ndim`` non-negative ints). ``mode``: ``"constant"`` (default; fill with
    ``value``, default 0), ``"reflect"`` (mirror without repeating the edge, numpy/ONNX
    ``reflect``; each pad at most ``axis length - 1``) or ``"edge"`` (repeat the edge)."""

defop("Pad", 1, _pad_infer, _pad_ref, _pad_sample, dtypes=NUM,
      doc="Pad x on every axis: ``x -> y`` of shape ``x.shape + begins + ends``." + _PAD_DOC)

defop("PadBackward", 1, _pad_backward_infer, _pad_backward_ref, _pad_backward_sample, dtypes=NUM,
      tol={_F16: (1e-2, 1e-2)},
      doc="""Adjoint of Pad: ``dy -> dx`` of shape ``attrs["x_shape"]``. Constant mode crops;
    reflect and edge modes add the gradient of every padded copy onto the cell it copied.
    Attributes ``pads``, ``mode`` as Pad, and ``x_shape`` (required); Pad's ``value`` may be
    passed along and is ignored.""" + _PAD_DOC)


# ============================================================== Where
def _where_ref(cond, a, b):
    return np.where(cond != 0, a, b)


def _where_infer(ins, attrs):
    cond, a, b = ins
    if a.dtype_code != b.dtype_code:
        raise DtypeMismatchError(
            f"Where: a is {_dtype.name_of(a.dtype_code)} but b is "
            f"{_dtype.name_of(b.dtype_code)}; they must "
            "match (convert one with as_type)"
        )
    shape = rules.broadcast_shapes("Where", rules.broadcast_shapes("Where", cond.dims, a.dims),
                                   b.dims)
    return [(shape, a.dtype_code)]


def _where_sample(g, dtype):
    sa, sb = g.broadcastable_shapes()
    full = np.broadcast_shapes(sa, sb)
    sc = g.choice([full, sa, sb, full[-1:]])
    cond = g.mask(sc).astype(g.choice([np.float32, np.int32, np.float64]))
    return [cond, g.array(sa, dtype, -3, 3), g.array(sb, dtype, -3, 3)], {}


defop("Where", 3, _where_infer, _where_ref, _where_sample, dtypes=NUM,
      doc="""Elementwise select: ``(cond, a, b) -> out = a where cond != 0 else b``, numpy
    broadcasting of all three. ``cond`` may have any dtype (nonzero, including NaN, is true);
    ``a`` and ``b`` share a dtype, which is the output's.""")


# ============================================================== OneHot
def _onehot_ref(indices, depth, axis=-1, on_value=1, off_value=0, dtype=_dtype.kFloat32):
    idx = np.where(indices < 0, indices + depth, indices)
    hot = np.arange(depth) == idx[..., None]  # out-of-range ids match no class: all off
    hot = np.moveaxis(hot, -1, axis % (indices.ndim + 1))
    return np.where(hot, on_value, off_value).astype(_dtype.NP_DTYPE[dtype])


def _onehot_infer(ins, attrs):
    idx = ins[0]
    _check_index("OneHot", "indices", idx)
    depth = attrs.get("depth")
    if depth is None or int(depth) < 1:
        raise ShapeError(f"OneHot: attribute depth={depth!r} must be a positive int")
    r = len(idx.dims)
    ax = attrs.get("axis", -1)
    if not -(r + 1) <= ax <= r:
        raise ShapeError(f"OneHot: axis {ax} is out of range for {r}-D indices (use "
                         f"{-(r + 1)}..{r})")
    ax %= r + 1
    dt = _dtype.code_of(attrs.get("dtype", _dtype.kFloat32))
    return [(idx.dims[:ax] + (int(depth),) + idx.dims[ax:], dt)]


def _onehot_sample(g, dtype):
    depth = g.integers(1, 4)
    shape = _small_shape(g, 0, 2)
    idx = (g.index_array(shape, 2 * depth + 2) - (depth + 1)).astype(np.int32)
    on, off = (g.integers(1, 3), g.integers(-1, 0)) if dtype == _INT else (
        g.choice([1.0, 2.5]), g.choice([0.0, -1.0]))
    return [idx], {"depth": depth, "axis": g.integers(-len(shape) - 1, len(shape)),
                   "on_value": on, "off_value": off, "dtype": dtype}


defop("OneHot", 1, _onehot_infer, _onehot_ref, _onehot_sample, dtypes=NUM,
      doc="""One-hot encoding (ONNX OneHot): ``indices[int32] -> out`` with a new axis of
    length ``depth`` inserted at ``axis`` (default -1, i.e. last; range ``-(r+1) .. r``)::

        out[..., k, ...] = on_value if k == (i if i >= 0 else i + depth) else off_value

    Indices outside ``[-depth, depth)`` give an all-``off_value`` row. Attributes ``depth``
    (required), ``axis``, ``on_value`` (1), ``off_value`` (0), ``dtype`` (output dtype code,
    default float32).""")


# ============================================================== ScatterElements / GatherElements
def _element_index(idx, axis, n):
    """Full index tuple addressing ``x`` at ``idx`` along ``axis`` and at the own position
    along every other axis (ONNX GatherElements/ScatterElements)."""
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = np.where(idx < 0, idx + n, idx)
    return tuple(grid)


def _scatter_elements_ref(x, indices, updates, axis=0, reduction="none"):
    axis %= x.ndim
    out = x.copy()
    where = _element_index(indices, axis, x.shape[axis])
    if reduction == "add":
        np.add.at(out, where, updates)
    else:
        out[where] = updates
    return out


def _gather_elements_ref(x, indices, axis=0):
    axis %= x.ndim
    return x[_element_index(indices, axis, x.shape[axis])]


def _check_elements(op: str, x, idx, axis) -> int:
    _check_index(op, "indices", idx)
    if len(idx.dims) != len(x.dims):
        raise ShapeError(f"{op}: indices {idx.dims} must have the rank of x {x.dims}")
    ax = rules.check_axis(op, axis, len(x.dims))
    for d, (ni, nx) in enumerate(zip(idx.dims, x.dims)):
        if d != ax and ni > nx:
            raise ShapeError(
                f"{op}: indices {idx.dims} is larger than x {x.dims} on axis {d} (only axis "
                f"{ax}, the indexed one, may differ freely)"
            )
    return ax


def _scatter_elements_infer(ins, attrs):
    x, idx, upd = ins
    _check_elements("ScatterElements", x, idx, attrs.get("axis", 0))
    if upd.dims != idx.dims:
        raise ShapeError(f"ScatterElements: updates {upd.dims} must have the shape of indices "
                         f"{idx.dims}")
    if upd.dtype_code != x.dtype_code:
        raise DtypeMismatchError(
            f"ScatterElements: x is {_dtype.name_of(x.dtype_code)} but updates are "
            f"{_dtype.name_of(upd.dtype_code)}; convert updates with as_type"
        )
    if attrs.get("reduction", "none") not in ("none", "add"):
        raise ShapeError(f"ScatterElements: reduction={attrs['reduction']!r}; use 'none' or 'add'")
    return [(x.dims, x.dtype_code)]


def _gather_elements_infer(ins, attrs):
    x, idx = ins
    _check_elements("GatherElements", x, idx, attrs.get("axis", 0))
    return [(idx.dims, x.dtype_code)]


def _sample_elements(g, dtype, unique: bool):
    shape = _small_shape(g)
    ax = g.integers(0, len(shape) - 1)
    n = shape[ax]
    ishape = list(g.integers(1, d) for d in shape)
    if unique:  # distinct indices along the axis: "none" scatter is then order independent
        ishape[ax] = g.integers(1, n)
        keys = g.array(tuple(n if d == ax else k for d, k in enumerate(ishape)),
                       _dtype.kDouble, 0, 1)
        idx = np.take(np.argsort(keys, axis=ax), np.arange(ishape[ax]), axis=ax)
    else:
        ishape[ax] = g.integers(1, 4)
        idx = g.index_array(tuple(ishape), n)
    x = g.array(shape, dtype, -3, 3)
    return x, _some_negative(g, idx.astype(np.int32), n), ax


def _scatter_elements_sample(g, dtype):
    reduction = g.choice(["none", "add"])
    x, idx, ax = _sample_elements(g, dtype, unique=reduction == "none")
    return [x, idx, g.array(idx.shape, dtype, -3, 3)], {"axis": ax, "reduction": reduction}


def _gather_elements_sample(g, dtype):
    x, idx, ax = _sample_elements(g, dtype, unique=False)
    return [x, idx], {"axis": ax}


def _scatter_elements_defined(arrays, attrs):
    """Without a reduction, no two updates may target one element (which one wins is
    unspecified, as in ONNX)."""
    if attrs.get("reduction", "none") != "none":
        return True
    x, idx = arrays[0], np.asarray(arrays[1])
    ax = attrs.get("axis", 0) % x.ndim
    targets = list(np.indices(idx.shape))
    targets[ax] = idx % x.shape[ax]
    flat = np.ravel_multi_index(tuple(targets), x.shape)
    return np.unique(flat).size == flat.size


defop("ScatterElements", 3, _scatter_elements_infer, _scatter_elements_ref,
      _scatter_elements_sample, dtypes=NUM, tol={_F16: (1e-2, 1e-2)},
      defined=_scatter_elements_defined,
      doc="""ONNX ScatterElements: ``(x, indices[int32], updates) -> out``, a copy of x with,
    for every position ``p`` of indices (axis = attrs["axis"], default 0)::

        out[p with p[axis] := indices[p]] = updates[p]     (reduction "none", the default)
        out[p with p[axis] := indices[p]] += updates[p]    (reduction "add"; duplicates sum)

    indices and updates have x's rank and equal shapes, no larger than x outside ``axis``;
    negative indices count from the end. With "none", duplicate targets keep one of the
    updates (unspecified which).""")

defop("GatherElements", 2, _gather_elements_infer, _gather_elements_ref,
      _gather_elements_sample, dtypes=NUM,
      doc="""ONNX GatherElements: ``(x, indices[int32]) -> out`` of indices' shape::

        out[p] = x[p with p[axis] := indices[p]]

    indices has x's rank and is no larger than x outside ``axis`` (attrs["axis"], default 0);
    negative indices count from the end.""")


# ============================================================== UpsampleNearest
def _scales(op: str, scales, ndim: int) -> tuple:
    s = tuple(int(v) for v in (scales or ()))
    if len(s) != ndim or min(s, default=1) < 1 or any(float(v) != int(v) for v in scales):
        raise ShapeError(
            f"{op}: scales={scales!r} must give one positive integer per axis of the "
            f"{ndim}-D input (e.g. (1, 1, 2, 2) to double H and W of NCHW)"
        )
    return s


def _upsample_ref(x, scales):
    y = x
    for ax, s in enumerate(_scales("UpsampleNearest", scales, x.ndim)):
        y = np.repeat(y, s, axis=ax)
    return y


def _upsample_backward_ref(dy, scales, x_shape):
    s = _scales("UpsampleNearestBackward", scales, len(x_shape))
    split = [v for d, k in zip(x_shape, s) for v in (d, k)]
    return dy.reshape(split).sum(axis=tuple(range(1, 2 * len(s), 2)))


def _upsample_infer(ins, attrs):
    x = ins[0]
    s = _scales("UpsampleNearest", attrs.get("scales"), len(x.dims))
    return [(tuple(d * k for d, k in zip(x.dims, s)), x.dtype_code)]


def _upsample_backward_infer(ins, attrs):
    dy = ins[0]
    if attrs.get("x_shape") is None:
        raise ShapeError("UpsampleNearestBackward: attribute 'x_shape' is required")
    x_shape = tuple(int(d) for d in attrs["x_shape"])
    s = _scales("UpsampleNearestBackward", attrs.get("scales"), len(x_shape))
    want = tuple(d * k for d, k in zip(x_shape, s))
    if dy.dims != want:
        raise ShapeError(f"UpsampleNearestBackward: dy has shape {dy.dims}, expected {want} "
                         f"(x_shape {x_shape} times scales {s})")
    return [(x_shape, dy.dtype_code)]


def _upsample_sample(g, dtype):
    shape = _small_shape(g, 1, 4, 1, 3)
    return [g.array(shape, dtype, -3, 3)], {"scales": tuple(g.integers(1, 3) for _ in shape)}


def _upsample_backward_sample(g, dtype):
    shape = _small_shape(g, 1, 4, 1, 3)
    scales = tuple(g.integers(1, 3) for _ in shape)
    dy = g.array(tuple(d * k for d, k in zip(shape, scales)), dtype, -3, 3)
    return [dy], {"scales": scales, "x_shape": shape}


defop("UpsampleNearest", 1, _upsample_infer, _upsample_ref, _upsample_sample, dtypes=NUM,
      doc="""Nearest-neighbour upsampling by integer factors: ``x -> y`` with
    ``y.shape[a] = x.shape[a] * scales[a]`` and ``y[i0, i1, ...] = x[i0 // s0, i1 // s1, ...]``.
    Attribute ``scales``: one positive integer per axis (e.g. (1, 1, 2, 2) for NCHW).""")

defop("UpsampleNearestBackward", 1, _upsample_backward_infer, _upsample_backward_ref,
      _upsample_backward_sample, dtypes=NUM, tol={_F16: (1e-2, 1e-2)},
      doc="""Adjoint of UpsampleNearest: ``dy -> dx`` of shape ``attrs["x_shape"]``, each cell
    the sum of the ``prod(scales)`` cells of dy it was copied to. Attributes ``scales``,
    ``x_shape`` (required).""")
