"""Each rearrangement record (:mod:`singa.ops._rearrangements`) against numpy and finite
differences, through the Operator class and the ``singa.autograd`` function built from it.

The oracle of every case is numpy's own function for the op (``reshape``, ``squeeze``,
``expand_dims``, ``transpose``) or, for DepthToSpace and SpaceToDepth, ONNX's definition
written cell by cell below; the record's ``numpy`` form is checked against the same oracle,
since it renders the docstring examples. Gradients are checked against central differences.
A record added to the table without cases here fails ``test_every_record_has_cases``; the
generated cases (hypothesis) draw shapes and arguments for every record in the table.
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from gradcheck import check_op
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from singa import _math, autograd, tensor
from singa.errors import ShapeError
from singa.ops import REARRANGEMENTS
from singa.ops._rearrangements import REQUIRED
from singa.tensor import CTensor, Tensor

RECORDS = list(REARRANGEMENTS.values())


def _depth_to_space(x, b, mode="DCR"):
    """ONNX DepthToSpace, one cell at a time: y[n, c, h b + i, w b + j] = x[n, k, h, w], k =
    (i b + j) C' + c (DCR) or c b^2 + i b + j (CRD), C' = C / b^2."""
    n, c, h, w = x.shape
    cc = c // (b * b)
    y = np.empty((n, cc, h * b, w * b), x.dtype)
    for ch in range(cc):
        for i in range(b):
            for j in range(b):
                k = (i * b + j) * cc + ch if mode.upper() == "DCR" else ch * b * b + i * b + j
                y[:, ch, i::b, j::b] = x[:, k]
    return y


def _space_to_depth(x, b, mode="DCR"):
    """The inverse of :func:`_depth_to_space` in the same mode, cell by cell."""
    n, c, h, w = x.shape
    y = np.empty((n, c * b * b, h // b, w // b), x.dtype)
    for ch in range(c):
        for i in range(b):
            for j in range(b):
                k = (i * b + j) * c + ch if mode.upper() == "DCR" else ch * b * b + i * b + j
                y[:, k] = x[:, ch, i::b, j::b]
    return y


# op -> [(x shape, constructor arguments, numpy oracle)]
CASES = {
    "Reshape": [((2, 3, 4), ([4, 6],), lambda x: np.reshape(x, (4, 6))),
                ((2, 3, 4), ([0, -1],), lambda x: np.reshape(x, (2, 12))),
                ((2, 3, 4), ((-1, 3, 0),), lambda x: np.reshape(x, (2, 3, 4))),
                ((2, 3, 4), (24,), lambda x: np.reshape(x, 24)),
                ((1,), ([],), lambda x: np.reshape(x, ()))],
    "Flatten": [((2, 3, 4), (), lambda x: np.reshape(x, (2, 12))),
                ((2, 3, 4), (0,), lambda x: np.reshape(x, (1, 24))),
                ((2, 3, 4), (3,), lambda x: np.reshape(x, (24, 1))),
                ((2, 3, 4), (-1,), lambda x: np.reshape(x, (6, 4)))],
    "Squeeze": [((1, 3, 1), (), lambda x: np.squeeze(x)),
                ((1, 3, 1), ([0],), lambda x: np.squeeze(x, 0)),
                ((2, 3, 1), (-1,), lambda x: np.squeeze(x, -1)),
                ((1, 3, 1), ((0, 2),), lambda x: np.squeeze(x, (0, 2)))],
    "Unsqueeze": [((2, 3), (0,), lambda x: np.expand_dims(x, 0)),
                  ((2, 3), (-1,), lambda x: np.expand_dims(x, -1)),
                  ((2, 3), ([0, 3],), lambda x: np.expand_dims(x, (0, 3))),
                  ((2, 3), ([-1, 1],), lambda x: np.expand_dims(x, (-1, 1)))],
    "Transpose": [((2, 3, 4), (), lambda x: np.transpose(x)),
                  ((2, 3, 4), ([1, 2, 0],), lambda x: np.transpose(x, (1, 2, 0))),
                  ((2, 3, 4), ([-1, 0, 1],), lambda x: np.transpose(x, (2, 0, 1))),
                  ((2, 3), ([0, 1],), lambda x: x)],
    "DepthToSpace": [((2, 8, 2, 3), (2,), lambda x: _depth_to_space(x, 2)),
                     ((2, 8, 2, 3), (2, "CRD"), lambda x: _depth_to_space(x, 2, "CRD")),
                     ((1, 9, 2, 1), (3, "dcr"), lambda x: _depth_to_space(x, 3))],
    "SpaceToDepth": [((2, 2, 4, 6), (2,), lambda x: _space_to_depth(x, 2)),
                     ((2, 2, 4, 6), (2, "CRD"), lambda x: _space_to_depth(x, 2, "CRD")),
                     ((1, 1, 3, 6), (3,), lambda x: _space_to_depth(x, 3))],
}
ALL = [(decl, *case) for decl in RECORDS for case in CASES.get(decl.op, [])]


def _id(value):
    return value.op if hasattr(value, "op") else "" if callable(value) else str(value)


def _tensor(x, grad=False):
    return Tensor(data=x, dtype=tensor.float64, requires_grad=grad, stores_grad=grad)


def test_every_record_has_cases():
    assert set(CASES) == set(REARRANGEMENTS)


@pytest.mark.parametrize("decl,shape,args,oracle", ALL, ids=_id)
def test_function_and_operator_agree_with_numpy(decl, shape, args, oracle, rng):
    x = rng.uniform(-3, 3, shape)
    want = oracle(x)
    cls, function = getattr(autograd, decl.op), getattr(autograd, decl.autograd)
    y = function(_tensor(x), *args)
    assert isinstance(y.creator, cls) and issubclass(cls, autograd.Operator)
    assert y.shape == want.shape
    np.testing.assert_array_equal(y.to_numpy(), want)
    (y2,) = cls(*args)(_tensor(x))
    np.testing.assert_array_equal(y2.to_numpy(), want)
    np.testing.assert_array_equal(decl.numpy(x, *args), want)


@pytest.mark.parametrize("decl,shape,args,oracle", ALL, ids=_id)
def test_gradient_against_finite_differences(decl, shape, args, oracle, rng):
    x = rng.uniform(-3, 3, shape)
    function = getattr(autograd, decl.autograd)
    out = check_op(lambda t: function(t, *args), [x], oracle, fwd_rtol=0, fwd_atol=0)
    assert out["grads"][0].shape == x.shape


@pytest.mark.parametrize("decl", RECORDS, ids=_id)
def test_signatures_are_the_records(decl):
    cls, function = getattr(autograd, decl.op), getattr(autograd, decl.autograd)

    def params(fn):
        return [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]

    def declared(ps):
        return [(p.name, inspect.Parameter.empty if p.default is REQUIRED else p.default)
                for p in ps]

    assert params(cls) == declared(decl.params)
    assert params(function) == [("x", inspect.Parameter.empty),
                                *declared(decl.function_params)]
    # the constructor's check takes the parameters it is given, by the same names
    assert [name for name, _ in params(decl.init)] == [p.name for p in decl.params]
    assert function.__name__ == decl.autograd and function.__module__ == "singa.autograd"
    assert cls.__name__ == cls.__qualname__ == decl.op
    assert cls.__init__.__qualname__ == f"{decl.op}.__init__"
    # the compiled code has its text: tracebacks and inspect show the line that runs
    assert inspect.getsource(function).startswith(f"def {decl.autograd}(x")
    assert "_init(" in inspect.getsource(cls.__init__)


@pytest.mark.parametrize("decl", RECORDS, ids=_id)
def test_docstrings_are_the_records(decl):
    cls, function = getattr(autograd, decl.op), getattr(autograd, decl.autograd)
    assert function.__doc__ == decl.doc("autograd", kind="Tensor")
    assert cls.__doc__ == decl.doc("operator") == cls().__doc__ if not any(
        p.default is REQUIRED for p in decl.params) else cls.__doc__ == decl.doc("operator")
    for p in decl.function_params:
        assert f"\n{p.name} : {p.kind}" in function.__doc__
    for p in decl.params:
        assert f"\n{p.name} : {p.kind}" in cls.__doc__
    for doc in (function.__doc__, cls.__doc__):
        assert decl.grad_formula in doc and "Examples\n--------\n" in doc


@pytest.mark.parametrize("decl", RECORDS, ids=_id)
def test_docstring_examples_are_what_singa_computes(decl):
    shape, args = decl.example
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    y = getattr(autograd, decl.autograd)(_tensor(x), *args).to_numpy()
    text, want_y, want_x = decl.example_text
    assert str(y.astype(int).tolist()) == want_y and str(x.astype(int).tolist()) == want_x
    assert f"= {want_y}, for x = {want_x}" in getattr(autograd, decl.autograd).__doc__


@pytest.mark.parametrize("decl", RECORDS, ids=_id)
def test_a_rearrangement_keeps_no_tensor(decl, rng):
    # a view's gradient needs only shapes: training must not keep x or y alive
    shape, args, _ = CASES[decl.op][0]
    autograd.training = True
    op = getattr(autograd, decl.op)(*args)
    op(_tensor(rng.uniform(-1, 1, shape)))
    assert not any(isinstance(v, CTensor) for v in vars(op).values())


def test_the_operators_keep_singas_attributes():
    """What singa-onnx's exporters and users read from an Operator: the checked arguments."""
    assert autograd.Reshape((2, 0, -1)).shape == [2, 0, -1]
    assert autograd.Reshape(6).shape == [6]
    assert autograd.Flatten().axis == 1
    assert autograd.Squeeze().axis == [] and autograd.Squeeze(None).axis == []
    assert autograd.Squeeze(-1).axis == [-1] and autograd.Unsqueeze(range(2)).axis == [0, 1]
    assert autograd.Transpose().perm is None and autograd.Transpose((1, 0)).perm == [1, 0]
    op = autograd.DepthToSpace(np.int64(2), "crd")
    assert (op.b, op.mode) == (2, "CRD") and isinstance(op.b, int)
    assert autograd.Transpose(perm=[1, 0]).perm == [1, 0]  # keywords, by SINGA's names
    assert autograd.transpose(_tensor(np.zeros((2, 3))), shape=[1, 0]).shape == (3, 2)


