"""Rearrangement operators: one Operator class per rearrangement record.

Reshape, Flatten, Squeeze, Unsqueeze, Transpose, DepthToSpace and SpaceToDepth are built at
the end of this module from their records (:data:`singa.ops.REARRANGEMENTS`): the constructor
has the record's parameters and keeps what the record's ``init`` gives, forward runs the
steps of the record's plan, and backward the inverse steps, the same rule for every record.
``singa.autograd`` builds their functions (``reshape``, ...) from the same records.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import _math
from ..ops._rearrangements import REARRANGEMENTS, compile_def
from ..ops._records import RecordDoc
from ._engine import Operator

__all__ = ["OPERATORS"]


class _Rearrangement(Operator):
    """y = reshape(transpose(reshape(x, mid), perm), out), each step only where the record's
    plan gives it; dx = dy through the inverse steps in reverse order. Each class built from a
    record sets the plan (``_plan``) and a constructor with the record's parameters."""

    _plan: Any = None

    def forward(self, x):
        mid, perm, out = self.layout = self._plan(self, x.dims)
        self.x_shape = x.dims
        y = x if mid is None else _math.reshape(x, mid)
        if perm is not None:
            y = _math.transpose(y, perm)
        return y if out is None else _math.reshape(y, out)

    def backward(self, dy):
        mid, perm, out = self.layout
        if perm is None:
            return _math.reshape(dy, self.x_shape)
        if out is not None:
            permuted = self.x_shape if mid is None else mid
            dy = _math.reshape(dy, [permuted[p] for p in perm])
        # negative axes are taken modulo the rank, as transpose takes them
        dy = _math.transpose(dy, list(np.argsort([a % len(perm) for a in perm])))
        return dy if mid is None else _math.reshape(dy, self.x_shape)


def _rearrangement_operator(decl) -> type:
    """The Operator class of a :class:`singa.ops.Rearrangement` record."""
    names = ", ".join(p.name for p in decl.params)
    init = compile_def("__init__", ("self",), decl.params,
                       f"_operator_init(self)\nself.__dict__.update(_init({names}))",
                       {"_operator_init": Operator.__init__, "_init": decl.init}, __name__,
                       f"{decl.op}.__init__")
    init.__doc__ = "Check the arguments (the class's Parameters) and keep them on the op."
    body = {"__doc__": RecordDoc(functools.partial(decl.doc, "operator")),
            "__module__": __name__, "__qualname__": decl.op, "__init__": init,
            "_plan": staticmethod(decl.plan)}
    return type(decl.op, (_Rearrangement,), body)


# Reshape, Flatten, Squeeze, Unsqueeze, Transpose, DepthToSpace, SpaceToDepth
OPERATORS = {decl.op: _rearrangement_operator(decl) for decl in REARRANGEMENTS.values()}
globals().update(OPERATORS)
