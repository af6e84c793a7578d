"""``singa.layer``: constructor forms, lazy initialisation, state names, params/states, and each
layer's forward against numpy and gradients against finite differences (float64)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from gradcheck import check_op, check_param_grads, to_tensor
from singa import autograd, layer, tensor
from singa.errors import ShapeError, SingaError
from singa.tensor import Tensor


def T(a, grad=False):
    return to_tensor(np.asarray(a), grad=grad)


def conv_ref(x, W, b, stride, pads, dilation=(1, 1), group=1):
    n, c, h, w = x.shape
    o, cg, kh, kw = W.shape
    t, bt, l, r = pads  # noqa: E741
    xp = np.pad(x, ((0, 0), (0, 0), (t, bt), (l, r)))
    ho = (h + t + bt - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + l + r - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, o, ho, wo))
    og = o // group
    for oc in range(o):
        g = oc // og
        for p in range(ho):
            for q in range(wo):
                i0, j0 = p * stride[0], q * stride[1]
                patch = xp[:, g * cg:(g + 1) * cg, i0:i0 + dilation[0] * (kh - 1) + 1:dilation[0],
                           j0:j0 + dilation[1] * (kw - 1) + 1:dilation[1]]
                y[:, oc, p, q] = (patch * W[oc]).sum(axis=(1, 2, 3))
    return y if b is None else y + b.reshape(1, -1, 1, 1)


def same_pads(size, k, s, mode):
    """ONNX auto_pad SAME: (begin, end) of one axis."""
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    small = total // 2
    return (total - small, small) if mode == "SAME_LOWER" else (small, total - small)


# ---------------------------------------------------------------- Linear
@pytest.mark.parametrize("ctor", ["out", "in_out", "in_out_nobias", "kw_nobias"])
def test_linear_constructor_forms_and_lazy_init(ctor, rng):
    lin = {"out": lambda: layer.Linear(3), "in_out": lambda: layer.Linear(99, 3),
           "in_out_nobias": lambda: layer.Linear(4, 3, False),
           "kw_nobias": lambda: layer.Linear(3, bias=False)}[ctor]()
    assert not lin._initialized and lin.get_params() == {}
    x = rng.standard_normal((2, 4))
    y = lin(T(x))
    assert lin._initialized and lin.in_features == 4  # inferred, even when given as 99
    W = lin.W.to_numpy()
    assert W.shape == (4, 3) and lin.W.dtype == tensor.float64
    bias = "nobias" not in ctor
    want = x @ W + (lin.b.to_numpy() if bias else 0)
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-12)
    assert set(lin.get_params()) == ({"W", "b"} if bias else {"W"})


def test_linear_gradients(rng):
    lin = layer.Linear(3)
    x = T(rng.standard_normal((4, 5)))
    lin(x)
    lin.b.copy_from_numpy(rng.standard_normal(3))
    check_param_grads(lambda: lin(x), lin.get_params())
    check_op(lambda t: lin(t), [rng.standard_normal((4, 5))])


def test_linear_initialisation_scale():
    lin = layer.Linear(400)
    lin(tensor.Tensor((2, 600)))
    w = lin.W.to_numpy()
    assert abs(w.std() - np.sqrt(2.0 / 1000)) < 0.05 * np.sqrt(2.0 / 1000)
    np.testing.assert_array_equal(lin.b.to_numpy(), 0.0)


def test_linear_input_feature_mismatch_is_an_error(rng):
    lin = layer.Linear(3)
    lin(T(rng.standard_normal((2, 4))))
    with pytest.raises(ShapeError, match="features"):
        lin(T(rng.standard_normal((2, 5))))


# ---------------------------------------------------------------- Conv2d
@pytest.mark.parametrize("ctor,kernel,stride,pads", [
    (lambda: layer.Conv2d(2, 3), (3, 3), (1, 1), (0, 0, 0, 0)),
    (lambda: layer.Conv2d(3, 2, 3), (3, 3), (1, 1), (0, 0, 0, 0)),  # (in, out, k)
    (lambda: layer.Conv2d(3, 2, 3, 2, 1), (3, 3), (2, 2), (1, 1, 1, 1)),  # + stride, padding
    (lambda: layer.Conv2d(2, (3, 2), stride=(2, 1), padding=(1, 0)), (3, 2), (2, 1),
     (1, 1, 0, 0)),
    (lambda: layer.Conv2d(2, 2, padding=(0, 1, 1, 0)), (2, 2), (1, 1), (0, 1, 1, 0)),
    (lambda: layer.Conv2d(2, 3, padding=(2, 1, 0, 1)), (3, 3), (1, 1), (2, 1, 0, 1)),
])
def test_conv2d_constructor_forms_and_padding(ctor, kernel, stride, pads, rng):
    conv = ctor()
    x = rng.standard_normal((2, 3, 6, 5))
    y = conv(T(x))
    W, b = conv.W.to_numpy(), conv.b.to_numpy()
    assert W.shape == (2, 3) + kernel
    np.testing.assert_allclose(y.to_numpy(), conv_ref(x, W, b, stride, pads), rtol=1e-10)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("k,s,size", [(3, 1, 5), (2, 1, 5), (3, 2, 6), (4, 2, 7), (1, 3, 7)])
def test_conv2d_same_padding(mode, k, s, size, rng):
    conv = layer.Conv2d(2, k, stride=s, pad_mode=mode)
    x = rng.standard_normal((1, 2, size, size + 1))
    y = conv(T(x))
    ph, pw = same_pads(size, k, s, mode), same_pads(size + 1, k, s, mode)
    want = conv_ref(x, conv.W.to_numpy(), conv.b.to_numpy(), (s, s), ph + pw)
    assert y.shape[2:] == (-(-size // s), -(-(size + 1) // s))
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10)


@pytest.mark.parametrize("group,dilation", [(2, 1), (4, 1), (1, 2), (2, (2, 1))])
def test_conv2d_groups_and_dilation(group, dilation, rng):
    conv = layer.Conv2d(4, 3, group=group, dilation=dilation, padding=1)
    x = rng.standard_normal((2, 4, 6, 6))
    y = conv(T(x))
    d = dilation if isinstance(dilation, tuple) else (dilation, dilation)
    assert conv.W.shape == (4, 4 // group, 3, 3)
    want = conv_ref(x, conv.W.to_numpy(), conv.b.to_numpy(), (1, 1), (1, 1, 1, 1), d, group)
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10)
    check_param_grads(lambda: conv(T(x)), conv.get_params(), rtol=1e-5, atol=1e-6)


def test_conv2d_relu_activation_and_no_bias(rng):
    conv = layer.Conv2d(2, 2, bias=False, activation="RELU")
    x = rng.standard_normal((1, 3, 4, 4))
    y = conv(T(x)).to_numpy()
    assert set(conv.get_params()) == {conv.W.name}
    np.testing.assert_allclose(y, np.maximum(conv_ref(x, conv.W.to_numpy(), None, (1, 1),
                                                      (0, 0, 0, 0)), 0), rtol=1e-10)


def test_conv2d_gradients_with_asymmetric_padding(rng):
    conv = layer.Conv2d(2, 3, stride=2, padding=(1, 0, 0, 2))
    x = rng.standard_normal((2, 2, 5, 5))
    xt = T(x)
    conv(xt)
    conv.b.copy_from_numpy(rng.standard_normal(2))
    check_param_grads(lambda: conv(xt), conv.get_params(), atol=1e-6)
    check_op(lambda t: conv(t), [x], atol=1e-6)


def test_conv2d_rejects_unknown_kwargs_and_bad_groups():
    with pytest.raises(TypeError, match="unexpected"):
        layer.Conv2d(2, 3, foo=1)
    layer.Conv2d(2, 3, cudnn_prefer="fastest", workspace_MB_limit=512)
    conv = layer.Conv2d(3, 3, group=2)
    with pytest.raises(ShapeError, match="group"):
        conv(Tensor((1, 4, 5, 5)))


def test_conv2d_new_input_size_rebuilds_the_geometry(rng):
    conv = layer.Conv2d(2, 3, padding=1)
    conv(T(rng.standard_normal((1, 2, 5, 5))))
    x = rng.standard_normal((3, 2, 7, 4))
    y = conv(T(x))
    want = conv_ref(x, conv.W.to_numpy(), conv.b.to_numpy(), (1, 1), (1, 1, 1, 1))
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10)


def test_separable_conv2d(rng):
    sep = layer.SeparableConv2d(8, 16, 3, padding=1)  # (in, out, k)
    x = rng.standard_normal((2, 8, 5, 5))
    y = sep(T(x))
    assert y.shape == (2, 16, 5, 5)
    dw, pw = sep.depthwise_conv, sep.point_conv
    assert dw.W.shape == (8, 1, 3, 3) and pw.W.shape == (16, 8, 1, 1)
    mid = conv_ref(x, dw.W.to_numpy(), None, (1, 1), (1, 1, 1, 1), group=8)
    want = conv_ref(mid, pw.W.to_numpy(), None, (1, 1), (0, 0, 0, 0))
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10)
    assert set(sep.get_params()) == {"depthwise_conv.W", "point_conv.W"}


# ---------------------------------------------------------------- BatchNorm2d
@pytest.mark.parametrize("shape", [(4, 3, 2, 2), (5, 3)])
def test_batchnorm2d_layer(shape, rng):
    bn = layer.BatchNorm2d(3, momentum=0.7)
    x = rng.standard_normal(shape) * 3 + 2
    autograd.training = True
    y = bn(T(x)).to_numpy()
    ax = (0,) + tuple(range(2, len(shape)))
    bc = (1, -1) + (1,) * (len(shape) - 2)
    norm = (x - x.mean(ax).reshape(bc)) / np.sqrt(x.var(ax).reshape(bc) + 1e-5)
    np.testing.assert_allclose(y, norm, rtol=1e-9, atol=1e-12)
    m = x.size // 3
    rm, rv = 0.3 * x.mean(ax), 0.7 + 0.3 * x.var(ax) * m / (m - 1)
    states = bn.get_states()
    assert set(states) == {"scale", "bias", "running_mean", "running_var"}
    np.testing.assert_allclose(bn.running_mean.to_numpy(), rm, rtol=1e-12)
    np.testing.assert_allclose(bn.running_var.to_numpy(), rv, rtol=1e-12)
    assert set(bn.get_params()) == {"scale", "bias"}
    autograd.training = False
    y_eval = bn(T(x)).to_numpy()
    np.testing.assert_allclose(y_eval, (x - rm.reshape(bc)) / np.sqrt(rv.reshape(bc) + 1e-5),
                               rtol=1e-9)
    autograd.training = True
    bn.scale.copy_from_numpy(rng.uniform(0.5, 2, 3))
    check_param_grads(lambda: bn(T(x)), bn.get_params(), atol=1e-6)


def test_batchnorm2d_positional_momentum_and_channel_check():
    assert layer.BatchNorm2d(4, 0.5).momentum == 0.5
    with pytest.raises(ValueError):
        layer.BatchNorm2d(4, momentum=1.5)
    bn = layer.BatchNorm2d(4)
    with pytest.raises(ShapeError, match="channels"):
        bn(Tensor((2, 3, 2, 2)))


# ---------------------------------------------------------------- pooling layers
def pool_ref(x, kernel, stride, pads, is_max):
    kh, kw = kernel
    t, b, l, r = pads  # noqa: E741
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=-np.inf if is_max else 0)
    ho = (xp.shape[2] - kh) // stride[0] + 1
    wo = (xp.shape[3] - kw) // stride[1] + 1
    y = np.empty(x.shape[:2] + (ho, wo))
    for p in range(ho):
        for q in range(wo):
            win = xp[:, :, p * stride[0]:p * stride[0] + kh, q * stride[1]:q * stride[1] + kw]
            y[:, :, p, q] = win.max((2, 3)) if is_max else win.sum((2, 3)) / (kh * kw)
    return y


def _distinct(shape, rng):
    return rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1


@pytest.mark.parametrize("cls,is_max", [(layer.MaxPool2d, True), (layer.AvgPool2d, False)])
@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("k,s", [(2, 2), (3, 1), (3, 2)])
def test_pool2d_same_padding(cls, is_max, mode, k, s, rng):
    pool = cls(k, s, pad_mode=mode)
    x = _distinct((1, 2, 5, 6), rng)
    y = pool(T(x))
    pads = same_pads(5, k, s, mode) + same_pads(6, k, s, mode)
    assert y.shape[2:] == (-(-5 // s), -(-6 // s))
    np.testing.assert_allclose(y.to_numpy(), pool_ref(x, (k, k), (s, s), pads, is_max),
                               rtol=1e-12)
    check_op(lambda t: pool(t), [x], eps=1e-5)


@pytest.mark.parametrize("is_max", [True, False])
@pytest.mark.parametrize("padding", [0, 1, (1, 0), (0, 1, 1, 0), (1, 0, 0, 1)])
def test_pooling2d_explicit_padding(is_max, padding, rng):
    pool = layer.Pooling2d(2, 1, padding, is_max)
    x = _distinct((2, 1, 4, 5), rng)
    p = padding
    pads = (p,) * 4 if isinstance(p, int) else ((p[0], p[0], p[1], p[1]) if len(p) == 2 else p)
    np.testing.assert_allclose(pool(T(x)).to_numpy(),
                               pool_ref(x, (2, 2), (1, 1), pads, is_max), rtol=1e-12)


@pytest.mark.parametrize("cls,is_max", [(layer.MaxPool1d, True), (layer.AvgPool1d, False)])
def test_pool1d(cls, is_max, rng):
    pool = cls(3, 2, 1)
    x = _distinct((2, 3, 1, 7), rng)
    y = pool(T(x))
    np.testing.assert_allclose(y.to_numpy(), pool_ref(x, (1, 3), (1, 2), (0, 0, 1, 1), is_max),
                               rtol=1e-12)
    assert layer.MaxPool1d(2).stride == (1, 2)


def test_pooling_stride_defaults_to_kernel():
    pool = layer.MaxPool2d(2)
    assert pool.stride == (2, 2)
    assert pool(Tensor((1, 1, 4, 6))).shape == (1, 1, 2, 3)


# ---------------------------------------------------------------- recurrent layers
def _sig(z):
    return 1 / (1 + np.exp(-z))


def rnn_ref(xs, h, P, kind, nonlinearity="tanh", sfx=""):
    """One direction of one layer, numpy; P maps parameter names to arrays."""
    def lin(x, h, gate):
        g = f"_{gate}" if gate else ""
        y = x @ P[f"Wx{g}{sfx}"] + h @ P[f"Wh{g}{sfx}"]
        if kind == "rnn":
            return y + P[f"b{sfx}"]
        return y + P[f"Bx{g}{sfx}"] + P[f"Bh{g}{sfx}"]

    hs, c = [], np.zeros_like(h)
    for x in xs:
        if kind == "rnn":
            z = lin(x, h, "")
            h = np.tanh(z) if nonlinearity == "tanh" else np.maximum(z, 0)
        elif kind == "lstm":
            i, f, o = _sig(lin(x, h, "i")), _sig(lin(x, h, "f")), _sig(lin(x, h, "o"))
            c = f * c + i * np.tanh(lin(x, h, "g"))
            h = o * np.tanh(c)
        else:
            r, z = _sig(lin(x, h, "r")), _sig(lin(x, h, "z"))
            n = np.tanh(x @ P[f"Wx_n{sfx}"] + P[f"Bx_n{sfx}"]
                        + r * (h @ P[f"Wh_n{sfx}"] + P[f"Bh_n{sfx}"]))
            h = (1 - z) * n + z * h
        hs.append(h)
    return hs, h, c


def _params_np(lay):
    """Parameters by attribute name (state names carry the layer's path as a prefix)."""
    return {k.split(".")[-1]: v.to_numpy() for k, v in lay.get_params().items()}


def _use_path(path, monkeypatch):
    """Make LSTM and GRU run ``path``: 'seq', the whole-sequence ops (skipped on a device
    without them), or 'steps', the cell unrolled into autograd ops step by step."""
    if path == "steps":
        monkeypatch.setattr(autograd, "has_seq_kernel", lambda x, op: False)
    elif not autograd.has_seq_kernel(Tensor((1, 1)), "LSTMSeq"):
        pytest.skip("the device has no whole-sequence LSTM/GRU kernels")


@pytest.mark.parametrize("kind,path", [("rnn_tanh", "steps"), ("rnn_relu", "steps"),
                                       ("lstm", "seq"), ("lstm", "steps"), ("gru", "seq"),
                                       ("gru", "steps")])
def test_recurrent_layer_forward_and_gradients(kind, path, rng, monkeypatch):
    _use_path(path, monkeypatch)
    steps, batch, n_in, hid = 3, 2, 3, 2
    xs_np = [rng.standard_normal((batch, n_in)) for _ in range(steps)]
    h0_np = rng.standard_normal((batch, hid)) * 0.5
    xs = [T(x) for x in xs_np]
    h0 = T(h0_np)
    if kind.startswith("rnn"):
        nl = kind.split("_")[1]
        lay = layer.RNN(n_in, hid, nonlinearity=nl)
        hs, h = lay(xs, h0)
        ref = rnn_ref(xs_np, h0_np, _params_np(lay), "rnn", nl)
    elif kind == "lstm":
        lay = layer.LSTM(n_in, hid)
        c0 = T(np.zeros((batch, hid)))
        hs, h, c = lay(xs, (h0, c0))
        ref = rnn_ref(xs_np, h0_np, _params_np(lay), "lstm")
        np.testing.assert_allclose(c.to_numpy(), ref[2], rtol=1e-10)
    else:
        lay = layer.GRU(n_in, hid)
        hs, h = lay(xs, h0)
        ref = rnn_ref(xs_np, h0_np, _params_np(lay), "gru")
    assert len(hs) == steps
    for got, want in zip(hs, ref[0]):
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-10)
    np.testing.assert_allclose(h.to_numpy(), ref[1], rtol=1e-10)
    # biases start at zero in SINGA's LSTM; move them so their gradients are generic
    for t in lay.get_params().values():
        t.copy_from_numpy(rng.uniform(-0.5, 0.5, t.shape))

    def forward():
        outs = lay(xs, (h0, c0))[0] if kind == "lstm" else lay(xs, h0)[0]
        return autograd.cat(outs, 1)

    check_param_grads(forward, lay.get_params(), atol=1e-6)


