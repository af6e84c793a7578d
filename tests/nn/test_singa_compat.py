"""SINGA user code that must run unchanged (issue 16), written the way SINGA 5.x code is.

Each test follows the calling convention of Apache SINGA's own ``test/python`` suite
(``y.creator.backward(dy.data)`` return forms, ``tensor.*`` return types, the exceptions its
tests expect) and checks the values against numpy or finite differences. Where this project
deliberately differs from SINGA the test pins our behaviour and names the entry in
``docs/compatibility.md``.
"""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check_op, check_param_grads
from singa import autograd, layer, tensor
from singa.errors import ShapeError
from singa.tensor import Tensor


@pytest.fixture(autouse=True)
def _training():
    autograd.training = True  # SINGA's test_operation.py sets it at import


def _np(ct) -> np.ndarray:
    """A CTensor (what ``creator.backward`` returns) as numpy, the way SINGA's tests read it."""
    return tensor.to_numpy(tensor.from_raw_tensor(ct))


# ---------------------------------------------------------------- 1. tensor.sum
def test_tensor_sum_without_axis_is_a_tensor(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = tensor.from_numpy(a)
    s = tensor.sum(t)
    assert isinstance(s, Tensor) and s.shape == (1, 1)  # SINGA: tensordot(t, ones) -> (1, 1)
    np.testing.assert_allclose(tensor.to_numpy(s), [[a.sum()]], rtol=1e-5)
    assert tensor.to_numpy(tensor.sum(t))[0][0] == pytest.approx(a.sum(), rel=1e-5)
    # a sum over an axis drops that axis; a sum over every axis is again (1, 1)
    np.testing.assert_allclose(tensor.to_numpy(tensor.sum(t, 1)), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(tensor.sum(t, -2)), a.sum(0), rtol=1e-5)
    assert tensor.sum(t, (0, 1)).shape == (1, 1)
    assert tensor.sum(tensor.from_numpy(a[0]), 0).shape == (1, 1)
    out = Tensor((1, 1))
    assert tensor.sum(t, out=out) is out
    np.testing.assert_allclose(tensor.to_numpy(out), [[a.sum()]], rtol=1e-5)
    with pytest.raises(ShapeError, match="out has shape"):
        tensor.sum(t, 0, Tensor((3,)))


# ---------------------------------------------------------------- 2. mse_loss
def test_mse_loss_creator_backward_returns_dx():
    """SINGA's _MeanSquareError_helper: ``dx = loss.creator.backward()`` is one CTensor."""
    X = np.array([4.3, 5.4, 3.3, 3.6, 5.7, 6.0]).reshape(3, 2).astype(np.float32)
    T = np.array([4.4, 5.3, 3.2, 3.7, 5.4, 6.3]).reshape(3, 2).astype(np.float32)
    loss = autograd.mse_loss(tensor.from_numpy(X), tensor.from_numpy(T))
    dx = loss.creator.backward()
    assert tensor.to_numpy(loss)[0] == pytest.approx(0.0366666, abs=1e-5)
    assert dx.shape() == (3, 2)
    np.testing.assert_allclose(_np(dx), 2 * (X - T) / X.size, rtol=1e-5)
    # SINGA's own spelling of the same operator
    loss2 = autograd.MeanSquareError(tensor.from_numpy(T))(tensor.from_numpy(X))[0]
    np.testing.assert_allclose(tensor.to_numpy(loss2), tensor.to_numpy(loss))


def test_mse_loss_value_and_gradient_through_backward(rng):
    """SINGA's test_mse_loss_value (smaller), plus the engine: only x gets a gradient."""
    y = rng.random((10, 12)).astype(np.float32)
    tar = rng.random((10, 12)).astype(np.float32)
    sy = tensor.from_numpy(y)
    sy.stores_grad = True
    starget = tensor.from_numpy(tar)
    starget.stores_grad = True
    sloss = autograd.mse_loss(sy, starget)
    np.testing.assert_allclose(tensor.to_numpy(sloss), [np.mean(np.square(tar - y))], rtol=1e-5)
    np.testing.assert_allclose(_np(sloss.creator.backward()), -2 * (tar - y) / tar.size,
                               rtol=1e-5, atol=1e-8)
    grads = autograd.gradients(sloss)
    assert id(starget) not in grads  # the target is an attribute of the operator, as in SINGA
    np.testing.assert_allclose(grads[id(sy)].to_numpy(), 2 * (y - tar) / y.size, rtol=1e-5,
                               atol=1e-8)


# ---------------------------------------------------------------- 3. min / max
@pytest.mark.parametrize("fn", [autograd.min, autograd.max])
def test_min_max_one_input_backward_returns_the_gradient(fn):
    x0 = tensor.from_numpy(np.array([3, 2, 1], np.float32))
    dy = tensor.from_numpy(np.array([1.0, 2.0, -1.0], np.float32))
    result = fn(x0)
    dx0 = result.creator.backward(dy.data)  # SINGA: one CTensor, not a 1-tuple
    assert not isinstance(dx0, tuple)
    np.testing.assert_array_equal(tensor.to_numpy(result), [3, 2, 1])
    np.testing.assert_array_equal(_np(dx0), [1.0, 2.0, -1.0])


def test_min_two_and_three_inputs_as_singa_tests():
    X0 = np.array([0.1, 0.2, 2.0, 0.0, 0.1, 0.2]).reshape(3, 2).astype(np.float32)
    X1 = np.array([1.0, 2.0, 1.0, 2.1, 0.0, 2.0]).reshape(3, 2).astype(np.float32)
    dy = tensor.from_numpy(np.ones((3, 2), np.float32))
    result = autograd.min(tensor.from_numpy(X0), tensor.from_numpy(X1))
    dx0, dx1 = result.creator.backward(dy.data)
    np.testing.assert_array_equal(tensor.to_numpy(result), np.minimum(X0, X1))
    np.testing.assert_array_equal(_np(dx0), (X0 < X1).astype(np.float32))
    np.testing.assert_array_equal(_np(dx1), (X0 > X1).astype(np.float32))
    xs = [np.array(v, np.float32) for v in ([3, 2, 1], [1, 4, 4], [2, 5, 0])]
    result = autograd.min(*[tensor.from_numpy(x) for x in xs])
    dxs = result.creator.backward(tensor.from_numpy(np.ones(3, np.float32)).data)
    np.testing.assert_array_equal(tensor.to_numpy(result), [1, 2, 0])
    for dx, want in zip(dxs, ([0, 1, 0], [1, 0, 0], [0, 0, 1])):
        np.testing.assert_array_equal(_np(dx), want)


@pytest.mark.parametrize("name,pick", [("max", np.maximum), ("min", np.minimum)])
def test_min_max_ties_give_the_gradient_to_the_first_input(name, pick):
    """SINGA's masks (a >= b for max, a <= b for min) send a tie's gradient to the earlier
    input only; dy is chained (SINGA returned the bare masks; docs/compatibility.md)."""
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([1.0, 5.0, 3.0, 0.0], np.float32)
    c = np.array([1.0, 2.0, 0.0, 4.0], np.float32)
    dy = np.array([0.5, -2.0, 3.0, 7.0], np.float32)
    y = getattr(autograd, name)(*[tensor.from_numpy(v) for v in (a, b, c)])
    got = [_np(d) for d in y.creator.backward(tensor.from_numpy(dy).data)]
    want_y = pick(pick(a, b), c)
    taken = np.zeros(4, bool)
    for v, g in zip((a, b, c), got):
        first = (v == want_y) & ~taken
        taken |= first
        np.testing.assert_array_equal(g, np.where(first, dy, 0))
    np.testing.assert_array_equal(sum(got), dy)  # each element's gradient counted once


# ---------------------------------------------------------------- 4. embedding
def test_embedding_layer_creator_backward_returns_dx_and_dw():
    """SINGA's embedding_helper: ``dx, dW = y.creator.backward(dy.data)``."""
    emb = layer.Embedding(10, 3)
    X = np.array([[0, 1, 2, 3], [9, 8, 7, 6]])
    x = tensor.from_numpy(X)
    dy = tensor.Tensor(shape=(2, 4, 3))
    dy.gaussian(0.0, 1.0)
    y = emb(x)
    dx, dW = y.creator.backward(dy.data)
    assert y.shape == (2, 4, 3)
    assert dx.shape() == (2, 4) and dW.shape() == (10, 3)
    np.testing.assert_array_equal(_np(dx), np.zeros((2, 4)))  # ids have no derivative
    want = np.zeros((10, 3), np.float32)
    np.add.at(want, X, tensor.to_numpy(dy))
    np.testing.assert_allclose(_np(dW), want, rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(y), tensor.to_numpy(emb.W)[X], rtol=1e-6)


def test_embedding_function_repeated_ids_and_engine(rng):
    w = rng.standard_normal((4, 3))
    ids = np.array([[1, 1], [3, 0]], np.int32)
    y = autograd.embedding(tensor.from_numpy(ids), Tensor(data=w, dtype=tensor.float64))
    dx, dw = y.creator.backward(Tensor(data=np.ones((2, 2, 3))).data)
    assert dx.shape() == ids.shape
    np.testing.assert_array_equal(_np(dw)[1], [2.0, 2.0, 2.0])  # repeated ids accumulate
    # through autograd.backward the ids are not differentiated and W's gradient is exact
    check_op(lambda i, w: autograd.embedding(i, w), [ids, w], lambda i, w: w[i])


# ---------------------------------------------------------------- 5. Shape
def test_shape_creator_backward_returns_the_shape_list():
    """SINGA's _shape_helper subtracts the expected list from what backward returns."""
    x = tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2))
    dy = tensor.from_numpy(np.ones((3, 2), np.float32))
    result = autograd.shape(x)
    dx = result.creator.backward(dy.data)
    np.testing.assert_array_almost_equal(tensor.to_numpy(result), [3, 2])
    np.testing.assert_array_almost_equal(dx, [3, 2], decimal=5)
    assert dx == [3, 2]


