"""Reduction operators: one Operator class per reduction record.

ReduceSum, ReduceMean, ReduceMax and ReduceMin are built at the end of this module from their
records (:data:`singa.ops.REDUCTIONS`): forward runs the record's op over the normalised axes,
backward its gradient rule on dy with the reduced axes kept as size 1, and on the x and y the
record keeps. ``singa.autograd`` builds their functions (``reduce_sum``, ...) from the same
records. ArgMax (one axis, an int32 index, no gradient) is written out in :mod:`._onnx_extra`;
GlobalAveragePool (:mod:`._shape`) runs a ReduceMean.
"""

from __future__ import annotations

import functools
from typing import Any

from .. import _math
from ..ops._records import RecordDoc
from ..ops._reductions import REDUCTIONS
from ..ops._rules import normalize_axes
from ._engine import Operator, is_training

__all__ = ["OPERATORS"]


class _Reduction(Operator):
    """y = a reduction of x over ``axes``; dx = the record's gradient rule. Each class built
    from a record sets the reduction (``_fn``), the rule (``_rule``) and what the rule reads
    (``_keep_x``, ``_keep_y``)."""

    _fn: Any = None
    _rule: Any = None
    _keep_x = _keep_y = False

    def __init__(self, axes=None, keepdims=1):
        super().__init__()
        self.axes = axes
        self.keepdims = bool(keepdims)

    def forward(self, x):
        axes = normalize_axes(type(self).__name__, self.axes, len(x.dims))
        self.x_shape, self.norm_axes = x.dims, axes
        y = self._fn(x, axes, self.keepdims)
        if (self._keep_x or self._keep_y) and is_training():
            self.x = x if self._keep_x else None
            self.y = _math.reshape(y, self._kept_shape()) if self._keep_y else None
        return y

    def _kept_shape(self) -> tuple:
        """x's shape with the reduced axes as size 1: y's whatever keepdims was."""
        return tuple(1 if i in self.norm_axes else d for i, d in enumerate(self.x_shape))

    def backward(self, dy):
        if (self._keep_x or self._keep_y) and not hasattr(self, "x"):
            self._need_cache()
        x, y = (self.x, self.y) if self._keep_x or self._keep_y else (None, None)
        return self._rule(_math, _math.reshape(dy, self._kept_shape()), x, y, self.x_shape,
                          self.norm_axes)


def _reduction_operator(decl) -> type:
    """The Operator class of a :class:`singa.ops.Reduction` record."""
    name = decl.operator
    body = {"__doc__": RecordDoc(functools.partial(decl.doc, "operator")),
            "__module__": __name__, "__qualname__": name,
            "_fn": staticmethod(getattr(_math, decl.name)), "_rule": staticmethod(decl.grad),
            "_keep_x": "x" in decl.keep, "_keep_y": "y" in decl.keep}
    return type(name, (_Reduction,), body)


# ReduceSum, ReduceMean, ReduceMax, ReduceMin: one class per record that autograd names
OPERATORS = {decl.operator: _reduction_operator(decl)
             for decl in REDUCTIONS.values() if decl.operator}
globals().update(OPERATORS)
