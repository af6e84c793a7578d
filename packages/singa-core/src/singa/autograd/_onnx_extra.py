"""Operators the ONNX importer needs that SINGA's autograd lacked: max/min reductions and
arg-max, each over ops already in the op table (``ReduceMax``, ``ReduceMin``, ``ArgMax``), so
they run on every backend."""

from __future__ import annotations

from .. import _dtype
from .. import _math as M
from ..ops._rules import normalize_axes
from ._engine import Operator, is_training

__all__ = ["ReduceMax", "ReduceMin", "ArgMax", "reduce_max", "reduce_min", "argmax"]


class _ReduceExtreme(Operator):
    """y = max (or min) of x over ``axes``; dx = dy at the extreme cells, split among ties.

    dx_i = dy [x_i == y] / #{j : x_j == y} (the subgradient PyTorch's amax uses).
    """

    fn = None

    def __init__(self, axes=None, keepdims=1):
        super().__init__()
        self.axes, self.keepdims = axes, bool(keepdims)

    def forward(self, x):
        axes = normalize_axes(type(self).__name__, self.axes, len(x.shp))
        y = type(self).fn(x, axes, True)
        self.norm_axes = axes
        if is_training():
            self.x, self.y_kept, self.ax = x, y, axes
        if self.keepdims:
            return y
        return M.reshape(y, tuple(d for i, d in enumerate(x.shp) if i not in axes))

    def backward(self, dy):
        if not hasattr(self, "x"):
            self._need_cache()
        x, y = self.x, self.y_kept
        mask = M.as_type(M.eq(x, M.broadcast_to(y, x.shp)), x.dt)
        count = M.sum(mask, self.ax, True)
        g = M.div(M.reshape(dy, y.shp), count)
        return M.mul(mask, M.broadcast_to(g, x.shp))


class ReduceMax(_ReduceExtreme):
    """y = max over ``axes``; the gradient flows to the maximal cells."""

    fn = staticmethod(M.reduce_max)


class ReduceMin(_ReduceExtreme):
    """y = min over ``axes``; the gradient flows to the minimal cells."""

    fn = staticmethod(M.reduce_min)


class ArgMax(Operator):
    """Index (int32) of the first maximum along ``axis``; no gradient."""

    def __init__(self, axis=0, keepdims=1):
        super().__init__()
        self.axis, self.keepdims = axis, bool(keepdims)

    def forward(self, x):
        y = M.argmax(x, self.axis, self.keepdims)
        return y if y.dt == _dtype.kInt else M.as_type(y, _dtype.kInt)

    def backward(self, dy):
        return None


def reduce_max(x, axes=None, keepdims=1):
    return ReduceMax(axes, keepdims)(x)[0]


def reduce_min(x, axes=None, keepdims=1):
    return ReduceMin(axes, keepdims)(x)[0]


def argmax(x, axis=0, keepdims=1):
    return ArgMax(axis, keepdims)(x)[0]