def test_lstm_param_names_match_singa():
    lay = layer.LSTM(3, 2)
    lay([Tensor((1, 3))], (Tensor((1, 2)), Tensor((1, 2))))
    want = {f"{s}_{g}" for s in ("Wx", "Wh", "Bx", "Bh") for g in "ifog"}
    assert set(lay.get_params()) == want
    rnn = layer.RNN(3, 2)
    rnn([Tensor((1, 3))], Tensor((1, 2)))
    assert set(rnn.get_params()) == {"Wx", "Wh", "b"}


@pytest.mark.parametrize("path", ["seq", "steps"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_stacked_and_bidirectional_lstm(bidirectional, path, rng, monkeypatch):
    _use_path(path, monkeypatch)
    steps, batch, n_in, hid, layers = 3, 2, 3, 2, 2
    lay = layer.LSTM(n_in, hid, num_layers=layers, bidirectional=bidirectional)
    xs_np = [rng.standard_normal((batch, n_in)) for _ in range(steps)]
    hs, h, c = lay([T(x) for x in xs_np])
    dirs = 2 if bidirectional else 1
    assert [t.shape for t in hs] == [(batch, dirs * hid)] * steps
    assert h.shape == (layers * dirs, batch, hid) and c.shape == h.shape
    P = _params_np(lay)
    seq = xs_np
    zero = np.zeros((batch, hid))
    for lay_i in range(layers):
        sfx = f"_l{lay_i}" if lay_i else ""
        fwd, hf, _ = rnn_ref(seq, zero, P, "lstm", sfx=sfx)
        if bidirectional:
            bwd, hb, _ = rnn_ref(seq[::-1], zero, P, "lstm", sfx=sfx + "_reverse")
            seq = [np.concatenate([a, b], 1) for a, b in zip(fwd, bwd[::-1])]
            np.testing.assert_allclose(h.to_numpy()[2 * lay_i + 1], hb, rtol=1e-10)
        else:
            seq = fwd
        np.testing.assert_allclose(h.to_numpy()[dirs * lay_i], hf, rtol=1e-10)
    for got, want in zip(hs, seq):
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-10)


def _run_layer(lay, xs, h0, c0, kind):
    """Outputs, last h and (LSTM) last c of ``lay`` joined into one (batch, *) tensor."""
    if kind == "lstm":
        hs, h, c = lay(xs, (h0, c0))
        last = [h, c]
    else:
        hs, h = lay(xs, h0)
        last = [h]
    n = lay.num_layers * lay.dirs
    last = [autograd.reshape(autograd.transpose(t, (1, 0, 2)), (t.shape[1], -1)) if n > 1
            else t for t in last]
    return autograd.cat(list(hs) + last, 1)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False])
