"""Models exported by PyTorch (TorchScript exporter), imported and checked against onnxruntime.

PyTorch is a test-only dependency (the CPU wheel); the oracle is onnxruntime on the same file
and the same random inputs (atol 1e-4).
"""

from __future__ import annotations

import io

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run

torch = pytest.importorskip("torch")
nn = torch.nn


class SeedCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.fc1, self.fc2 = nn.Linear(800, 500), nn.Linear(500, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


class ResNetish(nn.Module):
    """Stem conv-BN-ReLU-maxpool, a basic block with a strided 1x1 shortcut, GAP, linear."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, padding=1))
        self.a = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False),
                               nn.BatchNorm2d(16), nn.ReLU(),
                               nn.Conv2d(16, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.short = nn.Sequential(nn.Conv2d(8, 16, 1, stride=2, bias=False),
                                   nn.BatchNorm2d(16))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        x = self.stem(x)
        x = torch.relu(self.a(x) + self.short(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(6, 12, num_layers=2, batch_first=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class GRUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(5, 7, bidirectional=True)

    def forward(self, x):
        return self.gru(x)[0]


def _export(module, x, dynamic_batch=False, **kw):
    module.eval()
    # BatchNorm stays a BatchNormalization node unless folded; randomise its statistics
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
    buf = io.BytesIO()
    axes = {"x": {0: "batch"}, "y": {0: "batch"}} if dynamic_batch else None
    torch.onnx.export(module, (torch.from_numpy(x),), buf, input_names=["x"],
                      output_names=["y"], dynamic_axes=axes, dynamo=False, **kw)
    return onnx.load_from_string(buf.getvalue())


def _check(module, x, atol=1e-4, **kw):
    onx = _export(module, x, **kw)
    want = ort_run(onx, {"x": x})[0]
    with torch.no_grad():
        np.testing.assert_allclose(module(torch.from_numpy(x)).numpy(), want, atol=atol)
    got = singa_onnx.prepare(onx).run([x])[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=atol, rtol=1e-4)
    return onx


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_mlp(rng):
    m = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16), nn.GELU(),
                      nn.Linear(16, 4), nn.Softmax(-1))
    _check(m, rng.standard_normal((3, 10)).astype(np.float32))


def test_seed_cnn(rng):
    _check(SeedCNN(), rng.standard_normal((2, 1, 28, 28)).astype(np.float32))


@pytest.mark.parametrize("fold", [False, True])
def test_resnet_style_with_bn(rng, fold):
    onx = _check(ResNetish(), rng.standard_normal((2, 3, 16, 16)).astype(np.float32),
                 do_constant_folding=fold)
    ops = {n.op_type for n in onx.graph.node}
    assert ("BatchNormalization" in ops) == (not fold)


def test_free_batch_dimension(rng):
    m = SeedCNN()
    onx = _export(m, rng.standard_normal((2, 1, 28, 28)).astype(np.float32),
                  dynamic_batch=True)
    assert onx.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    rep = singa_onnx.prepare(onx)
    for n in (1, 5):
        x = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
        np.testing.assert_allclose(rep.run([x])[0], ort_run(onx, {"x": x})[0], atol=1e-4)


def test_lstm(rng):
    _check(LSTMNet(), rng.standard_normal((2, 5, 6)).astype(np.float32))


def test_gru_bidirectional(rng):
    _check(GRUNet(), rng.standard_normal((4, 2, 5)).astype(np.float32))


class EncoderLayer(nn.Module):
    """A pre-LN transformer encoder layer written out (nn.TransformerEncoderLayer's TorchScript
    export fails inside torch 2.13's attention code): multi-head self-attention, GELU MLP."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 32), nn.GELU(), nn.Linear(32, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)

        def heads(z):
            return z.reshape(b, t, self.h, self.dk).transpose(1, 2)

        att = torch.softmax(heads(q) @ heads(k).transpose(-1, -2) / self.dk ** 0.5, dim=-1)
        y = (att @ heads(v)).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.ff(self.ln2(x))


def test_transformer_encoder_layer(rng):
    _check(EncoderLayer(), rng.standard_normal((2, 5, 16)).astype(np.float32))


def test_transformer_encoder_layer_dynamic_batch(rng):
    m = EncoderLayer()
    onx = _export(m, rng.standard_normal((2, 5, 16)).astype(np.float32), dynamic_batch=True)
    rep = singa_onnx.prepare(onx)
    x = rng.standard_normal((3, 5, 16)).astype(np.float32)
    np.testing.assert_allclose(rep.run([x])[0], ort_run(onx, {"x": x})[0], atol=1e-4)


def test_embedding_and_layernorm(rng):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.ln = nn.Embedding(20, 8), nn.LayerNorm(8)

        def forward(self, x):
            return self.ln(self.emb(x)).sum(1)

    m = Net().eval()
    ids = rng.integers(0, 20, (3, 4)).astype(np.int64)
    buf = io.BytesIO()
    torch.onnx.export(m, (torch.from_numpy(ids),), buf, input_names=["x"], dynamo=False)
    onx = onnx.load_from_string(buf.getvalue())
    np.testing.assert_allclose(singa_onnx.prepare(onx).run([ids])[0],
                               ort_run(onx, {"x": ids})[0], atol=1e-4)
