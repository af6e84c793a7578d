"""Elementwise chains: several elementwise ops compiled into one numba loop.

The scheduler (graph mode) or ``singa.ops._fusion.run_chain`` (an eager optimizer update)
hands over an :class:`singa.ops.ElementwiseChain` (an optimizer's in-place
updates of one parameter, for instance ``buf *= momentum; buf += g; p -= lr * buf``); this
module writes the source of one loop over the elements that runs every step for each element,
compiles it with numba (once per distinct chain) and returns it as a kernel. Each step is the
same float arithmetic as the op's own kernel (numpy's ``Axpy`` is ``y + x * alpha``, rounded
after the product and after the sum; numba does not contract them into an FMA), so a chain
gives bitwise what the ops give one after the other, while reading and writing each array once
instead of once per op.
"""

from __future__ import annotations

import threading

from singa import backend as sb

from ._threads import num_threads, run_ranges

#: Scalar expression of each op, over its inputs ``{0}``, ``{1}``, ... and the constants
#: ``zero`` and ``one`` of the chain's dtype: numpy's arithmetic, including its ReLU's
#: ``np.maximum(x, 0)`` (NaN stays NaN, -0.0 becomes +0.0) and ReLUBackward's multiplication
#: by the comparison as a number.
TEMPLATES = {
    "Add": "{0} + {1}",
    "Sub": "{0} - {1}",
    "Mul": "{0} * {1}",
    "Axpy": "{2} + {1} * {0}",
    "ReLU": "({0} if ({0} > zero or {0} != {0}) else zero)",
    "ReLUBackward": "{0} * (one if {1} > zero else zero)",
}

#: Chains over at least this many elements run in ranges on the cores (as the elementwise
#: kernels do, see elementwise.PARALLEL_MIN_ITEMS).
PARALLEL_MIN_ITEMS = 1 << 20


def source(chain) -> str:
    """Python source of the chain's loop: ``chain_loop(o0, o1, ..., lo, hi)``."""
    args = ", ".join(f"o{k}" for k in range(len(chain.scalar)))
    lines = [f"def chain_loop({args}, lo, hi):",
             "    zero = o0.dtype.type(0)",
             "    one = o0.dtype.type(1)"]
    for k, is_scalar in enumerate(chain.scalar):
        if is_scalar:
            lines.append(f"    s{k} = o{k}[0]")
    lines.append("    for i in range(U(lo), U(hi)):")
    for step in chain.steps:
        vals = [f"s{k}" if chain.scalar[k] else f"o{k}[i]" for k in step.ins]
        lines.append(f"        o{step.out}[i] = {TEMPLATES[step.op].format(*vals)}")
    return "\n".join(lines) + "\n"


class ChainCompiler:
    """The CPU backend's ``Device.chain_compiler()``."""

    ops = frozenset(TEMPLATES)
    dtypes = frozenset({sb.kFloat32, sb.kDouble})

    def __init__(self):
        self._kernels: dict = {}
        self._lock = threading.Lock()

    def compile(self, chain):
        with self._lock:
            kernel = self._kernels.get(chain)
            if kernel is None:
                kernel = self._kernels[chain] = _kernel(chain)
        return kernel


def _kernel(chain):
    import numba
    import numpy as np

    namespace = {"U": np.uint64}
    exec(compile(source(chain), f"<singa chain {chain.name}>", "exec"), namespace)
    loop = numba.njit(nogil=True)(namespace["chain_loop"])
    full = [k for k, s in enumerate(chain.scalar) if not s]

    def kernel(ins, outs, attrs):
        flat = [a.reshape(-1) for a in ins]
        n = flat[full[0]].size if full else 1
        if n >= PARALLEL_MIN_ITEMS and num_threads() > 1:
            run_ranges(lambda lo, hi: loop(*flat, lo, hi), n)
        else:
            loop(*flat, 0, n)

    kernel.__name__ = f"cpu_{chain.name}"
    kernel.source = source(chain)
    return kernel
