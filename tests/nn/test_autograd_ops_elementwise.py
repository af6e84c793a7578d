"""Elementwise autograd operators: forward against numpy, backward against finite differences.

All inputs are float64 (the CPU backend supports it), so central differences are accurate to
~1e-9 and the tolerances below are tight.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from gradcheck import check_op
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from singa import autograd, tensor
from singa.tensor import Tensor

_erf = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> (functional wrapper, numpy reference, input range)
UNARY = {
    "relu": (autograd.relu, lambda x: np.maximum(x, 0), (-2, 2)),
    "sigmoid": (autograd.sigmoid, _sigmoid, (-3, 3)),
    "tanh": (autograd.tanh, np.tanh, (-2, 2)),
    "exp": (autograd.exp, np.exp, (-2, 2)),
    "log": (autograd.log, np.log, (0.2, 3)),
    "sqrt": (autograd.sqrt, np.sqrt, (0.2, 3)),
    "abs": (autograd.abs, np.abs, (-2, 2)),
    "square": (autograd.square, np.square, (-2, 2)),
    "cos": (autograd.cos, np.cos, (-3, 3)),
    "cosh": (autograd.cosh, np.cosh, (-2, 2)),
    "acos": (autograd.acos, np.arccos, (-0.9, 0.9)),
    "acosh": (autograd.acosh, np.arccosh, (1.2, 3)),
    "sin": (autograd.sin, np.sin, (-3, 3)),
    "sinh": (autograd.sinh, np.sinh, (-2, 2)),
    "asin": (autograd.asin, np.arcsin, (-0.9, 0.9)),
    "asinh": (autograd.asinh, np.arcsinh, (-2, 2)),
    "tan": (autograd.tan, np.tan, (-1.2, 1.2)),
    "atan": (autograd.atan, np.arctan, (-2, 2)),
    "atanh": (autograd.atanh, np.arctanh, (-0.8, 0.8)),
    "softsign": (autograd.softsign, lambda x: x / (1 + np.abs(x)), (-2, 2)),
    "softplus": (autograd.softplus, lambda x: np.log1p(np.exp(x)), (-2, 2)),
    "negative": (autograd.negative, np.negative, (-2, 2)),
    "reciprocal": (autograd.reciprocal, np.reciprocal, (0.3, 3)),
    "identity": (autograd.identity, lambda x: x.copy(), (-2, 2)),
    "erf": (autograd.erf, _erf, (-1.5, 1.5)),
    "elu": (lambda x: autograd.elu(x, 0.7),
            lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)), (-2, 2)),
    "selu": (autograd.selu,
             lambda x: 1.0507 * np.where(x > 0, x, 1.67326 * (np.exp(x) - 1)), (-2, 2)),
    "leakyrelu": (lambda x: autograd.leakyrelu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x),
                  (-2, 2)),
    "hardsigmoid": (lambda x: autograd.hardsigmoid(x, 0.3, 0.4),
                    lambda x: np.clip(0.3 * x + 0.4, 0, 1), (-4, 4)),
    "clip": (lambda x: autograd.clip(x, -0.5, 0.8), lambda x: np.clip(x, -0.5, 0.8), (-2, 2)),
    "clip_low_only": (lambda x: autograd.clip(x, -0.5), lambda x: np.maximum(x, -0.5),
                      (-2, 2)),
}

# piecewise-constant functions: zero gradient everywhere they are differentiable
ZERO_GRAD = {
    "sign": (autograd.sign, np.sign),
    "ceil": (autograd.ceil, np.ceil),
    "floor": (autograd.floor, np.floor),
    "round": (autograd.round, lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)),
    "rounde": (autograd.rounde, np.rint),
}

_KINKS = {"relu": [0.0], "abs": [0.0], "elu": [0.0], "selu": [0.0], "leakyrelu": [0.0],
          "hardsigmoid": [-0.4 / 0.3, 0.6 / 0.3], "clip": [-0.5, 0.8], "clip_low_only": [-0.5]}


def _away_from(x, points, gap=1e-3):
    """Nudge values that sit within ``gap`` of a kink, where finite differences are invalid."""
    for p in points:
        near = np.abs(x - p) < gap
        x = np.where(near, p + 2 * gap, x)
    return x


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 1, 3), (1,)])
def test_unary(name, shape, rng):
    fn, ref, (lo, hi) = UNARY[name]
    x = _away_from(rng.uniform(lo, hi, shape), _KINKS.get(name, []))
    check_op(fn, [x], ref, fwd_rtol=1e-6)


@pytest.mark.parametrize("name", sorted(ZERO_GRAD))
def test_piecewise_constant_has_zero_gradient(name, rng):
    fn, ref = ZERO_GRAD[name]
    x = rng.uniform(-3, 3, (4, 3))
    x = np.where(np.abs(x - np.round(x)) < 0.05, x + 0.2, x)  # stay off the jumps
    out = check_op(fn, [x], ref, eps=1e-4)
    np.testing.assert_array_equal(out["grads"][0], 0.0)
    ties = np.array([2.5, -2.5, 0.5, -0.5, 1.5])  # round: away from zero; rounde: to even
    check_op(fn, [ties], ref, wrt=[])


def test_unary_ops_return_tuples_and_record_creator():
    x = Tensor(data=np.array([[-1.0, 2.0]]), dtype=tensor.float64)
    op = autograd.ReLU()
    ys = op(x)
    assert isinstance(ys, tuple) and len(ys) == 1
    assert ys[0].creator is op
    assert op.src[0][0] is x.creator
    np.testing.assert_array_equal(ys[0].to_numpy(), [[0.0, 2.0]])


def test_erf_gradient_uses_x_not_dy():
    """SINGA's Erf backward used dy in place of x; the derivative is 2/sqrt(pi) exp(-x^2)."""
    x = np.array([0.0, 0.5, -1.0, 2.0])
    out = check_op(autograd.erf, [x], _erf)
    # with dy = 1 the gradient is exactly the derivative
    autograd.training = True
    t = Tensor(data=x, dtype=tensor.float64, stores_grad=True)
    y = autograd.erf(t)
    dy = Tensor(data=np.ones(4), dtype=tensor.float64, requires_grad=False)
    (p, g), = list(autograd.backward(y, dy))
    np.testing.assert_allclose(g.to_numpy(), 2 / np.sqrt(np.pi) * np.exp(-x ** 2), rtol=1e-12)
    assert out["grads"][0].shape == x.shape


