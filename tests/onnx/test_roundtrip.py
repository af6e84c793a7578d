"""Export -> onnx.checker -> onnxruntime, and export -> import -> the same outputs.

Models: an MLP, the seed CNN, a ResNet basic block with batch norm, an LSTM, the char-rnn
example's network. The oracle is the native singa forward pass; onnxruntime checks the file.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from singa import autograd, layer, model, tensor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class MLP(model.Model):
    def __init__(self):
        super().__init__()
        self.l1, self.relu, self.l2 = layer.Linear(32), layer.ReLU(), layer.Linear(5)

    def forward(self, x):
        return self.l2(self.relu(self.l1(x)))


class ResBlock(model.Model):
    """conv-BN-ReLU-conv-BN + identity, ReLU (ResNet's basic block)."""

    def __init__(self, c=8):
        super().__init__()
        self.c1 = layer.Conv2d(c, 3, padding=1, bias=False)
        self.b1 = layer.BatchNorm2d(c)
        self.c2 = layer.Conv2d(c, 3, padding=1, bias=False)
        self.b2 = layer.BatchNorm2d(c)
        self.relu = layer.ReLU()

    def forward(self, x):
        y = self.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return self.relu(autograd.add(y, x))


class LSTMNet(model.Model):
    def __init__(self):
        super().__init__()
        self.rnn = layer.LSTM(6, 12)
        self.fc = layer.Linear(4)

    def forward(self, xs):
        seq, _, _ = self.rnn(xs)
        return self.fc(seq[-1])


def _seed_cnn():
    import sys

    sys.path.insert(0, os.path.join(ROOT, "examples", "cnn"))
    try:
        from model import cnn
    finally:
        sys.path.pop(0)
    return cnn.CNN(num_classes=10, num_channels=1)


def _forward(m, *xs):
    m.eval()
    return m(*xs)


def _check(m, xs, atol=1e-4):
    ts = [tensor.from_numpy(x) for x in xs]
    y = _forward(m, *ts)
    want = tensor.to_numpy(y)
    onx = singa_onnx.to_onnx(ts, [y])
    onnx.checker.check_model(onx, full_check=True)
    got_ort = ort_run(onx, {i.name: x for i, x in zip(onx.graph.input, xs)})[0]
    np.testing.assert_allclose(got_ort, want, atol=atol, rtol=1e-4)
    rep = singa_onnx.prepare(onx)
    got = rep.run(list(xs))[0]
    np.testing.assert_allclose(got, want, atol=atol, rtol=1e-4)
    return onx


def test_mlp(rng):
    _check(MLP(), [rng.standard_normal((4, 10)).astype(np.float32)])


def test_seed_cnn(rng):
    onx = _check(_seed_cnn(), [rng.standard_normal((2, 1, 28, 28)).astype(np.float32)])
    ops = [n.op_type for n in onx.graph.node]
    assert ops.count("Conv") == 2 and ops.count("MaxPool") == 2


def test_resnet_block_with_bn(rng):
    m = ResBlock()
    x = rng.standard_normal((2, 8, 6, 6)).astype(np.float32)
    # give the running statistics non-trivial values, as after training
    m.eval()
    m(tensor.from_numpy(x))  # initialises the layers
    m.b1.running_mean.copy_from_numpy(rng.standard_normal(8).astype(np.float32))
    m.b2.running_var.copy_from_numpy(rng.uniform(0.5, 2, 8).astype(np.float32))
    onx = _check(m, [x])
    assert [n.op_type for n in onx.graph.node].count("BatchNormalization") == 2


def test_lstm(rng):
    m = LSTMNet()
    xs = [rng.standard_normal((3, 6)).astype(np.float32) for _ in range(4)]
    ts = [tensor.from_numpy(x) for x in xs]
    m.eval()
    y = m(ts)
    want = tensor.to_numpy(y)
    onx = singa_onnx.to_onnx(ts, [y])
    got_ort = ort_run(onx, {i.name: x for i, x in zip(onx.graph.input, xs)})[0]
    np.testing.assert_allclose(got_ort, want, atol=1e-5)
    got = singa_onnx.prepare(onx).run(xs)[0]
    np.testing.assert_allclose(got, want, atol=1e-5)


# (layer, outputs read, ONNX LSTM/GRU nodes): the cell states' sequence read (the last c as an
# output) makes the LSTM a chain of one-step nodes, one per step
RECURRENT_EXPORTS = {
    "lstm_2_layers_bidirectional": (lambda: layer.LSTM(6, 5, num_layers=2, bidirectional=True),
                                    "hs+h", 4),
    "lstm_last_c": (lambda: layer.LSTM(6, 5), "c", 4),
    "gru": (lambda: layer.GRU(6, 5), "hs+h", 1),
    "gru_bidirectional_no_bias": (lambda: layer.GRU(6, 5, bias=False, bidirectional=True),
                                  "hs+h", 2),
}


@pytest.mark.parametrize("case", sorted(RECURRENT_EXPORTS))
def test_recurrent_layers_export(case, rng, monkeypatch):
    """The whole-sequence ops export as ONNX LSTM/GRU nodes (the unrolled cell, on a device
    without them, as primitive ops) that onnxruntime and singa's importer run to the native
    forward's numbers."""
    make, read, nodes = RECURRENT_EXPORTS[case]
    lay = make()
    xs = [rng.standard_normal((3, 6)).astype(np.float32) for _ in range(4)]
    ts = [tensor.from_numpy(x) for x in xs]
    monkeypatch.setattr(autograd, "training", False)
    lay(ts)
    for p in lay.get_params().values():  # generic biases (they start at zero)
        p.copy_from_numpy(rng.uniform(-0.5, 0.5, p.shape).astype(np.float32))
    out = lay(ts)
    ys = [out[2]] if read == "c" else [autograd.cat(out[0], 1), out[1]]
    want = [tensor.to_numpy(y) for y in ys]
    onx = singa_onnx.to_onnx(ts, ys)
    ops = [n.op_type for n in onx.graph.node]
    seq_ops = autograd.has_seq_kernel(ts[0], "LSTMSeq")
    assert ops.count("LSTM") + ops.count("GRU") == (nodes if seq_ops else 0)
    feeds = {i.name: x for i, x in zip(onx.graph.input, xs)}
    for got, w in zip(ort_run(onx, feeds), want):
        np.testing.assert_allclose(got, w, atol=1e-5)
    for got, w in zip(singa_onnx.prepare(onx).run(xs), want):
        np.testing.assert_allclose(got, w, atol=1e-5)


def test_char_rnn(rng):
    import sys

    sys.path.insert(0, os.path.join(ROOT, "examples", "rnn"))
    try:
        import char_rnn
    finally:
        sys.path.pop(0)
    m = char_rnn.CharRNN(20, hidden_size=16)
    xs = [np.eye(20, dtype=np.float32)[rng.integers(0, 20, 2)] for _ in range(3)]
    ts = [tensor.from_numpy(x) for x in xs]
    m.eval()
    ys = [m(ts)]
    m.reset_states()  # forward advanced the LSTM state held in hx/cx; export the zero state
    onx = singa_onnx.to_onnx(ts, ys)
    feeds = {i.name: x for i, x in zip(onx.graph.input, xs)}
    for got, y in zip(ort_run(onx, feeds), ys):
        np.testing.assert_allclose(got, tensor.to_numpy(y), atol=1e-5)
    for got, y in zip(singa_onnx.prepare(onx).run(xs), ys):
        np.testing.assert_allclose(got, tensor.to_numpy(y), atol=1e-5)


def test_multiple_outputs(rng):
    x = tensor.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    a = autograd.relu(x)
    b = autograd.softmax(autograd.mul(x, x), 1)
    onx = singa_onnx.to_onnx([x], [a, b])
    got = singa_onnx.prepare(onx).run([tensor.to_numpy(x)])
    np.testing.assert_allclose(got[0], tensor.to_numpy(a), atol=1e-6)
    np.testing.assert_allclose(got[1], tensor.to_numpy(b), atol=1e-6)


def test_loss_is_refused(rng):
    x = tensor.from_numpy(rng.standard_normal((3, 4)).astype(np.float32))
    t = tensor.from_numpy(np.array([0, 1, 2], np.int32))
    loss = autograd.softmax_cross_entropy(x, t)
    with pytest.raises(singa_onnx.SingaONNXError, match="SoftMaxCrossEntropy"):
        singa_onnx.to_onnx([x], [loss])