def test_whole_sequence_path_matches_the_step_path(kind, bias, rng, monkeypatch):
    """Two layers, both directions, given initial states: outputs, last states and every
    parameter's gradient agree between the whole-sequence ops and the unrolled cell (whose
    simpler configurations the tests above check against numpy and finite differences)."""
    _use_path("seq", monkeypatch)
    autograd.training = True  # conftest restores it
    steps, batch, n_in, hid, layers = 4, 3, 3, 5, 2
    cls = layer.LSTM if kind == "lstm" else layer.GRU
    lay = cls(n_in, hid, num_layers=layers, bias=bias, bidirectional=True)
    xs = [T(rng.standard_normal((batch, n_in)), grad=True) for _ in range(steps)]
    h0, c0 = (T(0.5 * rng.standard_normal((layers * 2, batch, hid)), grad=True)
              for _ in range(2))
    lay(xs, (h0, c0)) if kind == "lstm" else lay(xs, h0)
    params = lay.get_params()
    for t in params.values():
        t.copy_from_numpy(rng.uniform(-0.6, 0.6, t.shape))
    leaves = {**params, "h0": h0, **({"c0": c0} if kind == "lstm" else {}),
              **{f"x{i}": x for i, x in enumerate(xs)}}
    dy = None
    got = {}
    for path in ("seq", "steps"):
        with monkeypatch.context() as m:
            _use_path(path, m)
            y = _run_layer(lay, xs, h0, c0, kind)
            if dy is None:
                dy = T(rng.standard_normal(y.shape))
            grads = {id(p): g.to_numpy() for p, g in autograd.backward(y, dy.data)}
            got[path] = (y.to_numpy(), {k: grads[id(v)] for k, v in leaves.items()})
    np.testing.assert_allclose(got["seq"][0], got["steps"][0], rtol=1e-10, atol=1e-12)
    assert set(got["seq"][1]) == set(leaves)
    for k in leaves:
        np.testing.assert_allclose(got["seq"][1][k], got["steps"][1][k], rtol=1e-9,
                                   atol=1e-12, err_msg=k)


