"""Issue 15 items 7, 9, 10 and 15: training mistakes that used to give silent wrong results.

7: a float layer given an int input refuses it (it used to turn its parameters into int32
   zeros); 9: assigning ``opt.lr`` takes effect; 10: a graph-mode model called with another
   batch size raises GraphError; 15: a model on one device called with inputs on another
   refuses before moving anything, and ``model.to_device`` moves it with its optimizer state.
"""

from __future__ import annotations

import numpy as np
import pytest
from _shared_models import Tiny
from singa import device, layer, opt, tensor
from singa.errors import DeviceMismatchError, DtypeMismatchError, GraphError


# ---------------------------------------------------------------- item 7
def test_linear_refuses_int_input_and_keeps_its_params(cpu):
    fc = layer.Linear(3)
    fc(tensor.from_numpy(np.ones((2, 4), np.float32), cpu))
    w = tensor.to_numpy(fc.W).copy()
    x_int = tensor.from_numpy(np.ones((2, 4), np.uint8), cpu)
    with pytest.raises(DtypeMismatchError, match="int32.*as_type"):
        fc(x_int)
    assert fc.W.dtype == tensor.float32
    np.testing.assert_array_equal(tensor.to_numpy(fc.W), w)


@pytest.mark.parametrize("make", [lambda: layer.Linear(3), lambda: layer.Conv2d(2, 3),
                                  lambda: layer.BatchNorm2d(1)])
def test_new_float_layer_refuses_int_first_input(cpu, make):
    shape = (2, 4) if isinstance(make(), layer.Linear) else (1, 1, 4, 4)
    with pytest.raises(DtypeMismatchError, match="floating point"):
        make()(tensor.from_numpy(np.ones(shape, np.int32), cpu))


# ---------------------------------------------------------------- item 9
def _sgd_run(use_graph, assign):
    dev = device.get_default_device()
    g = np.random.default_rng(0)
    m = Tiny()
    sgd = opt.SGD(lr=0.1, momentum=0.0)
    m.set_optimizer(sgd)
    tx = tensor.from_numpy(g.standard_normal((4, 5)).astype(np.float32), dev)
    ty = tensor.from_numpy(np.array([0, 1, 2, 0], np.int32), dev)
    m.compile([tx], is_train=True, use_graph=use_graph)
    m.set_states({k: g.standard_normal(v.shape).astype(np.float32)
                  for k, v in sorted(m.get_states().items())})
    m.train()
    m(tx, ty)
    sgd.lr = assign
    before = {k: tensor.to_numpy(v).copy() for k, v in m.get_params().items()}
    m(tx, ty)
    after = {k: tensor.to_numpy(v).copy() for k, v in m.get_params().items()}
    return before, after


@pytest.mark.parametrize("use_graph", [False, True])
@pytest.mark.parametrize("assign", [0.0, "Constant"])
def test_assigning_lr_zero_stops_updates(use_graph, assign):
    before, after = _sgd_run(use_graph, opt.Constant(0.0) if assign == "Constant" else 0.0)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=k)


@pytest.mark.parametrize("use_graph", [False, True])
def test_assigned_lr_is_the_one_used(use_graph):
    """Oracle: the SGD step p -= lr g with lr = 0.1 versus 0.05: the update halves."""
    b1, a1 = _sgd_run(use_graph, 0.1)
    b2, a2 = _sgd_run(use_graph, 0.05)
    for k in b1:
        np.testing.assert_array_equal(b1[k], b2[k])
        np.testing.assert_allclose(a2[k] - b2[k], (a1[k] - b1[k]) / 2, rtol=1e-5, atol=1e-7)


def test_lr_rejects_garbage():
    with pytest.raises(TypeError, match="lr must be"):
        opt.SGD(0.1).lr = "fast"


# ---------------------------------------------------------------- item 10
def test_graph_mode_with_another_batch_size_raises(cpu):
    m = Tiny()
    m.set_optimizer(opt.SGD(0.1))
    tx = tensor.from_numpy(np.ones((4, 5), np.float32), cpu)
    ty = tensor.from_numpy(np.zeros(4, np.int32), cpu)
    m.compile([tx], is_train=True, use_graph=True)
    m.train()
    m(tx, ty)
    small_x = tensor.from_numpy(np.ones((3, 5), np.float32), cpu)
    small_y = tensor.from_numpy(np.zeros(3, np.int32), cpu)
    with pytest.raises(GraphError, match=r"batch size fixed.*graph\(False\)"):
        m(small_x, small_y)
    m.graph(False)  # the documented way out: eager accepts any batch size
    _, loss = m(small_x, small_y)
    assert np.isfinite(tensor.to_numpy(loss)).all()


# ---------------------------------------------------------------- item 15
def _other_device():
    from singa.device import create_cpu_device, get_default_device

    try:
        other = device.get_device("opencl")
    except Exception:  # noqa: BLE001  (no OpenCL runtime here: a second host device will do)
        other = None
    default = get_default_device()
    if other is None or other is default:
        if default is create_cpu_device():
            pytest.skip("needs a second device (install singa-opencl)")
        other = create_cpu_device()
    return default, other


def test_model_on_one_device_called_with_inputs_on_another_refuses():
    dev, other = _other_device()
    m = Tiny()
    sgd = opt.SGD(0.1, momentum=0.9)
    m.set_optimizer(sgd)
    tx = tensor.from_numpy(np.ones((4, 5), np.float32), dev)
    ty = tensor.from_numpy(np.zeros(4, np.int32), dev)
    m.compile([tx], is_train=True, use_graph=False)
    m.train()
    m(tx, ty)
    ox = tensor.from_numpy(np.ones((4, 5), np.float32), other)
    oy = tensor.from_numpy(np.zeros(4, np.int32), other)
    with pytest.raises(DeviceMismatchError, match=r"model.to_device"):
        m(ox, oy)
    assert all(p.device is dev for p in m.get_params().values())  # nothing was moved
    m.to_device(other)
    assert all(p.device is other for p in m.get_params().values())
    assert all(t.device is other for t in sgd.moments.values())
    _, loss = m(ox, oy)
    assert np.isfinite(tensor.to_numpy(loss)).all()