def test_shape_passes_no_gradient_inside_backward():
    """A graph that reads x's shape still differentiates x by its other uses only."""
    x = Tensor(data=np.array([[1.0, 2.0, 3.0]]), dtype=tensor.float64, stores_grad=True)
    n = autograd.reduce_sum(autograd.cast(autograd.shape(x), tensor.float64), None, 0)
    y = autograd.add(autograd.reduce_sum(autograd.mul(x, x), None, 0), n)
    grads = [(p, g) for p, g in autograd.backward(autograd.reshape(y, (1,)))]
    assert len(grads) == 1 and grads[0][0] is x
    np.testing.assert_allclose(grads[0][1].to_numpy(), [[2.0, 4.0, 6.0]])


# ---------------------------------------------------------------- 6. tile
@pytest.mark.parametrize("repeats", [2, [2, 2], [2, 1, 2]])
def test_tile_as_singa_test(repeats):
    X = np.array([0, 1, 2]).astype(np.float32)
    y = np.tile(X, repeats)
    result = autograd.tile(tensor.from_numpy(X), repeats)
    dx = result.creator.backward(tensor.from_numpy(np.copy(y)).data)
    np.testing.assert_array_almost_equal(tensor.to_numpy(result), y, decimal=5)
    np.testing.assert_array_almost_equal(_np(dx), X * np.prod(repeats), decimal=5)


