"""Neural-network autograd operators: convolution, pooling, batch norm, losses, dropout.

Oracles: naive numpy loops written here (independent of the op table's references) for the
forward values, central differences in float64 for the gradients.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_op, to_tensor
from hypothesis import given, settings
from hypothesis import strategies as st
from singa import autograd, tensor
from singa import singa_wrap as singa
from singa.errors import DtypeMismatchError, ShapeError
from singa.tensor import Tensor


def T(a, grad=False, dtype=None):
    a = np.asarray(a)
    if dtype is not None:
        a = a.astype(dtype)
    return to_tensor(a, grad=grad)


# ---------------------------------------------------------------- convolution
def conv_ref(x, W, b=None, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), group=1):
    """Direct convolution (cross-correlation), one output cell at a time."""
    n, c, h, w = x.shape
    o, cg, kh, kw = W.shape
    sh, sw = stride
    dh, dw = dilation
    t, bt, l, r = pads
    xp = np.pad(x, ((0, 0), (0, 0), (t, bt), (l, r)))
    ho = (h + t + bt - dh * (kh - 1) - 1) // sh + 1
    wo = (w + l + r - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, o, ho, wo))
    og = o // group
    for oc in range(o):
        g = oc // og
        for p in range(ho):
            for q in range(wo):
                patch = xp[:, g * cg:(g + 1) * cg, p * sh:p * sh + dh * (kh - 1) + 1:dh,
                           q * sw:q * sw + dw * (kw - 1) + 1:dw]
                y[:, oc, p, q] = (patch * W[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y


CONV_CASES = [
    # (x shape, out channels, kernel, stride, padding (ph, pw), odd (t, b, l, r), dilation, group)
    ((2, 3, 5, 5), 2, (3, 3), (1, 1), (0, 0), (0, 0, 0, 0), (1, 1), 1),
    ((1, 2, 6, 5), 3, (3, 2), (2, 1), (1, 0), (0, 0, 0, 0), (1, 1), 1),
    ((2, 2, 5, 6), 2, (2, 2), (1, 2), (1, 1), (0, 1, 1, 0), (1, 1), 1),
    ((1, 4, 5, 5), 4, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),
    ((1, 4, 5, 5), 4, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 4),  # depthwise
    # depthwise 5x5, stride 2, two outputs per channel; 3x3 dilated on a 12x11 output
    ((2, 3, 9, 8), 6, (5, 5), (2, 2), (2, 2), (0, 1, 1, 0), (1, 1), 3),
    ((1, 2, 12, 11), 2, (3, 3), (1, 1), (2, 2), (0, 0, 0, 0), (2, 2), 2),
    ((1, 2, 7, 6), 2, (3, 2), (1, 1), (2, 1), (0, 0, 0, 0), (2, 2), 1),
    ((2, 1, 4, 4), 1, (1, 1), (2, 2), (0, 0), (1, 0, 0, 1), (1, 1), 1),
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d(case, bias, rng):
    xs, o, k, stride, padding, odd, dil, group = case
    x = rng.standard_normal(xs)
    W = rng.standard_normal((o, xs[1] // group) + k)
    b = rng.standard_normal((o,))
    handle = singa.ConvHandle(T(x).data, k, stride, padding, xs[1], o, bias, group,
                              dilation=dil)
    pads = (padding[0] + odd[0], padding[0] + odd[1], padding[1] + odd[2], padding[1] + odd[3])

    def ref(x, W, b=None):
        return conv_ref(x, W, b, stride, pads, dil, group)

    if bias:
        check_op(lambda x, W, b: autograd.conv2d(handle, x, W, b, odd), [x, W, b], ref)
    else:
        check_op(lambda x, W: autograd.conv2d(handle, x, W, None, odd), [x, W], ref)


def test_conv2d_operator_backward_returns_ctensors(rng):
    """SINGA's contract: ``y.creator.backward(dy_ctensor)`` returns (dx, dW, db) CTensors."""
    autograd.training = True
    conv = autograd.Conv2d(3, 1, 2)  # (in_channels, out_channels, kernel)
    x = Tensor(shape=(2, 3, 3, 3))
    x.gaussian(0.0, 1.0)
    y = conv(x)
    dy = singa.Tensor([2, 1, 2, 2])
    singa.Gaussian(0.0, 1.0, dy)
    dx, dW, db = y.creator.backward(dy)
    assert isinstance(dx, singa.Tensor)
    assert (y.shape, dx.shape(), dW.shape(), db.shape()) == (
        (2, 1, 2, 2), (2, 3, 3, 3), (1, 3, 2, 2), (1,))