# ---------------------------------------------------------------- binary, with broadcasting
BINARY = {
    "add": (autograd.add, np.add),
    "sub": (autograd.sub, np.subtract),
    "mul": (autograd.mul, np.multiply),
    "div": (autograd.div, np.divide),
    "pow": (autograd.pow, np.power),
}

SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
               ((4,), (2, 3, 4)), ((1,), (2, 2)), ((2, 1, 3), (2, 4, 1))]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("sa,sb", SHAPE_PAIRS)
def test_binary_broadcast(name, sa, sb, rng):
    fn, ref = BINARY[name]
    a = rng.uniform(0.5, 2.0, sa) if name == "pow" else rng.uniform(-2, 2, sa)
    b = rng.uniform(-2, 2, sb)
    if name == "div":
        b = np.where(np.abs(b) < 0.3, 0.7, b)
    check_op(fn, [a, b], ref, fwd_rtol=1e-12)


@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_binary_broadcast_generated(data):
    """Random broadcastable shape pairs (hypothesis) for the arithmetic ops."""
    shapes = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                         min_side=1, max_side=3))
    sa, sb = shapes.input_shapes
    name = data.draw(st.sampled_from(sorted(BINARY)))
    seed = data.draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.0, sa)
    b = rng.uniform(0.5, 2.0, sb)
    fn, ref = BINARY[name]
    check_op(fn, [np.atleast_1d(a), np.atleast_1d(b)], ref, fwd_rtol=1e-12, rtol=1e-5,
             atol=1e-6)


def test_prelu_broadcast_slope(rng):
    x = rng.uniform(-2, 2, (2, 3, 4))
    x = np.where(np.abs(x) < 1e-3, 0.1, x)
    slope = rng.uniform(0.1, 0.5, (3, 1))

    def ref(x, s):
        return np.where(x > 0, x, x * s)

    check_op(autograd.prelu, [x, slope], ref)


