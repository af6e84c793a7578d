"""Which graph-mode plans the ``cuda.graphs`` stage captures, decided on real plans recorded on
the CPU (the decision reads only the plan's calls). The capture itself needs a GPU: the
``test_capture_gpu.py`` tests (captured training bitwise the uncaptured one, memory kept from other
tensors, plans that stay uncaptured)."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, device, layer, model, opt, tensor
from singa.graph import Graph

from singa_cuda import capture


def make_net(conv: bool = False, dropout: bool = False):
    """A small trainable model: [Conv2d, BatchNorm2d, ReLU, MaxPool2d, Flatten,] Linear(32),
    ReLU, [Dropout,] Linear(5), softmax cross-entropy (``test_capture_gpu.py`` trains it too)."""

    class Net(model.Model):
        def __init__(self):
            super().__init__()
            if conv:
                self.conv = layer.Conv2d(8, 3, padding=1)
                self.bn = layer.BatchNorm2d(8)
                self.pool = layer.MaxPool2d(2, 2)
                self.flat = layer.Flatten()
            self.fc1, self.fc2 = layer.Linear(32), layer.Linear(5)
            self.drop = layer.Dropout(0.3) if dropout else None
            self.loss = layer.SoftMaxCrossEntropy()

        def forward(self, x):
            if conv:
                x = self.flat(self.pool(autograd.relu(self.bn(self.conv(x)))))
            h = autograd.relu(self.fc1(x))
            if self.drop is not None:
                h = self.drop(h)
            return self.fc2(h)

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = self.loss(out, y)
            self.optimizer(loss)
            return out, loss

    return Net()


def _plan(dropout=False):
    m = make_net(dropout=dropout)
    m.set_optimizer(opt.SGD(0.1, momentum=0.9))
    x = tensor.from_numpy(np.random.default_rng(0).random((4, 5), np.float32))
    y = tensor.from_numpy(np.array([0, 1, 2, 4], np.int32))
    m.compile([x], is_train=True, use_graph=True)
    m(x, y)
    return m._graph.plan


def test_a_training_step_is_one_run_of_kernels_then_its_sync():
    plan = _plan()
    segs, why = capture.segments(plan.calls)
    assert why == ""
    assert [kind for kind, _ in segs] == ["kernels", "sync"]
    assert segs[0][1] == plan.calls[:-1] and segs[1][1] is plan.calls[-1]
    assert plan.calls[-1][4].name == capture.SYNC


def test_random_ops_keep_a_plan_uncaptured():
    segs, why = capture.segments(_plan(dropout=True).calls)
    assert segs == [] and "'Bernoulli'" in why and "repeat its draws" in why


def _recorded(*steps):
    """A plan of ``steps``: ("op", name) kernel calls of Add on the CPU, ("host", name) plain
    functions, ("sync",) a Device.Sync."""
    dev = device.get_default_device()
    a = tensor.from_numpy(np.ones(4, np.float32))
    g = Graph(dev)
    with dev.record(g):
        for step in steps:
            if step[0] == "op":
                a = a + 1.0
            elif step[0] == "host":
                dev.exec(lambda: None, [a.data.block], [a.data.block], step[1])
            else:
                dev.Sync()
    return g.analyze(serial=True)


def test_a_sync_in_the_middle_splits_the_capture():
    plan = _recorded(("op",), ("op",), ("sync",), ("op",))
    segs, _ = capture.segments(plan.calls)
    assert [(kind, len(item) if kind == "kernels" else 1) for kind, item in segs] == [
        ("kernels", 2), ("sync", 1), ("kernels", 1)]


def test_host_nodes_keep_a_plan_uncaptured():
    plan = _recorded(("op",), ("host", "Dist.AllReduce"), ("op",))
    segs, why = capture.segments(plan.calls)
    assert segs == [] and "'Dist.AllReduce' runs host code" in why
    assert capture.segments(_recorded(("sync",)).calls) == ([], "no kernel calls")


def test_the_stage_is_off_by_default_and_never_wraps_a_profiled_run(monkeypatch):
    plan = _plan()

    def replay():
        pass

    monkeypatch.delenv("SINGA_CUDA_GRAPHS", raising=False)
    assert capture.around_replay(plan, replay, False) is replay
    monkeypatch.setenv("SINGA_CUDA_GRAPHS", "1")
    assert capture.around_replay(plan, replay, True) is replay
    wrapped = capture.around_replay(plan, replay, False)
    assert isinstance(wrapped, capture.CapturedReplay) and wrapped.state == "warm-up"
    assert plan.extras[capture.STAGE_NAME] is wrapped and wrapped.release in plan.on_release
    dropout = _plan(dropout=True)
    assert capture.around_replay(dropout, replay, False) is replay
    assert dropout.extras[capture.STAGE_NAME].state == "uncapturable"


@pytest.mark.parametrize("raw", ["2", "yes please"])
def test_a_bad_setting_is_a_config_error(monkeypatch, raw):
    from singa.errors import ConfigError

    monkeypatch.setenv("SINGA_CUDA_GRAPHS", raw)
    with pytest.raises(ConfigError, match="SINGA_CUDA_GRAPHS"):
        capture.around_replay(_plan(), lambda: None, False)
