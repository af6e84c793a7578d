"""Fused kernels of unrolled recurrent cells: a gate's slice copied and used in one call.

An ONNX LSTM or GRU imported by singa-onnx runs its cell step by step: each step slices the
gate pre-activations (a ``(batch, gates * hidden)`` product) into one ``(batch, hidden)`` block
per gate, which is a ``Copy`` of a strided view, and applies the gate's op to it. At batch 1
and hidden 256 the work per node is a few hundred floats, so a step's cost is mostly its
dispatched nodes (lstm_lm in benchmarks/real_models.py: 14 nodes per step, four of them these
copies). Fused with the op that reads it, each copy stops being a node of its own.

Each kernel copies the strided input into the output (when the output has the copy's shape
and dtype and does not overlap the op's other input) and runs the op's own kernel there in
place, else into a temporary: the op reads exactly the contiguous block the unfused ``Copy``
would have written, so the result is bitwise that of the two kernels one after the other
(the Sigmoid and Erf kernels pick their one-pass loop by contiguity, which this keeps).
"""

from __future__ import annotations

import numpy as np
from singa import backend as sb

from . import elementwise, movement

_FLOATS = (sb.kFloat16, sb.kFloat32, sb.kDouble)


def _copied(x, out, others=()):
    """``x`` copied into ``out`` when ``out`` can hold the copy, else into a new array."""
    if (out.shape == x.shape and out.dtype == x.dtype
            and not any(np.may_share_memory(out, o) for o in others)):
        movement.KERNELS["Copy"]((x,), (out,), None)
        return out
    tmp = np.empty(x.shape, x.dtype)
    movement.KERNELS["Copy"]((x,), (tmp,), None)
    return tmp


def _copy_then_unary(name: str):
    op = elementwise.KERNELS[name]

    def kernel(ins, outs, attrs):
        op((_copied(ins[0], outs[0]),), outs, attrs.get("second", {}) if attrs else {})

    kernel.__name__ = f"cpu_copy_{name.lower()}"
    kernel.__doc__ = f"Copy+{name}: {name} of the contiguous copy of a (strided) input."
    kernel.dtypes = _FLOATS
    return kernel


def _copy_add(ins, outs, attrs):
    """Copy+Add: the contiguous copy of ``ins[0]`` plus ``ins[1]`` (broadcast)."""
    x, other = ins
    elementwise.KERNELS["Add"]((_copied(x, outs[0], (other,)), other), outs,
                               attrs.get("second", {}) if attrs else {})


_copy_add.dtypes = _FLOATS

KERNELS = {
    "Copy+Sigmoid": _copy_then_unary("Sigmoid"),
    "Copy+Tanh": _copy_then_unary("Tanh"),
    "Copy+Add": _copy_add,
}