@pytest.mark.parametrize("make,shape,message", [
    (lambda: autograd.Reshape([2, 0, 0, 3]), (2, 3), "has a 0 at a position"),
    (lambda: autograd.Reshape([5, -1]), (2, 3), "reshape"),
    (lambda: autograd.Reshape([1.5]), None, "Reshape: dimension 0"),
    (lambda: autograd.Flatten(4), (2, 3), "Flatten: axis 4 out of range"),
    (lambda: autograd.Flatten(1.0), None, "Flatten: axis"),
    (lambda: autograd.Squeeze([1]), (1, 3), "Squeeze: axis 1 of \\(1, 3\\) is not 1"),
    (lambda: autograd.Squeeze([0]), (), "a 0-d tensor has no axis"),
    (lambda: autograd.Unsqueeze([3]), (2, 3), "must lie in \\[-3, 3\\)"),
    (lambda: autograd.Unsqueeze([0, -4]), (2, 3), "name one position twice"),
    (lambda: autograd.Transpose([0, 0]), (2, 3), "not a permutation"),
    (lambda: autograd.DepthToSpace(2), (1, 3, 2, 2), "not divisible by blocksize"),
    (lambda: autograd.SpaceToDepth(2), (1, 1, 3, 2), "must be divisible by 2"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_shape_the_op_cannot_take_is_a_shape_error(make, shape, message):
    with pytest.raises(ShapeError, match=message):
        make()(_tensor(np.zeros(shape)))


def test_a_users_subclass_works_as_in_singa(rng):
    """SINGA's way of changing an op: subclass it, with a constructor of its own."""

    class ScaledFlatten(autograd.Flatten):
        """My flatten."""

        def __init__(self, scale, axis=1):
            super().__init__(axis)
            self.scale = scale

        def backward(self, dy):
            return _math.mul(super().backward(dy), self.scale)

    autograd.training = True
    x = _tensor(rng.uniform(-1, 1, (2, 3, 4)), grad=True)
    y = ScaledFlatten(3.0, axis=2)(x)[0]
    np.testing.assert_array_equal(y.to_numpy(), x.to_numpy().reshape(6, 4))
    (_, g), = list(autograd.backward(y, Tensor(data=np.ones((6, 4)), dtype=tensor.float64,
                                                   requires_grad=False)))
    np.testing.assert_array_equal(g.to_numpy(), np.full((2, 3, 4), 3.0))
    assert ScaledFlatten.__doc__ == "My flatten." and y.creator.axis == 2


@st.composite
def _drawn(draw):
    """(op, x shape, constructor arguments) of a rearrangement the op can take."""
    op = draw(st.sampled_from(sorted(REARRANGEMENTS)))
    if op in ("DepthToSpace", "SpaceToDepth"):
        b = draw(st.integers(1, 3))
        n, c, h, w = draw(st.tuples(*[st.integers(1, 2)] * 4))
        shape = (n, c * b * b, h, w) if op == "DepthToSpace" else (n, c, h * b, w * b)
        return op, shape, (b, draw(st.sampled_from(["DCR", "CRD", "dcr"])))
    shape = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4).map(tuple))
    nd = len(shape)

    def some_negative(axes, n):
        return [a - n if draw(st.booleans()) else a for a in axes]

    if op == "Transpose":
        return op, shape, (some_negative(draw(st.permutations(range(nd))), nd),)
    if op == "Flatten":
        return op, shape, (draw(st.integers(-nd, nd)),)
    if op == "Unsqueeze":
        k = draw(st.integers(1, 2))
        axes = draw(st.lists(st.integers(0, nd + k - 1), min_size=k, max_size=k, unique=True))
        return op, shape, (some_negative(axes, nd + k),)
    if op == "Squeeze":
        ones = [i for i, d in enumerate(shape) if d == 1]
        return op, shape, (draw(st.lists(st.sampled_from(ones), unique=True)) if ones else [],)
    assert op == "Reshape", f"no strategy for the record {op}"
    n = math.prod(shape)
    d = draw(st.sampled_from([k for k in range(1, n + 1) if n % k == 0]))
    return op, shape, (draw(st.sampled_from([[d, -1], [-1, d], [0, -1], [n]])),)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_drawn(), seed=st.integers(0, 2 ** 16))
def test_drawn_cases_move_each_cell_and_its_gradient_back(case, seed):
    """y takes x's cells where numpy's form puts them, and dx takes each dy cell back to the
    cell of x it came from: with x's cells labelled 0, 1, ..., numpy's form of the labels
    says where each of y's cells came from, so dx[label] = dy, exactly."""
    op, shape, args = case
    decl = REARRANGEMENTS[op]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    autograd.training = True
    t = _tensor(x, grad=True)
    y = getattr(autograd, op)(*args)(t)[0]
    np.testing.assert_array_equal(y.to_numpy(), decl.numpy(x, *args))
    dy = rng.standard_normal(y.shape)
    (_, dx), = list(autograd.backward(y, Tensor(data=dy, dtype=tensor.float64,
                                                    requires_grad=False)))
    want = np.empty(x.size)
    want[decl.numpy(np.arange(x.size).reshape(shape), *args).ravel()] = dy.ravel()
    np.testing.assert_array_equal(dx.to_numpy(), want.reshape(shape))