@pytest.mark.parametrize("mode", ["lstm", "gru", "tanh", "relu"])
@pytest.mark.parametrize("return_sequences", [True, False])
def test_cudnn_rnn_interface(mode, return_sequences, rng):
    batch, steps, feat, hid = 2, 4, 3, 5
    lay = layer.CudnnRNN(hid, rnn_mode=mode, return_sequences=return_sequences,
                         batch_first=True)
    x = rng.standard_normal((batch, steps, feat))
    y = lay(T(x))
    assert y.shape == ((batch, steps, hid) if return_sequences else (batch, hid))
    inner = lay.rnn
    kind = {"tanh": "rnn", "relu": "rnn"}.get(mode, mode)
    hs, h, _ = rnn_ref([x[:, t] for t in range(steps)], np.zeros((batch, hid)),
                       _params_np(inner), kind, "relu" if mode == "relu" else "tanh")
    want = np.stack(hs, 1) if return_sequences else h
    np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-10)


def test_cudnn_rnn_seq_lengths_stop_at_each_sequence_end(rng):
    batch, steps, feat, hid = 3, 4, 2, 3
    lay = layer.CudnnRNN(hid, rnn_mode="gru", return_sequences=False)
    x = rng.standard_normal((batch, steps, feat))
    lens = np.array([4, 2, 1])
    y = lay(T(x), seq_lengths=lens).to_numpy()
    P = _params_np(lay.rnn)
    for i, n in enumerate(lens):
        _, h, _ = rnn_ref([x[i:i + 1, t] for t in range(n)], np.zeros((1, hid)), P, "gru")
        np.testing.assert_allclose(y[i], h[0], rtol=1e-10)


