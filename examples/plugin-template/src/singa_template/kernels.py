"""Native kernels of the template device, keyed by op name (see ``singa.backend.OPS``).

A kernel is ``kernel(ins, outs, attrs)`` over :class:`~.buffer.View` objects. Inputs may be
strided or broadcast views and an output may alias an input, so each kernel reads its inputs
before it writes. What the dispatcher must know about a kernel (its dtypes, row-major inputs,
a graph-mode ``bind``) goes in a :class:`singa.backend.Kernel` record around it. Every op
missing here runs through core's host fallback.
"""

from __future__ import annotations

import numpy as np
from singa.backend import Kernel


def add(ins, outs, attrs):
    np.add(ins[0].host_array(), ins[1].host_array(), out=outs[0].host_array())


def mul(ins, outs, attrs):
    np.multiply(ins[0].host_array(), ins[1].host_array(), out=outs[0].host_array())


def relu(ins, outs, attrs):
    np.maximum(ins[0].host_array(), 0, out=outs[0].host_array(), casting="unsafe")


def copy(ins, outs, attrs):
    np.copyto(outs[0].host_array(), ins[0].host_array())


def gemm(ins, outs, attrs):
    """out = alpha * op(A) @ op(B) + beta * C; ``out`` may alias C."""
    # float16 is computed in float32 and rounded once, at the copy (the kit allows one ulp)
    a, b, c = (x.host_array().astype(np.promote_types(x.host_array().dtype, "f4")) for x in ins)
    a = a.T if attrs.get("transA") else a
    b = b.T if attrs.get("transB") else b
    res = a @ b
    res *= attrs.get("alpha", 1.0)
    beta = attrs.get("beta", 0.0)
    if beta:
        res += beta * c
    np.copyto(outs[0].host_array(), res, casting="unsafe")


KERNELS = {
    "Add": add, "Mul": mul, "ReLU": relu, "Copy": copy,
    # a device GEMM library takes row-major operands: the dispatcher copies strided ones first
    "GEMM": Kernel(gemm, contiguous_inputs=True),
}
