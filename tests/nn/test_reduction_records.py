"""Each reduction record (:mod:`singa.ops._reductions`) against numpy and finite differences,
through every layer built from it: the op table, ``singa._math`` and ``singa.autograd``, and
the ``singa.tensor`` functions written over them (SINGA's ``sum`` and ``average``). A record
added to the table is checked here without a test of its own: numpy's reduction is the oracle
for every layer's forward, central differences of the reference the oracle for its gradient
rule.
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import _dtype, _math, tensor
from singa.ops import OPS, REDUCTIONS
from singa.tensor import Tensor

RECORDS = list(REDUCTIONS.values())
# axes as the callers pass them: None, one int, a negative one, a list, a tuple of all
AXES = [None, 1, -1, [0, 2], (0, 1, 2)]


def _ct(x):
    return Tensor(data=x, dtype=tensor.float64).data


def _numpy(decl, x, axes, keepdims):
    """numpy's own reduction, with numpy's axis conventions (not the record's code)."""
    axis = tuple(axes) if isinstance(axes, list) else axes
    return decl.numpy(x, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_op_table_entry_is_the_records(decl):
    op = OPS[decl.op]
    assert op.reference is decl.reference
    assert op.dtypes == decl.dtypes
    assert (op.acc_bound is None) == (decl.bound is None)


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_math_function_agrees_with_numpy(decl, axes, keepdims, rng):
    x = rng.uniform(-3, 3, (2, 3, 4))
    want = _numpy(decl, x, axes, keepdims)
    fn = getattr(_math, decl.name)
    got = fn(_ct(x), axes, keepdims).to_numpy()
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    np.testing.assert_allclose(decl.reference(x, axes, keepdims), want, rtol=1e-12)


@pytest.mark.parametrize("decl", [d for d in RECORDS if _dtype.kInt in d.dtypes],
                         ids=lambda d: d.op)
def test_int32_stays_int32(decl, rng):
    x = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    got = getattr(_math, decl.name)(Tensor(data=x, dtype=tensor.int32).data, 0).to_numpy()
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, decl.numpy(x, axis=0))


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_math_docstring_is_the_records(decl):
    fn = getattr(_math, decl.name)
    assert fn.__name__ == decl.name
    assert fn.__doc__ == decl.doc("math")
    assert f"y = {decl.formula}," in fn.__doc__ and f"= {decl.example}" in fn.__doc__


def test_docstring_examples_are_what_singa_computes():
    # the examples are rendered from the numpy reference: check them against the backend
    x = np.array([[1.0, -2.0, 3.0], [4.0, 0.0, 5.0]])
    for decl in RECORDS:
        got = getattr(_math, decl.name)(_ct(x), (1,)).to_numpy()
        assert decl.example == "[" + ", ".join(f"{float(v):.4g}" for v in got) + "]", decl.op