# ---------------------------------------------------------------- other layers
def test_embedding_layer(rng):
    emb = layer.Embedding(5, 3)
    ids = Tensor(data=np.array([[0, 4], [2, 2]], np.int32), dtype=tensor.int32,
                 requires_grad=False)
    y = emb(ids)
    W = emb.W.to_numpy()
    np.testing.assert_array_equal(y.to_numpy(), W[[[0, 4], [2, 2]]])
    autograd.training = True
    (p, g), = list(autograd.backward(autograd.reduce_sum(emb(ids), None, 0)))
    want = np.zeros((5, 3))
    for i in (0, 4, 2, 2):
        want[i] += 1
    np.testing.assert_array_equal(g.to_numpy(), want)
    pre = rng.standard_normal((5, 3)).astype(np.float32)
    emb2 = layer.Embedding(5, 3)
    emb2.from_pretrained(pre, freeze=True)
    np.testing.assert_array_equal(emb2(ids).to_numpy(), pre[[[0, 4], [2, 2]]])
    assert not emb2.W.stores_grad


@pytest.mark.parametrize("transA,transB", [(False, True), (True, False)])
def test_gemm_layer(transA, transB, rng):  # noqa: N803
    g = layer.Gemm(3, alpha=0.5, beta=2.0, transA=transA, transB=transB)
    x = rng.standard_normal((4, 2) if transA else (2, 4))
    y = g(T(x)).to_numpy()
    W = g.W.to_numpy()
    assert g.b.shape == (1, 3)
    want = 0.5 * (x.T if transA else x) @ (W.T if transB else W) + 2.0 * g.b.to_numpy()
    np.testing.assert_allclose(y, want, rtol=1e-12)