def test_conv2d_dtype_mismatch_names_both_dtypes():
    x = T(np.ones((1, 1, 3, 3)), dtype=np.float64)
    W = T(np.ones((1, 1, 2, 2)), dtype=np.float32)
    handle = singa.ConvHandle(x.data, (2, 2), (1, 1), (0, 0), 1, 1, False)
    with pytest.raises(DtypeMismatchError, match="float64.*float32|float32.*float64"):
        autograd.conv2d(handle, x, W)


# ---------------------------------------------------------------- pooling
def pool_ref(x, kernel, stride, pads, is_max):
    """Max pooling ignores padding; average pooling counts padded cells as zeros (SINGA/cuDNN
    include-padding mode, divisor kh * kw)."""
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = stride
    t, b, l, r = pads
    fill = -np.inf if is_max else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=fill)
    ho = (h + t + b - kh) // sh + 1
    wo = (w + l + r - kw) // sw + 1
    y = np.empty((n, c, ho, wo))
    for p in range(ho):
        for q in range(wo):
            win = xp[:, :, p * sh:p * sh + kh, q * sw:q * sw + kw]
            y[:, :, p, q] = win.max(axis=(2, 3)) if is_max else win.sum(axis=(2, 3)) / (kh * kw)
    return y


POOL_CASES = [
    # (x shape, kernel, stride, padding (ph, pw), odd (t, b, l, r))
    ((2, 2, 4, 4), (2, 2), (2, 2), (0, 0), (0, 0, 0, 0)),
    ((1, 3, 5, 5), (3, 3), (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 2, 5, 6), (3, 2), (2, 1), (1, 0), (0, 0, 0, 0)),
    ((1, 2, 5, 5), (2, 2), (2, 2), (0, 0), (0, 1, 0, 1)),  # SAME_UPPER-like extra cells
    ((1, 1, 5, 4), (2, 3), (1, 2), (0, 1), (1, 0, 0, 0)),  # SAME_LOWER-like
    ((2, 1, 1, 7), (1, 3), (1, 2), (0, 1), (0, 0, 0, 0)),  # 1-D pooling as (1, k)
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("is_max", [True, False])
def test_pooling2d(case, is_max, rng):
    xs, k, s, padding, odd = case
    # distinct values keep the arg-max unique, so max pooling is differentiable there
    x = rng.permutation(np.prod(xs)).reshape(xs) * 0.1 + rng.uniform(0, 0.01, xs)
    handle = singa.PoolingHandle(T(x).data, k, s, padding, is_max)
    pads = (padding[0] + odd[0], padding[0] + odd[1], padding[1] + odd[2], padding[1] + odd[3])
    check_op(lambda t: autograd.pooling_2d(handle, t, odd), [x],
             lambda x: pool_ref(x, k, s, pads, is_max), eps=1e-5)


def test_max_pooling_gradient_goes_to_the_maximum():
    autograd.training = True
    x = Tensor(data=np.array([[[[1.0, 5.0], [3.0, 2.0]]]]), dtype=tensor.float64,
               stores_grad=True)
    handle = singa.PoolingHandle(x.data, (2, 2), (2, 2), (0, 0), True)
    y = autograd.pooling_2d(handle, x)
    (_, g), = list(autograd.backward(y))
    np.testing.assert_array_equal(g.to_numpy(), [[[[0.0, 1.0], [0.0, 0.0]]]])


# ---------------------------------------------------------------- batch normalisation
def _bn_axes(x):
    return (0,) + tuple(range(2, x.ndim))


def _bcast(v, x):
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


def bn_train_ref(x, scale, bias, eps=1e-5):
    ax = _bn_axes(x)
    mean, var = x.mean(axis=ax), x.var(axis=ax)
    return (x - _bcast(mean, x)) / np.sqrt(_bcast(var, x) + eps) * _bcast(scale, x) \
        + _bcast(bias, x)


@pytest.mark.parametrize("shape", [(3, 2, 2, 3), (4, 3), (2, 1, 3, 1)])
def test_batchnorm_training_forward_backward_and_running_stats(shape, rng):
    x = rng.standard_normal(shape) * 2 + 1
    c = shape[1]
    scale, bias = rng.uniform(0.5, 2, c), rng.standard_normal(c)
    rm0, rv0 = rng.standard_normal(c), rng.uniform(0.5, 2, c)
    momentum = 0.8
    rm, rv = T(rm0), T(rv0)
    handle = singa.BatchNormHandle(momentum, T(x).data)

    def fn(x, s, b):
        return autograd.batchnorm_2d(handle, x, s, b, rm, rv)

    check_op(fn, [x, scale, bias], bn_train_ref, rtol=1e-5, atol=1e-6)
    # the running statistics were updated once by the checked forward pass (further passes
    # of the finite differences ran on other tensors): running = m * running + (1 - m) * batch
    rm_t, rv_t = T(rm0), T(rv0)
    autograd.training = True
    autograd.batchnorm_2d(handle, T(x), T(scale), T(bias), rm_t, rv_t)
    m = x.size // c
    ax = _bn_axes(x)
    np.testing.assert_allclose(rm_t.to_numpy(), momentum * rm0 + (1 - momentum) * x.mean(ax))
    np.testing.assert_allclose(rv_t.to_numpy(),
                               momentum * rv0 + (1 - momentum) * x.var(ax) * m / (m - 1))


@pytest.mark.parametrize("shape", [(2, 3, 2, 2), (5, 2)])
def test_batchnorm_inference_uses_running_stats(shape, rng):
    x = rng.standard_normal(shape)
    c = shape[1]
    scale, bias = rng.uniform(0.5, 2, c), rng.standard_normal(c)
    rm0, rv0 = rng.standard_normal(c), rng.uniform(0.5, 2, c)
    rm, rv = T(rm0), T(rv0)
    handle = singa.BatchNormHandle(0.9, T(x).data)
    autograd.training = False
    y = autograd.batchnorm_2d(handle, T(x), T(scale), T(bias), rm, rv).to_numpy()
    want = (x - _bcast(rm0, x)) / np.sqrt(_bcast(rv0, x) + 1e-5) * _bcast(scale, x) \
        + _bcast(bias, x)
    np.testing.assert_allclose(y, want, rtol=1e-12)
    np.testing.assert_array_equal(rm.to_numpy(), rm0)  # untouched in inference
    np.testing.assert_array_equal(rv.to_numpy(), rv0)


# ---------------------------------------------------------------- losses
def _log_softmax(x):
    z = x - x.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


@pytest.mark.parametrize("target", ["ids", "onehot", "soft", "onehot_int", "ids_column"])
def test_softmax_cross_entropy(target, rng):
    n, c = 4, 3
    x = rng.standard_normal((n, c)) * 2
    ids = rng.integers(0, c, n).astype(np.int32)
    dense = np.eye(c)[ids]
    soft = np.exp(rng.standard_normal((n, c)))
    soft /= soft.sum(axis=1, keepdims=True)
    t_np = {"ids": ids, "onehot": dense, "soft": soft, "onehot_int": dense.astype(np.int32),
            "ids_column": ids.reshape(n, 1)}[target]
    t = T(t_np)
    want_t = soft if target == "soft" else dense

    def ref(x):
        return np.array([-(want_t * _log_softmax(x)).sum() / n])

    out = check_op(lambda x: autograd.softmax_cross_entropy(x, t), [x], ref)
    assert out["y"][0].shape == (1,)


def test_softmax_cross_entropy_operator_backward_default_dy():
    """``loss.creator.backward()`` without dy gives (softmax(x) - t) / N."""
    autograd.training = True
    x = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    t = np.array([1, 2], np.int32)
    loss = autograd.softmax_cross_entropy(T(x), T(t))
    dx = loss.creator.backward()
    p = np.exp(_log_softmax(x))
    np.testing.assert_allclose(tensor.from_raw_tensor(dx).to_numpy(),
                               (p - np.eye(3)[t]) / 2, rtol=1e-12)


def test_softmax_cross_entropy_rejects_bad_targets():
    x = T(np.zeros((2, 3)))
    with pytest.raises(ShapeError):
        autograd.softmax_cross_entropy(x, T(np.zeros((3,), np.int32)))
    with pytest.raises(ShapeError):
        autograd.softmax_cross_entropy(x, T(np.zeros((2, 4))))


@pytest.mark.parametrize("target", ["dense", "ids"])
def test_cross_entropy(target, rng):
    n, c = 3, 4
    p = rng.uniform(0.1, 1.0, (n, c))
    ids = rng.integers(0, c, n).astype(np.int32)
    dense = np.eye(c)[ids]
    t = T(dense if target == "dense" else ids)
    check_op(lambda x: autograd.cross_entropy(x, t), [p],
             lambda p: np.array([-(dense * np.log(p)).sum() / n]))


def test_binary_cross_entropy(rng):
    x = rng.uniform(0.05, 0.95, (3, 4))
    t_np = (rng.uniform(size=(3, 4)) > 0.5).astype(np.float64)
    t = T(t_np)
    e = 1e-4

    def ref(x):
        return np.array([-(t_np * np.log(x + e) + (1 - t_np) * np.log(1 - x + e)).sum() / 3])

    check_op(lambda x: autograd.binary_cross_entropy(x, t), [x], ref)


def test_mse_loss(rng):
    x, t = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))

    def ref(x, t):
        return np.array([((x - t) ** 2).sum() / x.size])

    # SINGA's mse_loss holds the target in the operator: only x gets a gradient
    check_op(autograd.mse_loss, [x, t], ref, wrt=[0])
    # the two-input operator form differentiates both
    check_op(lambda x, t: autograd.MeanSquareError()(x, t)[0], [x, t], ref)