@pytest.mark.parametrize("shape,repeats", [((2, 3), 2), ((2, 3), (3,)), ((2, 1, 3), 1),
                                           ((2, 3), np.int64(3))])
def test_tile_int_repeats_follow_numpy(shape, repeats, rng):
    x = rng.standard_normal(shape)
    check_op(lambda t: autograd.tile(t, repeats), [x], lambda x: np.tile(x, repeats))


# ---------------------------------------------------------------- 7. pad
def test_pad_as_singa_test():
    """SINGA's pad_helper: reflect by 2 on an axis of length 2 (numpy repeats the reflection)."""
    X = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]]).astype(np.float32)
    pads = [0, 2, 0, 0]
    dy = tensor.from_numpy(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32))
    width = [[0, 0], [2, 0]]
    for mode in ("constant", "reflect", "edge"):
        y = autograd.pad(tensor.from_numpy(X), mode, pads)
        dx = y.creator.backward(dy.data)
        np.testing.assert_array_almost_equal(tensor.to_numpy(y), np.pad(X, width, mode=mode),
                                             decimal=5)
        assert dx.shape() == (3, 2)
    np.testing.assert_array_equal(
        tensor.to_numpy(autograd.pad(tensor.from_numpy(X), "reflect", pads)),
        np.array([[1.0, 1.2, 1.0, 1.2], [2.3, 3.4, 2.3, 3.4], [4.5, 5.7, 4.5, 5.7]],
                 np.float32))


