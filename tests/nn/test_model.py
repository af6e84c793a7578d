"""``singa.model.Model``: compile, train_one_batch with and without the graph (BFS and serial),
train/eval, graph(), set_optimizer; training checked against a numpy MLP with the same SGD."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, layer, model, opt, tensor
from singa.device import get_default_device
from singa.tensor import Tensor

LR, MOMENTUM, WD = 0.05, 0.9, 1e-3
ITERS = 6


class MLP(model.Model):
    def __init__(self, hidden=8, num_classes=3):
        super().__init__()
        self.linear1 = layer.Linear(hidden)
        self.relu = layer.ReLU()
        self.linear2 = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.linear2(self.relu(self.linear1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


class NumpyMLP:
    """The same network and SGD (momentum, weight decay) written out in numpy (float64)."""

    def __init__(self, params):
        self.p = {k: v.astype(np.float64) for k, v in params.items()}
        self.buf = {k: np.zeros_like(v) for k, v in self.p.items()}

    def train_one_batch(self, x, y):
        W0, b0, W1, b1 = (self.p[k] for k in ("linear1.W", "linear1.b", "linear2.W",
                                              "linear2.b"))
        h = x @ W0 + b0
        a = np.maximum(h, 0)
        out = a @ W1 + b1
        z = out - out.max(1, keepdims=True)
        prob = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        n = x.shape[0]
        t = np.eye(out.shape[1])[y]
        loss = -(t * np.log(prob)).sum() / n
        dout = (prob - t) / n
        grads = {"linear2.W": a.T @ dout, "linear2.b": dout.sum(0)}
        da = dout @ W1.T * (h > 0)
        grads["linear1.W"] = x.T @ da
        grads["linear1.b"] = da.sum(0)
        for k, g in grads.items():
            g = g + WD * self.p[k]
            self.buf[k] = MOMENTUM * self.buf[k] + g
            self.p[k] = self.p[k] - LR * self.buf[k]
        return out, loss


def _data(rng, n=16, d=5, c=3):
    xs = [rng.standard_normal((n, d)).astype(np.float32) for _ in range(ITERS)]
    ys = [rng.integers(0, c, n).astype(np.int32) for _ in range(ITERS)]
    return xs, ys


def _fresh_device_graph():
    dev = get_default_device()
    dev.EnableGraph(False)
    dev.ResetGraph()
    return dev


@pytest.mark.parametrize("use_graph,sequential", [(False, False), (True, False), (True, True)])
def test_mlp_training_matches_numpy_reference(use_graph, sequential, rng):
    dev = _fresh_device_graph()
    xs, ys = _data(rng)
    m = MLP()
    m.set_optimizer(opt.SGD(LR, momentum=MOMENTUM, weight_decay=WD))
    tx = Tensor((16, 5), dev, tensor.float32)
    ty = Tensor((16,), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=use_graph, sequential=sequential)
    ref = NumpyMLP({k: v.to_numpy() for k, v in m.get_params().items()})
    assert autograd.training and m.training
    results = None
    for x, y in zip(xs, ys):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        out, loss = m(tx, ty)
        if use_graph:  # replay returns the very same result tensors
            assert results is None or (out is results[0] and loss is results[1])
            results = (out, loss)
        np_out, np_loss = ref.train_one_batch(x.astype(np.float64), y)
        np.testing.assert_allclose(out.to_numpy(), np_out, rtol=1e-4, atol=1e-5)
        assert tensor.to_numpy(loss)[0] == pytest.approx(np_loss, rel=1e-4, abs=1e-6)
    for k, v in m.get_params().items():
        np.testing.assert_allclose(v.to_numpy(), ref.p[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_graph_bfs_serial_and_eager_agree_exactly(rng):
    """Same initial parameters and data: the three execution modes give identical numbers."""
    xs, ys = _data(rng)
    finals = []
    init = None
    for use_graph, sequential in [(False, False), (True, False), (True, True)]:
        dev = _fresh_device_graph()
        m = MLP()
        m.set_optimizer(opt.SGD(LR, momentum=MOMENTUM, weight_decay=WD))
        tx, ty = Tensor((16, 5), dev), Tensor((16,), dev, tensor.int32)
        m.compile([tx], is_train=True, use_graph=use_graph, sequential=sequential)
        if init is None:
            init = {k: v.to_numpy() for k, v in m.get_params().items()}
        m.set_params(init)
        for x, y in zip(xs, ys):
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            m(tx, ty)
        finals.append({k: v.to_numpy() for k, v in m.get_params().items()})
    for other in finals[1:]:
        for k in finals[0]:
            np.testing.assert_array_equal(other[k], finals[0][k], err_msg=k)


def test_compile_initialises_lazily_without_running_forward():
    class Net(model.Model):
        def __init__(self):
            super().__init__()
            self.conv = layer.Conv2d(2, 3, padding=1)
            self.bn = layer.BatchNorm2d()

        def forward(self, x):
            return self.bn(self.conv(x))

    m = Net()
    assert m.get_states() == {}
    x = tensor.PlaceHolder((2, 1, 4, 4))
    autograd.training = True
    m.compile([x], is_train=False, use_graph=True)
    assert set(m.get_states()) == {"conv.W", "conv.b", "bn.scale", "bn.bias",
                                   "bn.running_mean", "bn.running_var"}
    # the probe forward was discarded: BN statistics untouched
    np.testing.assert_array_equal(m.bn.running_mean.to_numpy(), 0.0)
    np.testing.assert_array_equal(m.bn.running_var.to_numpy(), 1.0)
    assert not autograd.training and not m.training and m.graph_mode


def test_compile_rejects_non_tensor_inputs():
    with pytest.raises(TypeError, match="list of Tensors"):
        MLP().compile(np.zeros((2, 5)))


def test_eval_runs_forward_and_is_never_buffered(rng):
    dev = _fresh_device_graph()
    m = MLP()
    m.set_optimizer(opt.SGD(0.1))
    tx = Tensor((4, 5), dev)
    m.compile([tx], is_train=True, use_graph=True)
    m.eval()
    assert not autograd.training
    x = rng.standard_normal((4, 5)).astype(np.float32)
    tx.copy_from_numpy(x)
    out = m(tx)
    p = {k: v.to_numpy() for k, v in m.get_params().items()}
    want = np.maximum(x @ p["linear1.W"] + p["linear1.b"], 0) @ p["linear2.W"] + p["linear2.b"]
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-6)
    x2 = rng.standard_normal((4, 5)).astype(np.float32)
    tx.copy_from_numpy(x2)
    out2 = m(tx)  # a new forward, not a replay
    assert out2 is not out
    want2 = np.maximum(x2 @ p["linear1.W"] + p["linear1.b"], 0) @ p["linear2.W"] \
        + p["linear2.b"]
    np.testing.assert_allclose(out2.to_numpy(), want2, rtol=1e-5, atol=1e-6)
    m.train()
    assert autograd.training and m.training


def test_graph_method_switches_modes_and_rerecords(rng):
    dev = _fresh_device_graph()
    xs, ys = _data(rng)
    m = MLP()
    m.set_optimizer(opt.SGD(LR, momentum=MOMENTUM, weight_decay=WD))
    tx, ty = Tensor((16, 5), dev), Tensor((16,), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=True)
    ref = NumpyMLP({k: v.to_numpy() for k, v in m.get_params().items()})
    modes = [(True, False), (True, False), (False, False), (True, True), (True, True),
             (False, False)]
    for (x, y), (mode, seq) in zip(zip(xs, ys), modes):
        m.graph(mode, seq)
        assert m.graph_mode == mode and m.sequential == seq
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        m(tx, ty)
        ref.train_one_batch(x.astype(np.float64), y)
    for k, v in m.get_params().items():
        np.testing.assert_allclose(v.to_numpy(), ref.p[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_graph_replay_sees_schedule_changes(rng):
    """The learning rate lives in a device tensor updated by graph ops: a decaying schedule
    keeps decaying across replays, exactly as in eager mode."""
    xs, ys = _data(rng)
    finals = []
    for use_graph in (False, True):
        dev = _fresh_device_graph()
        m = MLP()
        sched = opt.ExponentialDecay(0.2, 1, 0.5)
        m.set_optimizer(opt.SGD(sched, momentum=0.5))
        tx, ty = Tensor((16, 5), dev), Tensor((16,), dev, tensor.int32)
        m.compile([tx], is_train=True, use_graph=use_graph)
        m.set_params({k: np.random.default_rng(1).standard_normal(v.shape).astype(np.float32)
                      * 0.3 for k, v in m.get_params().items()})
        for x, y in zip(xs, ys):
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            m(tx, ty)
        np.testing.assert_allclose(m.optimizer.lr_value.to_numpy(), [0.2 * 0.5 ** ITERS])
        finals.append({k: v.to_numpy() for k, v in m.get_params().items()})
    for k in finals[0]:
        np.testing.assert_allclose(finals[1][k], finals[0][k], rtol=1e-6, err_msg=k)


def _recorded_mlp(rng):
    """An MLP in graph mode whose first training step has been recorded: (model, x, y)."""
    dev = _fresh_device_graph()
    xs, ys = _data(rng)
    m = MLP()
    m.set_optimizer(opt.SGD(0.1))
    tx, ty = Tensor((16, 5), dev), Tensor((16,), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=True)
    tx.copy_from_numpy(xs[0])
    ty.copy_from_numpy(ys[0])
    m(tx, ty)  # records
    return m, tx, ty


def test_graph_replay_sees_a_hyper_parameter_set_by_the_user(rng):
    m, tx, ty = _recorded_mlp(rng)
    m.optimizer.hyper("lr").set_value(0.0)
    before = {k: v.to_numpy() for k, v in m.get_params().items()}
    m(tx, ty)  # replay with lr = 0: nothing moves
    for k, v in m.get_params().items():
        np.testing.assert_array_equal(v.to_numpy(), before[k])


def test_conv_bn_model_graph_matches_eager(rng):
    class CNN(model.Model):
        def __init__(self):
            super().__init__()
            self.conv = layer.Conv2d(3, 3, padding=1, activation="RELU")
            self.bn = layer.BatchNorm2d()
            self.pool = layer.MaxPool2d(2)
            self.flat = layer.Flatten()
            self.fc = layer.Linear(2)
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, x):
            return self.fc(self.flat(self.pool(self.bn(self.conv(x)))))

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss(out, y)
            self.optimizer(loss)
            return out, loss

    xs = [rng.standard_normal((4, 1, 4, 4)).astype(np.float32) for _ in range(4)]
    ys = [rng.integers(0, 2, 4).astype(np.int32) for _ in range(4)]
    finals, init = [], None
    for use_graph, seq in [(False, False), (True, False), (True, True)]:
        dev = _fresh_device_graph()
        m = CNN()
        m.set_optimizer(opt.SGD(0.1, momentum=0.9))
        tx, ty = Tensor((4, 1, 4, 4), dev), Tensor((4,), dev, tensor.int32)
        m.compile([tx], is_train=True, use_graph=use_graph, sequential=seq)
        if init is None:
            init = {k: v.to_numpy() for k, v in m.get_states().items()}
        m.set_states(init)
        for x, y in zip(xs, ys):
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            m(tx, ty)
        finals.append({k: v.to_numpy() for k, v in m.get_states().items()})
    assert not np.array_equal(finals[0]["bn.running_mean"], init["bn.running_mean"])
    for other in finals[1:]:
        for k in finals[0]:
            np.testing.assert_allclose(other[k], finals[0][k], rtol=1e-6, atol=1e-7,
                                       err_msg=k)


def _train(models, xs, ys, use_graph):
    dev = _fresh_device_graph()
    txs = []
    for m in models:
        m.set_optimizer(opt.SGD(LR, momentum=MOMENTUM))
        tx, ty = Tensor((16, 5), dev), Tensor((16,), dev, tensor.int32)
        m.compile([tx], is_train=True, use_graph=use_graph)
        txs.append((tx, ty))
    for x, y in zip(xs, ys):
        for m, (tx, ty) in zip(models, txs):
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            m(tx, ty)
    return [{k: v.to_numpy() for k, v in m.get_params().items()} for m in models]


def test_two_graph_models_on_one_device_do_not_interfere(rng):
    """Each model replays only its own graph (a GAN trains two models on one device)."""
    xs, ys = _data(rng)
    a, b = MLP(), MLP(hidden=4)
    eager = _train([a, b], xs, ys, use_graph=False)
    a2, b2 = MLP(), MLP(hidden=4)
    a2.compile([Tensor((16, 5))])
    b2.compile([Tensor((16, 5))])
    # same starting point as the eager pair
    a2.set_params({k: v for k, v in _initial(a).items()})
    b2.set_params({k: v for k, v in _initial(b).items()})
    graph = _train([a2, b2], xs, ys, use_graph=True)
    for e, g in zip(eager, graph):
        for k in e:
            np.testing.assert_allclose(g[k], e[k], rtol=1e-5, atol=1e-6, err_msg=k)


_INITIAL: dict = {}


def _initial(m):
    return _INITIAL[id(m)]


@pytest.fixture(autouse=True)
def _record_initial_params(monkeypatch):
    """Remember each model's parameters right after compile (for replays from that point)."""
    orig = model.Model.compile

    def compile_and_record(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        if id(self) not in _INITIAL:
            _INITIAL[id(self)] = {k: v.to_numpy() for k, v in self.get_params().items()}

    monkeypatch.setattr(model.Model, "compile", compile_and_record)
    yield
    _INITIAL.clear()


def test_compiling_another_model_keeps_a_recorded_graph(rng):
    m, tx, ty = _recorded_mlp(rng)
    dev = tx.device
    MLP().compile([Tensor((2, 5), dev)])  # its probe forward must not touch m's graph
    before = m.linear1.W.to_numpy()
    m(tx, ty)
    assert not np.array_equal(m.linear1.W.to_numpy(), before)


def test_replay_warns_when_called_with_different_tensors(rng):
    dev = _fresh_device_graph()
    m = MLP()
    m.set_optimizer(opt.SGD(0.1))
    tx, ty = Tensor((16, 5), dev), Tensor((16,), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=True)
    m(tx, ty)
    with pytest.warns(UserWarning, match="placeholders"):
        m(Tensor((16, 5), dev), ty)


def test_nested_train_one_batch_records_once(rng):
    class Base(MLP):
        pass

    class Child(Base):
        def train_one_batch(self, x, y):
            out, loss = super().train_one_batch(x, y)
            return out, loss

    xs, ys = _data(rng)
    finals = []
    for use_graph in (False, True):
        dev = _fresh_device_graph()
        m = Child()
        m.set_optimizer(opt.SGD(0.1))
        tx, ty = Tensor((16, 5), dev), Tensor((16,), dev, tensor.int32)
        m.compile([tx], is_train=True, use_graph=use_graph)
        m.set_params(_initial(m) if not finals else finals[0][1])
        start = {k: v.to_numpy() for k, v in m.get_params().items()}
        for x, y in zip(xs[:3], ys[:3]):
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            m(tx, ty)
        finals.append(({k: v.to_numpy() for k, v in m.get_params().items()}, start))
    for k in finals[0][0]:
        np.testing.assert_allclose(finals[1][0][k], finals[0][0][k], rtol=1e-5, atol=1e-6)


def test_dropout_draws_a_new_mask_at_every_replay():
    class Drop(model.Model):
        def __init__(self):
            super().__init__()
            self.fc = layer.Linear(1)
            self.drop = layer.Dropout(0.5)

        def forward(self, x):
            return self.fc(self.drop(x))

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = autograd.mse_loss(out, y)
            self.optimizer(loss)
            return out, loss

    dev = _fresh_device_graph()
    m = Drop()
    m.set_optimizer(opt.SGD(0.0))
    tx, ty = Tensor((64, 8), dev).set_value(1.0), Tensor((64, 1), dev)
    m.compile([tx], is_train=True, use_graph=True)
    outs = []
    for _ in range(3):
        out, _ = m(tx, ty)
        outs.append(out.to_numpy().copy())
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[1], outs[2])