def test_mse_loss_matches_singa_value():
    x = np.array([4.3, 5.4, 3.3, 3.6, 5.7, 6.0], np.float32).reshape(3, 2)
    t = np.array([4.4, 5.3, 3.2, 3.7, 5.4, 6.3], np.float32).reshape(3, 2)
    loss = autograd.mse_loss(tensor.from_numpy(x), tensor.from_numpy(t))
    assert tensor.to_numpy(loss)[0] == pytest.approx(0.0366666, abs=1e-5)


def test_ranking_loss(rng):
    pos, neg = rng.standard_normal((5, 1)), rng.standard_normal((5, 1))
    z = 0.3 - pos + neg
    neg = np.where(np.abs(z) < 1e-3, neg + 0.01, neg)  # off the hinge

    def ref(p, n):
        return np.array([np.maximum(0, 0.3 - p + n).mean()])

    check_op(lambda p, n: autograd.ranking_loss(p, n, 0.3), [pos, neg], ref)


# ---------------------------------------------------------------- dropout
@pytest.mark.parametrize("ratio", [0.2, 0.5, 0.8])
def test_dropout_training_statistics_and_gradient(ratio):
    """Kept values are scaled by 1 / (1 - ratio) (SINGA scaled by 1 - ratio), so E[y] = x."""
    autograd.training = True
    n = 40000
    x = Tensor(data=np.full((n,), 2.0), dtype=tensor.float64, stores_grad=True)
    y = autograd.dropout(x, ratio=ratio)
    yv = y.to_numpy()
    kept = yv != 0
    np.testing.assert_allclose(yv[kept], 2.0 / (1 - ratio))
    # fraction dropped within 5 standard deviations of the binomial proportion
    sd = np.sqrt(ratio * (1 - ratio) / n)
    assert abs((1 - kept.mean()) - ratio) < 5 * sd
    assert abs(yv.mean() - 2.0) < 5 * 2.0 * np.sqrt(ratio / (1 - ratio) / n)
    dy = Tensor(data=np.ones(n), dtype=tensor.float64, requires_grad=False)
    (_, g), = list(autograd.backward(y, dy))
    np.testing.assert_array_equal(g.to_numpy(), np.where(kept, 1 / (1 - ratio), 0.0))