@pytest.mark.parametrize("shape,pads", [
    ((3, 2), (3, 5, 7, 2)),        # both axes beyond length - 1, begin and end
    ((4,), (9, 10)),               # several periods on each side
    ((1, 3), (2, 1, 0, 4)),        # a length-1 axis repeats its only cell, as numpy
    ((2, 3, 4), (1, 0, 3, 2, 4, 9)),  # a mix of small (one Pad op) and large pads
])
def test_reflect_pad_beyond_the_axis_length(shape, pads, rng):
    x = rng.standard_normal(shape)
    nd = len(shape)
    width = list(zip(pads[:nd], pads[nd:]))
    check_op(lambda t: autograd.pad(t, "reflect", list(pads)), [x],
             lambda x: np.pad(x, width, mode="reflect"))


def test_reflect_pad_within_the_axis_length_is_unchanged(rng):
    x = rng.standard_normal((3, 4))
    check_op(lambda t: autograd.pad(t, "reflect", [1, 2, 2, 3]), [x],
             lambda x: np.pad(x, [(1, 2), (2, 3)], mode="reflect"))


# ---------------------------------------------------------------- 8. AssertionError
def test_invalid_inputs_raise_assertion_error_as_singa_tests_expect():
    """SINGA's test_invalid_inputs; our ShapeError is also an AssertionError and ValueError."""
    _1d = tensor.Tensor((10,))
    _2d = tensor.Tensor((10, 10))
    _3d = tensor.Tensor((10, 10, 10))
    for fn, args in ((autograd.softmax_cross_entropy, (_2d, _3d)),
                     (autograd.mse_loss, (_2d, _3d)),
                     (autograd.add_bias, (_2d, _1d, 3)),
                     (autograd.ranking_loss, (_2d, _1d))):
        with pytest.raises(AssertionError) as info:
            fn(*args)
        assert isinstance(info.value, ShapeError) and isinstance(info.value, ValueError)
        assert str(info.value)  # a message naming the problem


def test_shape_error_is_catchable_every_way():
    assert issubclass(ShapeError, AssertionError) and issubclass(ShapeError, ValueError)
    with pytest.raises(ValueError, match="must match"):
        autograd.mse_loss(tensor.Tensor((2, 3)), tensor.Tensor((3, 2)))


# ---------------------------------------------------------------- 9. RNN gradients
def _t(a) -> Tensor:
    """A Tensor of ``a``'s dtype (``Tensor(data=...)`` alone would make it float32)."""
    a = np.asarray(a)
    return tensor.Tensor(data=a, dtype=tensor.float64 if a.dtype == np.float64 else
                         tensor.float32)


def _rnn_inputs(rng, dtype):
    """SINGA's prepare_inputs_targets_for_rnn_test: targets uniform in [0, 1), not normalised."""
    xs = [_t(rng.random((2, 3)).astype(dtype)) for _ in range(3)]
    h0 = _t(np.zeros((2, 2), dtype))
    ts = [_t(rng.random((2, 2)).astype(dtype)) for _ in range(3)]
    return xs, ts, h0


def _sequence_loss(hs, ts):
    loss = autograd.softmax_cross_entropy(hs[0], ts[0])
    for h, t in zip(hs[1:], ts[1:]):
        loss = autograd.add(loss, autograd.softmax_cross_entropy(h, t))
    return loss


def _singa_gradients_check(func, param, autograds, h=0.0005):
    """SINGA's gradients_check: float32 central differences, agreement to 2 decimal places."""
    p = tensor.to_numpy(param)
    for idx in np.ndindex(p.shape):
        diff = np.zeros_like(p)
        diff[idx] += h
        diff = tensor.from_numpy(diff)
        param += diff
        pos = tensor.to_numpy(func())
        param -= diff
        param -= diff
        neg = tensor.to_numpy(func())
        param += diff
        numerical_grad = np.sum(pos - neg) / (2 * h)
        assert autograds[idx] - numerical_grad == pytest.approx(0.0, abs=0.005), idx


@pytest.mark.parametrize("kind", ["rnn", "lstm"])
def test_singa_numerical_gradient_check_for_rnn_and_lstm(kind, rng):
    """SINGA's test_numerical_gradients_check_for_vallina_rnn / _for_lstm, unchanged: float32,
    eps 5e-4, unnormalised soft targets, the summed softmax cross-entropy of every step."""
    xs, ts, h0 = _rnn_inputs(rng, np.float32)
    c0 = tensor.Tensor(data=np.zeros((2, 2), np.float32))
    rnn = layer.RNN(3, 2) if kind == "rnn" else layer.LSTM(3, 2)

    def forward():
        hs = rnn(xs, h0)[0] if kind == "rnn" else rnn(xs, (h0, c0))[0]
        return _sequence_loss(hs, ts)

    auto_grads = autograd.gradients(forward())
    for param in rnn.get_params().values():
        _singa_gradients_check(forward, param, tensor.to_numpy(auto_grads[id(param)]))


