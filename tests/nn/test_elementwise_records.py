"""Each elementwise op record (:mod:`singa.ops._elementwise`) against numpy and finite
differences, through every layer built from it: the op table, ``singa._math``,
``singa.tensor`` and ``singa.autograd``. A record added to the tables is checked here without a
test of its own: its reference is the oracle for every layer's forward, central differences of
that reference the oracle for its gradient rule.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_op
from singa import _dtype, _math, autograd, tensor
from singa.errors import DtypeMismatchError
from singa.ops import OPS
from singa.ops._elementwise import BINARY, UNARY, zero_grad
from singa.tensor import Tensor

GRADED_UNARY = [d for d in UNARY.values() if d.autograd and d.grad not in (None, zero_grad)]
GRADED_BINARY = [d for d in BINARY.values() if d.autograd and d.grad is not None]


def _inside(decl, rng, shape):
    """Float64 points inside the record's domain, off the kinks of abs/relu/sign at 0."""
    low, high = decl.domain
    margin = 0.05 * (high - low)
    x = rng.uniform(low + margin, high - margin, shape)
    return np.where(np.abs(x) < 0.05, x + 0.1, x)


def _example_points(decl):
    low, high = decl.domain
    return np.round(np.linspace(low, high, 3), 2)


@pytest.mark.parametrize("decl", GRADED_UNARY, ids=lambda d: d.op)
def test_unary_gradient_rule_against_finite_differences(decl, rng):
    check_op(getattr(autograd, decl.autograd), [_inside(decl, rng, (3, 4))], decl.reference,
             fwd_rtol=1e-6)


@pytest.mark.parametrize("decl", GRADED_BINARY, ids=lambda d: d.op)
def test_binary_gradient_rule_against_finite_differences(decl, rng):
    a = rng.uniform(0.5, 2.0, (3, 4))
    b = rng.uniform(0.5, 2.0, (4,)) * np.array([1, -1, 1, -1])
    check_op(getattr(autograd, decl.autograd), [a, b], decl.reference, fwd_rtol=1e-6)


@pytest.mark.parametrize("decl", list(UNARY.values()), ids=lambda d: d.op)
def test_unary_layers_agree_with_the_reference(decl):
    assert OPS[decl.op].reference is decl.reference
    x = _example_points(decl)
    want = decl.reference(x)
    ct = Tensor(data=x, dtype=tensor.float64).data
    fn = getattr(_math, decl.name)
    np.testing.assert_allclose(fn(ct).to_numpy(), want, rtol=1e-12)
    assert fn.__name__ == decl.name and decl.example in fn.__doc__
    assert f"y = {decl.formula}" in fn.__doc__
    if decl.tensor:
        t = Tensor(data=x, dtype=tensor.float64)
        function = getattr(tensor, decl.name)
        np.testing.assert_allclose(function(t).to_numpy(), want, rtol=1e-12)
        assert decl.example in function.__doc__
    if decl.autograd:
        cls = getattr(autograd, decl.operator or decl.op)
        function = getattr(autograd, decl.autograd)
        t = Tensor(data=x, dtype=tensor.float64)
        np.testing.assert_allclose(function(t).to_numpy(), want, rtol=1e-12)
        assert isinstance(function(t).creator, cls) and issubclass(cls, autograd.Operator)
        assert (decl.grad_formula in cls.__doc__ if decl.grad is not None
                else "No gradient" in cls.__doc__)


@pytest.mark.parametrize("decl", list(BINARY.values()), ids=lambda d: d.op)
def test_binary_layers_agree_with_the_reference(decl, rng):
    assert OPS[decl.op].reference is decl.reference
    a, b = rng.uniform(0.5, 3.0, (2, 3)), np.round(rng.uniform(0.5, 3.0, (3,)))
    want = decl.reference(a, b)
    ta, tb = Tensor(data=a, dtype=tensor.float64), Tensor(data=b, dtype=tensor.float64)
    fn = getattr(_math, decl.name)
    np.testing.assert_allclose(fn(ta.data, tb.data).to_numpy(), want, rtol=1e-12)
    # the number form runs the record's scalar op (or broadcasts a 0-d tensor)
    np.testing.assert_allclose(fn(ta.data, 2.0).to_numpy(), decl.reference(a, np.float64(2.0)),
                               rtol=1e-12)
    assert decl.example in fn.__doc__
    if decl.tensor:
        got = getattr(tensor, decl.tensor)(ta, tb)
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-12)
    if decl.autograd:
        got = getattr(autograd, decl.autograd)(ta, tb)
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-12)
        assert isinstance(got.creator, getattr(autograd, decl.operator or decl.op))


def test_docstring_examples_are_what_singa_computes():
    # the examples are rendered from the numpy reference: check them against the backend
    for decl in UNARY.values():
        x = _example_points(decl)
        got = getattr(_math, decl.name)(Tensor(data=x, dtype=tensor.float64).data).to_numpy()
        rendered = ", ".join(f"{float(v):.4g}" for v in got)
        assert f"= [{rendered}]" in decl.example, decl.op
    for decl in BINARY.values():
        a = Tensor(data=np.array([1.0, 2.0, 3.0]), dtype=tensor.float64).data
        got = getattr(_math, decl.name)(a, 2.0).to_numpy()
        assert f"= [{', '.join(f'{float(v):.4g}' for v in got)}]" in decl.example, decl.op


def test_records_keep_only_what_their_gradient_reads(rng):
    # an op whose rule reads y alone must not keep x alive (memory of a training step)
    autograd.training = True
    for decl in GRADED_UNARY:
        op = getattr(autograd, decl.operator or decl.op)()
        op(Tensor(data=_inside(decl, rng, (2,)), dtype=tensor.float64))
        assert (op.x is not None) == ("x" in decl.keep), decl.op
        assert (op.y is not None) == ("y" in decl.keep), decl.op
    add = autograd.Add()
    add(Tensor(data=np.ones(2)), Tensor(data=np.ones(2)))
    assert not hasattr(add, "a")


def test_int_inputs_of_a_float_only_record_name_the_op():
    x = Tensor(data=np.array([1, 2], np.int32), dtype=_dtype.kInt)
    with pytest.raises(DtypeMismatchError, match="Sigmoid"):
        tensor.sigmoid(x)
