"""Models exported by PyTorch, imported and checked against onnxruntime.

Both exporters: the TorchScript one (``dynamo=False``) and the dynamo one (``dynamo=True``,
which needs onnxscript; those tests skip without it). PyTorch is a test-only dependency (the
CPU wheel); the oracle is onnxruntime on the same file and the same random inputs (atol 1e-4).
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

from torch_models import (  # noqa: E402
    EncoderLayer,
    GRUNet,
    LSTMNet,
    ResNetish,
    SeedCNN,
)
from torch_models import export as _export  # noqa: E402


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


# ------------------------------------------------------------------ the dynamo exporter
DYNAMO_MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 16), nn.GELU(),
                                  nn.Linear(16, 4), nn.Softmax(-1)), (3, 10)),
    "seed_cnn": (SeedCNN, (2, 1, 28, 28)),
    "resnet_style_bn": (ResNetish, (2, 3, 16, 16)),
    "lstm": (LSTMNet, (2, 5, 6)),
    "encoder_layer": (EncoderLayer, (2, 5, 16)),
    # torch's own layer exports through dynamo (the TorchScript exporter fails on it)
    "torch_transformer_encoder_layer": (
        lambda: nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True),
        (2, 5, 16)),
}


@pytest.mark.parametrize("name", list(DYNAMO_MODELS))
def test_dynamo_exporter(rng, name):
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    make, shape = DYNAMO_MODELS[name]
    x = rng.standard_normal(shape).astype(np.float32)
    onx = _check(make(), x, dynamo=True)
    assert onx.opset_import[0].version >= 18  # what the dynamo exporter writes


def test_dynamo_exporter_dynamic_batch(rng):
    pytest.importorskip("onnxscript", reason="the dynamo exporter needs onnxscript")
    m = SeedCNN().eval()
    x = rng.standard_normal((2, 1, 28, 28)).astype(np.float32)
    buf = io.BytesIO()
    torch.onnx.export(m, (torch.from_numpy(x),), buf, input_names=["x"], dynamo=True,
                      dynamic_shapes=({0: torch.export.Dim("batch")},))
    onx = onnx.load_from_string(buf.getvalue())
    rep = singa_onnx.prepare(onx)
    for n in (3, 7):
        xb = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
        np.testing.assert_allclose(rep.run([xb])[0], ort_run(onx, {"x": xb})[0], atol=1e-4)