@pytest.mark.parametrize("make", [
    pytest.param(lambda: layer.RNN(3, 2, num_layers=2, bidirectional=True), id="rnn_tanh"),
    pytest.param(lambda: layer.RNN(3, 2, nonlinearity="relu", num_layers=2), id="rnn_relu"),
    pytest.param(lambda: layer.LSTM(3, 2, num_layers=2, bidirectional=True), id="lstm"),
    pytest.param(lambda: layer.GRU(3, 2, bidirectional=True), id="gru"),
])
def test_every_recurrent_parameter_gradient_in_float64(make, rng):
    """Central differences (eps 1e-6, float64) of SINGA's RNN loss for every parameter of
    stacked, bidirectional RNN/LSTM/GRU layers: the analytic gradients are exact."""
    xs = _rnn_inputs(rng, np.float64)[0][:2]  # two steps keep ~450 float64 forwards quick
    lay = make()
    dirs = 2 if lay.bidirectional else 1
    ts = [_t(rng.random((2, 2 * dirs))) for _ in xs]
    h0 = _t(rng.standard_normal((lay.num_layers * dirs, 2, 2)) * 0.3)
    c0 = _t(rng.standard_normal((lay.num_layers * dirs, 2, 2)) * 0.3)
    is_lstm = isinstance(lay, layer.LSTM)

    def forward():
        hs = lay(xs, (h0, c0))[0] if is_lstm else lay(xs, h0)[0]
        return _sequence_loss(hs, ts)

    forward()
    params = lay.get_params()
    for t in params.values():  # generic values (LSTM biases would otherwise start equal)
        t.copy_from_numpy(rng.uniform(-0.4, 0.9, t.shape))  # ReLU units mostly alive
    grads = check_param_grads(forward, params, rtol=1e-6, atol=1e-8)
    assert set(grads) == set(params)
    # a real check: most entries are nonzero (a dead ReLU may zero a few)
    n = sum(g.size for g in grads.values())
    assert sum(np.count_nonzero(g) for g in grads.values()) > 0.8 * n


@pytest.mark.parametrize("mode", ["vanilla", "relu", "lstm", "gru"])
def test_cudnn_rnn_parameter_gradients_in_float64(mode, rng):
    """SINGA's _gradient_check_cudnn_rnn (there CUDA only) on our CudnnRNN, in float64."""
    seq, bs, fea, hid = 3, 2, 3, 2
    tx = _t(rng.random((seq, bs, fea)))
    ty = _t(rng.random((seq * bs, hid)))
    rnn = layer.CudnnRNN(hid, rnn_mode=mode, return_sequences=True)

    def forward():
        out = autograd.reshape(rnn(tx), (-1, hid))
        return autograd.softmax_cross_entropy(out, ty)

    forward()
    check_param_grads(forward, rnn.get_params(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("target", ["unnormalised", "probabilities", "one_hot", "zero_row"])
def test_softmax_cross_entropy_reads_dense_targets_as_distributions(target, rng):
    """loss = -sum(q log softmax(x)) / N with q = t / row sum (SINGA's CrossEntropyFwd), and its
    gradient (p - q) / N is exact against float64 finite differences for any target."""
    x = rng.standard_normal((4, 3))
    t = rng.random((4, 3))
    if target == "probabilities":
        t /= t.sum(1, keepdims=True)
    elif target == "one_hot":
        t = np.eye(3)[[0, 2, 1, 2]]
    elif target == "zero_row":
        t[1] = 0.0  # an all-zero row contributes nothing (no 0/0)
    s = t.sum(1, keepdims=True)
    q = t / np.where(s == 0, 1.0, s)

    def ref(x):
        z = x - x.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        return np.array([-(q * logp).sum() / x.shape[0]])

    tt = Tensor(data=t, dtype=tensor.float64, requires_grad=False)
    check_op(lambda v: autograd.softmax_cross_entropy(v, tt), [x], ref)
