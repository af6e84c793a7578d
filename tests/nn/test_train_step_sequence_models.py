"""benchmarks/_models.py's transformer and LSTM rows at tiny sizes: the SINGA model, loaded
with the shared initial weights, matches its PyTorch twin (the first loss, and the losses of
the next SGD steps, which check the gradients and the update too), and graph mode gives the
losses of eager mode. Also the benchmark driver's first-loss check."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
TINY = {
    "transformer": {"vocab": 50, "seq": 6, "d": 16, "heads": 2, "ffn": 32, "layers": 2,
                    "classes": 5},
    "lstm": {"vocab": 40, "seq": 5, "emb": 12, "hidden": 10, "layers": 2},
}
BATCH, STEPS = 3, 3


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, BENCH / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def models():
    # Not importable as ``_models``: tests/nn has a module of that name.
    return _load("train_step_bench_models", "_models.py")


@pytest.fixture(scope="module")
def bench():
    return _load("train_step_bench_driver", "train_step.py")


def singa_losses(models, name, use_graph):
    from singa import device, tensor

    dev = device.get_default_device()
    x, y = models.batch(name, BATCH, cfg=TINY[name])
    m = models.singa_model(name, TINY[name])
    tx = tensor.Tensor(x.shape, dev, tensor.int32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
    models.load_singa(name, m, TINY[name])
    losses = []
    for _ in range(STEPS):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        out, loss = m(tx, ty)
        losses.append(float(tensor.to_numpy(loss)[0]))
    return out.shape, losses


def torch_losses(models, name):
    x, y = models.batch(name, BATCH, cfg=TINY[name])
    net, sgd = models.torch_model(name, cfg=TINY[name])
    lossf = torch.nn.CrossEntropyLoss()
    losses = []
    for _ in range(STEPS):
        sgd.zero_grad()
        loss = lossf(net(torch.from_numpy(x)), torch.from_numpy(y.astype(np.int64)))
        loss.backward()
        sgd.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("name", ["transformer", "lstm"])
def test_singa_matches_pytorch_from_the_shared_weights(models, name):
    shape, eager = singa_losses(models, name, use_graph=False)
    c = TINY[name]
    assert shape == ((BATCH, c["classes"]) if name == "transformer" else
                     (BATCH * c["seq"], c["vocab"]))
    ref = torch_losses(models, name)
    assert eager[0] == pytest.approx(ref[0], rel=1e-5)
    assert eager == pytest.approx(ref, rel=1e-5)
    assert eager[-1] < eager[0]  # the steps train


@pytest.mark.parametrize("name", ["transformer", "lstm"])
def test_graph_gives_eagers_losses(models, name):
    _, eager = singa_losses(models, name, use_graph=False)
    _, graph = singa_losses(models, name, use_graph=True)
    assert graph == pytest.approx(eager, rel=1e-6)


@pytest.mark.parametrize("name", ["transformer", "lstm"])
def test_every_singa_parameter_gets_a_shared_weight(models, name):
    from singa import device, tensor

    x, _ = models.batch(name, BATCH, cfg=TINY[name])
    m = models.singa_model(name, TINY[name])
    m.compile([tensor.Tensor(x.shape, device.get_default_device(), tensor.int32)])
    models.load_singa(name, m, TINY[name])
    w = models.init_arrays(name, TINY[name])
    np.testing.assert_array_equal(tensor.to_numpy(m.head.W), w["head.weight"].T)
    # PyTorch stacks the LSTM gates i, f, g, o: the forget gate is the second block
    if name == "lstm":
        h = TINY[name]["hidden"]
        np.testing.assert_array_equal(tensor.to_numpy(m.rnn.Wh_f_l1),
                                      w["rnn.weight_hh_l1"][h:2 * h].T)


def test_first_loss_check(bench):
    same = {"eager": [2.5, 2.5], "graph": [2.5000001], "torch": [2.5, 2.5]}
    assert bench.first_loss_mismatch("lstm", same) is None
    off = {"eager": [2.5], "graph": [2.5005], "torch": [2.5]}  # 2e-4 relative
    why = bench.first_loss_mismatch("lstm", off)
    assert "graph 2.5005" in why and "torch's 2.5" in why and "eager" not in why.split(":", 2)[2]
    # without PyTorch, eager and graph are compared with each other
    assert "graph" in bench.first_loss_mismatch("lstm", {"eager": [2.5], "graph": [2.6]})
