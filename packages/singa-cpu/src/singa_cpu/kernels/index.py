"""Index, padding and resampling kernels: ScatterAdd, Pad/PadBackward, Where, OneHot,
ScatterElements, GatherElements, UpsampleNearest/UpsampleNearestBackward."""

from __future__ import annotations

import math

import numpy as np
from singa.backend import check_indices, kernel_attrs

from ._float16 import via_float32
from ._jit import njit


def _normalized(idx: np.ndarray, n: int, op: str) -> np.ndarray:
    """Indices in [0, n) (negative ones count from the end); IndexOutOfRangeError outside."""
    check_indices(op, idx, n)
    return np.where(idx < 0, idx + n, idx) if idx.size and idx.min() < 0 else idx


# ---------------------------------------------------------------- ScatterAdd
@njit()
def _scatter_add_rows(idx, src3, out3):
    a_, n, b_ = out3.shape
    for a in range(a_):
        for k in range(n):
            for b in range(b_):
                out3[a, k, b] = 0
        for j in range(idx.shape[0]):
            k = idx[j]
            for b in range(b_):
                out3[a, k, b] += src3[a, j, b]


@kernel_attrs(contiguous_inputs=True)
@via_float32
def scatter_add(ins, outs, attrs):
    idx, src = ins
    out = outs[0]
    axis = attrs.get("axis", 0) % out.ndim
    n = out.shape[axis]
    flat = _normalized(idx.reshape(-1), n, "ScatterAdd")
    lead, trail = math.prod(out.shape[:axis]), math.prod(out.shape[axis + 1:])
    _scatter_add_rows(np.ascontiguousarray(flat, np.int64), src.reshape(lead, flat.size, trail),
                      out.reshape(lead, n, trail))


# ---------------------------------------------------------------- Pad / PadBackward
def _widths(pads, ndim):
    pads = tuple(int(p) for p in pads)
    return list(zip(pads[:ndim], pads[ndim:]))


def _interior(widths, shape):
    return tuple(slice(lo, lo + d) for (lo, _), d in zip(widths, shape))


def pad(ins, outs, attrs):
    x, out = ins[0], outs[0]
    widths = _widths(attrs["pads"], x.ndim)
    mode = attrs.get("mode", "constant")
    if not widths:  # a 0-d tensor: nothing to pad (np.pad refuses an empty pad_width)
        np.copyto(out, x)
    elif mode == "constant":
        out.fill(attrs.get("value", 0))
        out[_interior(widths, x.shape)] = x
    else:
        np.copyto(out, np.pad(x, widths, mode=mode))


def _fold_axis(g: np.ndarray, ax: int, lo: int, hi: int, n: int, mode: str) -> np.ndarray:
    """Adjoint of padding one axis: add each padded copy's gradient onto its source cell."""
    gv = np.moveaxis(g, ax, 0)
    core = gv[lo:lo + n].copy()
    if mode == "edge":
        if lo:
            core[0] += gv[:lo].sum(axis=0)
        if hi:
            core[n - 1] += gv[lo + n:].sum(axis=0)
    else:  # reflect: pad cell lo - d copies x[d]; pad cell lo + n - 1 + d copies x[n - 1 - d]
        if lo:
            core[1:lo + 1] += gv[:lo][::-1]
        if hi:
            core[n - 1 - hi:n - 1] += gv[lo + n:lo + n + hi][::-1]
    return np.moveaxis(core, 0, ax)


@via_float32
def pad_backward(ins, outs, attrs):
    dy, dx = ins[0], outs[0]
    widths = _widths(attrs["pads"], dx.ndim)
    mode = attrs.get("mode", "constant")
    if mode == "constant":
        np.copyto(dx, dy[_interior(widths, dx.shape)])
        return
    g = dy
    for ax, ((lo, hi), n) in enumerate(zip(widths, dx.shape)):
        if lo or hi:
            g = _fold_axis(g, ax, lo, hi, n, mode)
    np.copyto(dx, g)


# ---------------------------------------------------------------- Where / OneHot
def where(ins, outs, attrs):
    cond, a, b = ins
    np.copyto(outs[0], np.where(cond != 0, a, b))


def onehot(ins, outs, attrs):
    idx, out = ins[0], outs[0]
    depth = int(attrs["depth"])
    axis = attrs.get("axis", -1) % out.ndim
    norm = np.where(idx < 0, idx + depth, idx)
    hot = np.arange(depth) == norm[..., None]  # out-of-range ids match no class
    np.copyto(np.moveaxis(out, axis, -1),
              np.where(hot, attrs.get("on_value", 1), attrs.get("off_value", 0)),
              casting="unsafe")


# ---------------------------------------------------------------- Scatter/GatherElements
def _element_index(idx, axis, n, op):
    grid = list(np.indices(idx.shape, sparse=True))
    grid[axis] = _normalized(idx, n, op)
    return tuple(grid)


def scatter_elements(ins, outs, attrs):
    x, idx, upd = ins
    out = outs[0]
    axis = attrs.get("axis", 0) % x.ndim
    where_ = _element_index(idx, axis, x.shape[axis], "ScatterElements")
    upd = upd.copy() if np.shares_memory(upd, out) else upd
    np.copyto(out, x)
    if attrs.get("reduction", "none") == "add":
        np.add.at(out, where_, upd)
    else:
        out[where_] = upd


def gather_elements(ins, outs, attrs):
    x, idx = ins
    axis = attrs.get("axis", 0) % x.ndim
    norm = _normalized(idx, x.shape[axis], "GatherElements")
    xs = x[tuple(slice(None) if d == axis else slice(0, k) for d, k in enumerate(idx.shape))]
    np.copyto(outs[0], np.take_along_axis(xs, norm, axis))


# ---------------------------------------------------------------- UpsampleNearest
def _split(shape, scales):
    return [v for d, s in zip(shape, scales) for v in (d, s)]


@kernel_attrs(contiguous_inputs=True)
def upsample_nearest(ins, outs, attrs):
    x, y = ins[0], outs[0]
    scales = tuple(int(s) for s in attrs["scales"])
    np.copyto(y.reshape(_split(x.shape, scales)),
              x.reshape(_split(x.shape, (1,) * x.ndim)))


@kernel_attrs(contiguous_inputs=True)
def upsample_nearest_backward(ins, outs, attrs):
    dy, dx = ins[0], outs[0]
    scales = tuple(int(s) for s in attrs["scales"])
    acc = np.float32 if dy.dtype == np.float16 else None
    summed = dy.reshape(_split(dx.shape, scales)).sum(axis=tuple(range(1, 2 * dx.ndim, 2)),
                                                       dtype=acc)
    np.copyto(dx, summed, casting="same_kind")


KERNELS = {
    "ScatterAdd": scatter_add,
    "Pad": pad,
    "PadBackward": pad_backward,
    "Where": where,
    "OneHot": onehot,
    "ScatterElements": scatter_elements,
    "GatherElements": gather_elements,
    "UpsampleNearest": upsample_nearest,
    "UpsampleNearestBackward": upsample_nearest_backward,
}