def test_dropout_layer_honours_its_ratio():
    """SINGA's layer.Dropout passed the ratio as the seed (always dropping half)."""
    autograd.training = True
    d = layer.Dropout(0.1)
    y = d(Tensor(data=np.ones(20000), dtype=tensor.float64)).to_numpy()
    assert abs((y == 0).mean() - 0.1) < 0.02
    autograd.training = False
    np.testing.assert_array_equal(d(Tensor(data=np.ones(5), dtype=tensor.float64)).to_numpy(),
                                  1.0)


def test_parameterless_layers(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    np.testing.assert_allclose(layer.Add()(T(a), T(b)).to_numpy(), a + b)
    np.testing.assert_allclose(layer.ReLU()(T(a)).to_numpy(), np.maximum(a, 0))
    np.testing.assert_allclose(layer.Sigmoid()(T(a)).to_numpy(), 1 / (1 + np.exp(-a)))
    np.testing.assert_allclose(layer.Tanh()(T(a)).to_numpy(), np.tanh(a))
    np.testing.assert_allclose(layer.Cat(1)([T(a), T(b)]).to_numpy(), np.hstack([a, b]))
    np.testing.assert_allclose(layer.Reshape()(T(a), (3, 2)).to_numpy(), a.reshape(3, 2))
    np.testing.assert_allclose(layer.Flatten()(T(a.reshape(2, 3, 1))).to_numpy(), a)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(layer.SoftMax()(T(a)).to_numpy(), e / e.sum(1, keepdims=True))
    np.testing.assert_allclose(layer.MeanSquareError()(T(a), T(b)).to_numpy(),
                               [((a - b) ** 2).mean()])
    p = 1 / (1 + np.exp(-a))
    t = (b > 0).astype(np.float64)
    np.testing.assert_allclose(layer.CrossEntropy()(T(p), T(t)).to_numpy(),
                               [-(t * np.log(p)).sum() / 2])
    np.testing.assert_allclose(
        layer.BinaryCrossEntropy()(T(p), T(t)).to_numpy(),
        [-(t * np.log(p + 1e-4) + (1 - t) * np.log(1 - p + 1e-4)).sum() / 2])
    ids = np.array([2, 0], np.int32)
    z = a - a.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    np.testing.assert_allclose(layer.SoftMaxCrossEntropy()(T(a), T(ids)).to_numpy(),
                               [-logp[[0, 1], ids].mean()])


# ---------------------------------------------------------------- naming, params and states
class Block(layer.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = layer.Linear(3)
        self.bn = layer.BatchNorm2d()

    def forward(self, x):
        return self.bn(self.fc1(x))


class Net(layer.Layer):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(2, 3, padding=1)
        self.flat = layer.Flatten()
        self.block1 = Block()
        self.register_layers(layer.Linear(4), layer.Linear(2))

    def forward(self, x):
        y = self.block1(self.flat(self.conv1(x)))
        return self.Linear_1(self.Linear_0(y))


def test_attribute_path_names_and_register_layers():
    net = Net()
    net(Tensor((2, 1, 3, 3)))
    assert set(net.get_params()) == {
        "conv1.W", "conv1.b", "block1.fc1.W", "block1.fc1.b", "block1.bn.scale",
        "block1.bn.bias", "Linear_0.W", "Linear_0.b", "Linear_1.W", "Linear_1.b"}
    assert set(net.get_states()) - set(net.get_params()) == {
        "block1.bn.running_mean", "block1.bn.running_var"}
    assert net.block1.fc1.name == "block1.fc1"


def test_register_layers_with_ordered_dict():
    net = layer.Layer()
    net.register_layers(OrderedDict([("first", layer.Linear(2)), ("second", layer.ReLU())]))
    assert isinstance(net.first, layer.Linear) and isinstance(net.second, layer.ReLU)


def test_set_params_and_set_states_round_trip(rng):
    net = Net()
    net(Tensor((2, 1, 3, 3)))
    new = {k: rng.standard_normal(v.shape).astype(np.float32)
           for k, v in net.get_states().items()}
    net.set_states(new)
    for k, v in net.get_states().items():
        np.testing.assert_array_equal(v.to_numpy(), new[k])
    params = {k: Tensor(data=v) for k, v in new.items() if k in net.get_params()}
    for v in params.values():
        v *= 2.0
    net.set_params(params)
    for k, v in net.get_params().items():
        np.testing.assert_array_equal(v.to_numpy(), 2 * new[k])
    with pytest.raises(Exception, match="shape"):
        net.set_params({"conv1.W": np.zeros((1, 1))})


def test_uninitialised_sublayers_are_skipped():
    net = Net()
    assert net.get_params() == {} and net.get_states() == {}


def test_layer_device_and_dtype_checks():
    lin = layer.Linear(2)
    x32 = Tensor((3, 4))
    lin(x32)
    assert lin.W.dtype == tensor.float32
    x64 = Tensor(data=np.ones((3, 4)), dtype=tensor.float64)
    y = lin(x64)  # params follow the input's dtype (dtype_check)
    assert y.dtype == tensor.float64 and lin.W.dtype == tensor.float64


# ---------------------------------------------------------------- parameters before forward
_BUILT_IN_FROM_FIRST_INPUT = {
    "Linear": lambda: layer.Linear(3), "Gemm": lambda: layer.Gemm(3),
    "Embedding": lambda: layer.Embedding(5, 3), "Conv2d": lambda: layer.Conv2d(2, 3),
    "BatchNorm2d": lambda: layer.BatchNorm2d(3), "RNN": lambda: layer.RNN(3, 2),
    "LSTM": lambda: layer.LSTM(3, 2), "GRU": lambda: layer.GRU(3, 2),
}


@pytest.mark.parametrize("name", sorted(_BUILT_IN_FROM_FIRST_INPUT))
def test_built_in_layer_has_no_params_before_its_first_input(name):
    lay = _BUILT_IN_FROM_FIRST_INPUT[name]()
    assert lay.get_params() == {} and lay.get_states() == {}
    with pytest.raises(SingaError, match="no parameters yet.*run a forward pass"):
        lay.set_params({"W": Tensor((3, 3))})
    with pytest.raises(SingaError, match="no parameters yet"):
        lay.set_states({"W": Tensor((3, 3))})


def test_built_in_layer_params_after_first_input(rng):
    lin = layer.Linear(3)
    lin(T(rng.standard_normal((2, 4))))
    assert set(lin.get_params()) == {"W", "b"}
    lin.set_params({"W": np.ones((4, 3))})
    np.testing.assert_array_equal(lin.W.to_numpy(), np.ones((4, 3)))
    bn = layer.BatchNorm2d(2)
    bn(T(rng.standard_normal((2, 2, 3, 3))))
    assert set(bn.get_states()) == {"scale", "bias", "running_mean", "running_var"}


class _EagerParams(layer.Layer):
    """A user layer in SINGA's style: its tensor exists from ``__init__``."""

    def __init__(self):
        super().__init__()
        self.scale = Tensor((2,), requires_grad=True, stores_grad=True).set_value(1.0)

    def forward(self, x):
        return autograd.mul(x, self.scale)

    def get_params(self):
        return {"scale": self.scale}

    def set_params(self, parameters):
        self.scale.copy_from(parameters["scale"])


class _LinearOwnSetter(layer.Linear):
    def set_params(self, parameters):
        self.seen = dict(parameters)


def test_user_layers_read_and_set_their_params_before_forward():
    lay = _EagerParams()
    assert set(lay.get_params()) == {"scale"}
    lay.set_params({"scale": Tensor(data=np.array([3.0, 4.0], np.float32))})
    np.testing.assert_array_equal(lay.scale.to_numpy(), [3.0, 4.0])
    # a user subclass's own setter is not guarded; the getter it inherits from Linear is
    lin = _LinearOwnSetter(3)
    lin.set_params({"W": 1})
    assert lin.seen == {"W": 1} and lin.get_params() == {}


def test_every_built_in_layer_that_defines_param_accessors_is_declared():
    import inspect

    from singa.layer import _base, _basic, _conv, _rnn

    undeclared = []
    for module in (_base, _basic, _conv, _rnn):
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and issubclass(cls, layer.Layer)) or cls is layer.Layer:
                continue
            for method in ("get_params", "get_states", "set_params", "set_states"):
                func = vars(cls).get(method)
                if func is not None and not getattr(func, "_guards_params", False):
                    undeclared.append(f"{cls.__name__}.{method}")
    assert not undeclared, (f"{undeclared}: list the class in singa/layer/__init__.py's "
                            "params_from_first_input(...)")


def test_params_from_first_input_takes_layer_classes():
    from singa.layer import _base

    with pytest.raises(SingaError, match="Layer subclasses"):
        _base.params_from_first_input(object)
