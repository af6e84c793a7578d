"""singa._dtype.PROMOTE against numpy's promote_types, with the deliberate differences named.

An int meeting a float gives the float's dtype (PyTorch, JAX) where numpy widens to float64,
and uint8 with int8 gives int32 (numpy's int16 is not a SINGA dtype). Every other pair is
numpy's answer; docs/compatibility.md lists the same differences.
"""

from __future__ import annotations

import numpy as np
from singa import _dtype

DIFFERENCES = {  # {a, b}: (singa, numpy)
    frozenset(("int32", "float32")): ("float32", "float64"),
    frozenset(("int32", "float16")): ("float16", "float64"),
    frozenset(("int8", "uint8")): ("int32", "int16"),
}


def test_promotion_is_numpys_except_the_documented_pairs():
    differ = {}
    for (a, b), r in _dtype.PROMOTE.items():
        ours = _dtype.name_of(r)
        theirs = np.promote_types(_dtype.NP_DTYPE[a], _dtype.NP_DTYPE[b]).name
        if ours != theirs:
            differ[frozenset((_dtype.name_of(a), _dtype.name_of(b)))] = (ours, theirs)
    assert differ == DIFFERENCES


def test_promotion_is_symmetric_and_keeps_equal_dtypes():
    for (a, b), r in _dtype.PROMOTE.items():
        assert _dtype.PROMOTE[b, a] == r
        if a == b:
            assert r == a
