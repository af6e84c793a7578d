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
from gradcheck import check_op
from singa import _dtype, _math, autograd, tensor
from singa.errors import SingaError
from singa.ops import OPS, REDUCTIONS
from singa.tensor import CTensor, Tensor

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


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_gradient_rule_against_finite_differences(decl, axes, keepdims, rng):
    # distinct values: max and min have one extreme cell per output element
    x = rng.permutation(24).reshape(2, 3, 4) / 7.0 - 1.5
    function = getattr(autograd, decl.autograd)
    out = check_op(lambda t: function(t, axes, keepdims), [x],
                   lambda x: _numpy(decl, x, axes, bool(keepdims)), fwd_rtol=1e-12)
    assert out["grads"][0].shape == x.shape


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_autograd_forms_agree_with_numpy(decl, rng):
    x = rng.uniform(-3, 3, (2, 3, 4))
    cls = getattr(autograd, decl.operator)
    function = getattr(autograd, decl.autograd)
    for axes in AXES:
        for keepdims in (0, 1):
            want = _numpy(decl, x, axes, bool(keepdims))
            t = Tensor(data=x, dtype=tensor.float64)
            y = function(t, axes, keepdims)
            assert isinstance(y.creator, cls) and issubclass(cls, autograd.Operator)
            np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-12)
            (y2,) = cls(axes, keepdims)(t)
            np.testing.assert_array_equal(y2.to_numpy(), y.to_numpy())
    # SINGA's defaults: every axis, kept as size 1
    want = decl.numpy(x, keepdims=True)
    np.testing.assert_allclose(function(Tensor(data=x, dtype=tensor.float64)).to_numpy(), want,
                               rtol=1e-12)
    assert function.__name__ == decl.autograd
    assert function.__doc__ == decl.doc("autograd", kind="Tensor")
    assert decl.grad_formula in function.__doc__ and decl.grad_formula in cls.__doc__


@pytest.mark.parametrize("decl", [d for d in RECORDS if "x" in d.keep], ids=lambda d: d.op)
def test_ties_share_the_gradient(decl, rng):
    # the oracle, written out: dx_i = dy [x_i == y] / #{j : x_j == y}
    x = rng.integers(0, 3, (3, 4, 5)).astype(np.float64)
    dy = rng.standard_normal((3,))
    autograd.training = True
    t = Tensor(data=x, dtype=tensor.float64, stores_grad=True)
    y = getattr(autograd, decl.autograd)(t, [1, 2], 0)
    (_, g), = list(autograd.backward(y, Tensor(data=dy, dtype=tensor.float64,
                                                   requires_grad=False)))
    yk = decl.numpy(x, axis=(1, 2), keepdims=True)
    mask = (x == yk).astype(np.float64)
    np.testing.assert_allclose(g.to_numpy(), mask * dy[:, None, None] /
                               mask.sum(axis=(1, 2), keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_records_keep_only_what_their_gradient_reads(decl, rng):
    # a sum or mean must not keep x alive (memory of a training step); max and min read both
    autograd.training = True
    op = getattr(autograd, decl.operator)([1], 0)
    op(Tensor(data=rng.uniform(-1, 1, (2, 3)), dtype=tensor.float64))
    saved = {k for k, v in vars(op).items() if isinstance(v, CTensor)}
    assert saved == set(decl.keep), (decl.op, saved)
    autograd.training = False
    op = getattr(autograd, decl.operator)([1], 0)
    op(Tensor(data=rng.uniform(-1, 1, (2, 3)), dtype=tensor.float64))
    assert not any(isinstance(v, CTensor) for v in vars(op).values())
    if decl.keep:
        with pytest.raises(SingaError, match="autograd.training"):
            op.backward(_ct(np.ones(2)))


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
def test_tensor_sum_and_average_over_the_records(axis, rng):
    """SINGA's tensor.sum (a full sum as a (1, 1) Tensor) and tensor.average (a float for 1-D
    input, axis 0 by default), written over the records' functions."""
    x = rng.uniform(-3, 3, (3, 4))
    t = Tensor(data=x, dtype=tensor.float64)
    want = np.sum(x, axis=axis)
    got = tensor.sum(t, axis).to_numpy()
    np.testing.assert_allclose(got, want if np.ndim(want) else np.reshape(want, (1, 1)),
                               rtol=1e-12)
    want = np.mean(x, axis=0 if axis is None else axis)
    np.testing.assert_allclose(tensor.average(t, axis).to_numpy(), want, rtol=1e-12)
    v = rng.uniform(-3, 3, (5,))
    assert tensor.average(Tensor(data=v, dtype=tensor.float64)) == pytest.approx(np.mean(v))


def test_a_users_subclass_works_as_in_singa(rng):
    """SINGA's way of changing an op: subclass it and override forward or backward."""

    class TwiceTheGradient(autograd.ReduceSum):
        """My reduction."""

        def backward(self, dy):
            return _math.mul(super().backward(dy), 2.0)

    autograd.training = True
    x = Tensor(data=rng.uniform(-1, 1, (2, 3)), dtype=tensor.float64, stores_grad=True)
    y = TwiceTheGradient([1], 0)(x)[0]
    np.testing.assert_allclose(y.to_numpy(), x.to_numpy().sum(1), rtol=1e-12)
    (_, g), = list(autograd.backward(y, Tensor(data=np.ones(2), dtype=tensor.float64,
                                                   requires_grad=False)))
    np.testing.assert_array_equal(g.to_numpy(), np.full((2, 3), 2.0))
    assert TwiceTheGradient.__doc__ == "My reduction."
    assert y.creator.norm_axes == (1,) and y.creator.keepdims is False
