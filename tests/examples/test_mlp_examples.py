"""examples/mlp: the operation-only MLP and the Model-API MLP on the synthetic 2-D data."""

from __future__ import annotations

import numpy as np
import pytest
from examples_support import load_example


@pytest.fixture(scope="module")
def native():
    return load_example("mlp/native.py", "singa_example_mlp_native")


@pytest.fixture(scope="module")
def mlp_model():
    return load_example("mlp/model.py", "singa_example_mlp_model_test")


def test_synthetic_data_is_singas():
    synthetic = load_example("mlp/synthetic.py", "synthetic")
    x, y = synthetic.make_data(seed=5)
    assert x.shape == (400, 2) and x.dtype == np.float32 and y.dtype == np.int32
    assert np.all(np.abs(x[:, 0]) <= 1)
    np.testing.assert_array_equal(y, (x[:, 1] > 5 * x[:, 0] + 1).astype(np.int32))
    assert 0.3 < y.mean() < 0.7


def test_native_mlp_loss_falls(native, capsys):
    losses, acc = native.train(max_epoch=400, log_every=100)
    out = capsys.readouterr().out
    assert "training loss" in out and "final training accuracy" in out
    assert losses[0] > 0.6  # ln 2 at the start: the two classes are balanced
    assert losses[-1] < losses[0] / 4
    assert np.mean(losses[-50:]) < np.mean(losses[100:150])
    assert acc > 0.95


def test_model_mlp_graph_and_eager_agree_and_learn(mlp_model):
    g_losses, g_acc = mlp_model.train(max_epoch=150, graph=True, verbose=False)
    e_losses, e_acc = mlp_model.train(max_epoch=150, graph=False, verbose=False)
    np.testing.assert_allclose(g_losses, e_losses, rtol=1e-5, atol=1e-6)
    assert g_losses[-1] < g_losses[0] / 5
    assert g_acc > 0.95 and g_acc == e_acc


def test_model_mlp_cli(mlp_model, capsys):
    mlp_model.main(["-m", "101", "-g"])
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "training loss" in ln]
    values = [float(ln.split("=")[1]) for ln in lines]
    assert len(values) == 2 and values[1] < values[0]
    assert "final training accuracy" in out and "graph off" in out


def test_unknown_dist_option_is_an_error(mlp_model):
    from singa import device, opt, tensor

    m = mlp_model.create_model(data_size=2, num_classes=2)
    m.set_optimizer(opt.SGD(0.1))
    tx = tensor.Tensor((4, 2), device.get_default_device())
    ty = tensor.Tensor((4,), device.get_default_device(), tensor.int32)
    m.compile([tx], is_train=True, use_graph=False)
    with pytest.raises(ValueError, match="dist_option"):
        m(tx, ty, "fp32", None)
