"""Special values for the conformance kit's ``test_special``: NaN, infinities, signed zeros,
exact .5 ties and integers, and what each op must make of them.

Samplers keep inputs finite and away from ties (:mod:`singa.testing.cases`), so a kernel that
drops a NaN, rounds a tie the wrong way or loses the sign of a zero passes every other test.
``test_special`` draws an ordinary case with the op's sampler, overwrites some elements of
its floating inputs with values of :data:`SPECIAL_VALUES`, and compares every output with
the op's float64 numpy reference, with NaNs at the same places, infinities of the same sign
and, for ops whose zeros are signed, zeros with the same sign bit.

The semantics, decided per op (the references implement them; :data:`SPECIAL` lists the ops)
-------------------------------------------------------------------------------------------
- IEEE 754 arithmetic everywhere: NaN in, NaN out; ``x / ±0`` is ``±inf``; ``inf - inf`` and
  ``0 * inf`` are NaN; ``-0.0`` keeps its sign through ``Neg``, ``Abs`` (gives +0),
  ``Ceil``/``Floor``/``Round``/``RoundE`` (``Round(-0.3) = -0.0``, as C's ``round`` and
  numpy's ``np.round``), ``Sqrt``, ``Sin``, ``Tanh``, copies and data movement.
- Max-like ops propagate NaN: ``ReLU``, ``Maximum``/``Minimum``, ``MaxScalar``/``MinScalar``,
  ``Clip``, ``ReduceMax``/``ReduceMin`` and max pooling return NaN when any input of the
  element (window, reduced slice) is NaN, as numpy's ``maximum`` and PyTorch's ``max_pool2d``
  do (C's ``fmax``, which ignores NaN, is wrong here). ``ArgMax`` counts NaN as the maximum
  (the first NaN's index), as numpy and PyTorch do. The sign of a zero these ops return is
  unspecified (IEEE's maximum may return either zero).
- Comparisons with NaN are false (``NE`` true); ``Not``, ``And``, ``Or``, ``Xor`` treat NaN as
  non-zero (true).
- Reductions and softmax: NaN propagates to every output that reads it, ``+inf`` and
  ``-inf`` in one sum give NaN; the sign of a zero sum is unspecified.

Ops not listed (GEMM, convolution, normalisation, losses, Pow) take finite values only:
BLAS libraries skip products with zero and Winograd transforms mix windows, so where a NaN or
an infinity lands is the library's choice, and C's ``pow`` and numpy's ``power`` disagree on
infinities.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ops._tensor_ops import BINARY, SCALAR, UNARY

__all__ = ["SPECIAL", "SPECIAL_VALUES", "Special", "inject"]

#: Values ``test_special`` writes into inputs: NaN, infinities, signed zeros, exact .5 ties
#: (all exact in float16) and small integers.
SPECIAL_VALUES = (math.nan, math.inf, -math.inf, -0.0, 0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5,
                  1.0, -1.0, 2.0, -3.0)


@dataclass(frozen=True)
class Special:
    """How ``test_special`` treats one op.

    Attributes
    ----------
    inputs: indices of the inputs that receive special values (None: every floating input).
    signed_zero: zeros in the outputs must carry the reference's sign bit.
    """

    inputs: tuple | None = None
    signed_zero: bool = True


_MAXLIKE = Special(signed_zero=False)
_UNSIGNED_ZERO = {"ReLU", "Sign", "Not", "MaxScalar", "MinScalar", "Maximum", "Minimum", "And",
                  "Or", "Xor", "LTScalar", "LEScalar", "GTScalar", "GEScalar", "EQScalar",
                  "NEScalar", "LT", "LE", "GT", "GE", "EQ", "NE"}
_NOT_SPECIAL = {"Pow", "PowScalar", "RPowScalar"}

#: op name -> :class:`Special`: the ops ``test_special`` checks.
SPECIAL: dict[str, Special] = {}
for _name in (*UNARY, *SCALAR, *BINARY):
    if _name not in _NOT_SPECIAL:
        SPECIAL[_name] = _MAXLIKE if _name in _UNSIGNED_ZERO else Special()
SPECIAL.update({
    "ReLUBackward": _MAXLIKE,  # dy * (x > 0): a product, NaN in dy propagates
    "Clip": _MAXLIKE,
    "Copy": Special(),
    "Concat": Special(),
    "Repeat": Special(),
    "Take": Special(inputs=(0,)),
    "Sum": _MAXLIKE,
    "ReduceMean": _MAXLIKE,
    "ReduceMax": _MAXLIKE,
    "ReduceMin": _MAXLIKE,
    "ArgMax": Special(),
    "Asum": _MAXLIKE,
    "Nrm2": _MAXLIKE,
    "Softmax": _MAXLIKE,
    "LogSoftmax": _MAXLIKE,
    "Pooling2d": _MAXLIKE,
})


def inject(g, arrays: list, spec: Special) -> list:
    """Copies of ``arrays`` with some elements of their floating inputs (those ``spec``
    selects) replaced by :data:`SPECIAL_VALUES`; every selected non-empty input gets at least
    one. Small arrays are drawn element by element (shrinkable), large ones from a seed."""
    out = []
    for i, a in enumerate(arrays):
        a = np.array(a)
        if a.dtype.kind == "f" and a.size and (spec.inputs is None or i in spec.inputs):
            flat = a.reshape(-1)
            n = flat.size
            vals = np.array(SPECIAL_VALUES, a.dtype)
            if n <= 32:
                picks = np.asarray([g.integers(-1, len(vals) - 1) for _ in range(n)])  # -1: keep
            else:
                rng = np.random.default_rng(g.integers(0, 2**32 - 1))
                picks = np.where(rng.random(n) < 0.25, rng.integers(0, len(vals), n), -1)
            if (picks < 0).all():
                picks[g.integers(0, n - 1)] = g.integers(0, len(vals) - 1)
            flat[picks >= 0] = vals[picks[picks >= 0]]
            a = flat.reshape(a.shape)
        out.append(a)
    return out