def test_dropout_is_identity_in_eval():
    autograd.training = False
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(autograd.dropout(T(x), ratio=0.7).to_numpy(), x)


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_conv2d_generated_geometry(data):
    """Random kernel/stride/padding/dilation/group combinations (hypothesis)."""
    group = data.draw(st.sampled_from([1, 2]))
    cg, og = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    sh, sw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    dh, dw = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    ph, pw = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    odd = tuple(data.draw(st.integers(0, 1)) for _ in range(4))
    h = data.draw(st.integers(max(1, dh * (kh - 1) + 1 - 2 * ph - odd[0] - odd[1]), 6))
    w = data.draw(st.integers(max(1, dw * (kw - 1) + 1 - 2 * pw - odd[2] - odd[3]), 6))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = rng.standard_normal((1, cg * group, h, w))
    W = rng.standard_normal((og * group, cg, kh, kw))
    b = rng.standard_normal((og * group,))
    # SINGA builds the handle for the input grown by the odd (asymmetric) padding
    xp = singa.Tensor([1, cg * group, h + odd[0] + odd[1], w + odd[2] + odd[3]])
    handle = singa.ConvHandle(xp, (kh, kw), (sh, sw), (ph, pw), cg * group, og * group,
                              True, group, dilation=(dh, dw))
    pads = (ph + odd[0], ph + odd[1], pw + odd[2], pw + odd[3])
    check_op(lambda x, W, b: autograd.conv2d(handle, x, W, b, odd), [x, W, b],
             lambda x, W, b: conv_ref(x, W, b, (sh, sw), pads, (dh, dw), group))


@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_pooling2d_generated_geometry(data):
    kh, kw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    sh, sw = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    ph, pw = data.draw(st.integers(0, kh - 1)), data.draw(st.integers(0, kw - 1))
    h, w = data.draw(st.integers(kh, 6)), data.draw(st.integers(kw, 6))
    is_max = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    shape = (1, 2, h, w)
    x = rng.permutation(np.prod(shape)).reshape(shape) * 0.1
    handle = singa.PoolingHandle(T(x).data, (kh, kw), (sh, sw), (ph, pw), is_max)
    check_op(lambda t: autograd.pooling_2d(handle, t), [x],
             lambda x: pool_ref(x, (kh, kw), (sh, sw), (ph, ph, pw, pw), is_max), eps=1e-5)