def test_mul_int_inputs_runs_in_float_and_casts_back():
    a = Tensor(data=np.array([1, 2, 3], np.int32), dtype=tensor.int32, requires_grad=False)
    b = Tensor(data=np.array([4, 5, 6], np.int32), dtype=tensor.int32, requires_grad=False)
    y = autograd.mul(a, b)
    assert y.dtype == tensor.int32
    np.testing.assert_array_equal(y.to_numpy(), [4, 10, 18])


# ---------------------------------------------------------------- comparisons and logic
@pytest.mark.parametrize("name,ref", [
    ("less", np.less), ("greater", np.greater), ("equal", np.equal),
    ("_and", np.logical_and), ("_or", np.logical_or), ("_xor", np.logical_xor)])
def test_comparison_and_logic_forward(name, ref, rng):
    a = np.round(rng.uniform(-2, 2, (3, 4)))
    b = np.round(rng.uniform(-2, 2, (4,)))
    y = getattr(autograd, name)(Tensor(data=a, dtype=tensor.float64),
                                Tensor(data=b, dtype=tensor.float64))
    np.testing.assert_array_equal(y.to_numpy(), ref(a, b).astype(np.float64))


def test_not_forward():
    x = np.array([0.0, 1.0, -2.0, 0.0])
    y = autograd._not(Tensor(data=x, dtype=tensor.float64))
    np.testing.assert_array_equal(y.to_numpy(), [1.0, 0.0, 0.0, 1.0])


def test_comparison_blocks_gradient_but_param_still_yielded_once():
    """A parameter feeding both a comparison and a differentiable path gets one gradient."""
    autograd.training = True
    w = Tensor(data=np.array([1.0, -2.0, 3.0]), dtype=tensor.float64, stores_grad=True)
    zero = Tensor(data=np.zeros(3), dtype=tensor.float64, requires_grad=False)
    mask = autograd.greater(w, zero)
    loss = autograd.reduce_sum(autograd.mul(autograd.mul(w, w), mask), None, 0)
    grads = list(autograd.backward(loss))
    assert len(grads) == 1 and grads[0][0] is w
    np.testing.assert_allclose(grads[0][1].to_numpy(), [2.0, 0.0, 6.0])


# ---------------------------------------------------------------- n-ary
@pytest.mark.parametrize("name,ref", [
    ("sum", lambda *xs: np.sum(xs, axis=0)), ("mean", lambda *xs: np.mean(xs, axis=0)),
    ("max", lambda *xs: np.max(xs, axis=0)), ("min", lambda *xs: np.min(xs, axis=0))])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_nary(name, ref, n, rng):
    xs = [rng.uniform(-2, 2, (2, 3)) for _ in range(n)]
    check_op(getattr(autograd, name), xs, ref)


def test_nary_backward_through_the_engine_with_several_inputs():
    """SINGA's Sum/Mean returned a list from backward, which only worked for one input."""
    autograd.training = True
    xs = [Tensor(data=np.full((2,), float(i + 1)), dtype=tensor.float64, stores_grad=True)
          for i in range(3)]
    y = autograd.reduce_sum(autograd.mean(*xs), None, 0)
    grads = {id(p): g.to_numpy() for p, g in autograd.backward(y)}
    for x in xs:
        np.testing.assert_allclose(grads[id(x)], [1 / 3, 1 / 3])


# ---------------------------------------------------------------- cast
def test_cast_roundtrip_gradient(rng):
    x = rng.uniform(-2, 2, (3, 2))

    def fn(t):
        return autograd.mul(autograd.cast(autograd.cast(t, tensor.float32), tensor.float64), t)

    # float32 rounding is a step function at the 1e-7 scale: difference over a wider step
    check_op(fn, [x], lambda x: x.astype(np.float32).astype(np.float64) * x,
             eps=1e-3, rtol=1e-4, atol=1e-4)


def test_cast_to_int_forward_and_no_gradient():
    autograd.training = True
    x = Tensor(data=np.array([1.7, -2.2, 3.0]), dtype=tensor.float64, stores_grad=True)
    y = autograd.cast(x, tensor.int32)
    assert y.dtype == tensor.int32
    np.testing.assert_array_equal(y.to_numpy(), [1, -2, 3])
