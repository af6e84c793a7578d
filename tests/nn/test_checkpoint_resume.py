"""Resuming from a checkpoint: 5 steps, save, a fresh model and optimizer load it, 5 more
steps, equal 10 uninterrupted steps bit for bit (parameters, BatchNorm statistics, momentum
buffers and the step counter), in eager and in graph mode, from zip and safetensors files."""

from __future__ import annotations

import numpy as np
import pytest
from _shared_models import Classifier
from singa import autograd, layer, opt, tensor
from singa.errors import CheckpointError


class Net(Classifier):
    """conv -> batch norm -> ReLU -> linear: parameters, buffers and every SGD code path."""

    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(1, 4, 3, padding=1)
        self.bn = layer.BatchNorm2d(4)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(3)

    def forward(self, x):
        return self.fc(self.flatten(autograd.relu(self.bn(self.conv(x)))))


BATCHES = [(np.random.default_rng(i).standard_normal((4, 1, 6, 6)).astype(np.float32),
            np.random.default_rng(100 + i).integers(0, 3, 4).astype(np.int32))
           for i in range(10)]


def _sgd():
    # an exponentially decaying lr: the schedule must resume from the restored step too
    return opt.SGD(lr=opt.ExponentialDecay(0.1, 3, 0.5), momentum=0.9, weight_decay=1e-3)


def _fresh(cpu, graph, seed):
    cpu.SetRandSeed(seed)  # another initialisation than the run it resumes: load must win
    m = Net()
    m.set_optimizer(_sgd())
    tx = tensor.Tensor((4, 1, 6, 6), cpu)
    ty = tensor.Tensor((4,), cpu, tensor.int32)
    m.compile([tx], is_train=True, use_graph=graph)
    return m, tx, ty


def _train(m, tx, ty, batches):
    m.train()
    for x, y in batches:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        m(tx, ty)


def _snapshot(m) -> dict:
    snap = {k: v.to_numpy().copy() for k, v in m.get_states().items()}
    states = m.optimizer.get_states()
    snap["step_counter"] = np.array(states["step_counter"])
    for k, v in states["moments"].items():
        snap["moments/" + k] = v.to_numpy().copy()
    return snap


@pytest.mark.parametrize("suffix", [".zip", ".safetensors"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_two_times_five_steps_equal_ten_bitwise(cpu, tmp_path, graph, suffix):
    if suffix == ".safetensors":
        pytest.importorskip("safetensors")
    whole, tx, ty = _fresh(cpu, graph, seed=1)
    _train(whole, tx, ty, BATCHES)
    expected = _snapshot(whole)

    first, tx, ty = _fresh(cpu, graph, seed=1)
    _train(first, tx, ty, BATCHES[:5])
    path = tmp_path / ("ck" + suffix)
    first.save_states(str(path), {"epoch": tensor.from_numpy(np.array([5], np.int32))})

    resumed, tx, ty = _fresh(cpu, graph, seed=2)
    aux = resumed.load_states(str(path))
    assert set(aux) == {"epoch"}  # optimizer state is restored, not handed back as aux
    assert resumed.optimizer.get_states()["step_counter"] == 5.0
    _train(resumed, tx, ty, BATCHES[5:])
    got = _snapshot(resumed)

    assert set(got) == set(expected) and len(expected) > 10
    for k in expected:
        np.testing.assert_array_equal(got[k], expected[k], err_msg=k, strict=True)


def test_without_the_optimizer_state_the_run_diverges(cpu, tmp_path):
    """The oracle above is not vacuous: dropping the optimizer state changes the result."""
    whole, tx, ty = _fresh(cpu, False, seed=1)
    _train(whole, tx, ty, BATCHES)
    first, tx, ty = _fresh(cpu, False, seed=1)
    _train(first, tx, ty, BATCHES[:5])
    first.save_states(str(tmp_path / "ck.zip"))
    resumed, tx, ty = _fresh(cpu, False, seed=2)
    resumed.load_states(str(tmp_path / "ck.zip"), load_optimizer=False)
    _train(resumed, tx, ty, BATCHES[5:])
    assert not np.array_equal(resumed.get_states()["fc.W"].to_numpy(),
                              whole.get_states()["fc.W"].to_numpy())


def test_checkpoint_of_another_optimizer_is_refused_with_the_fix(cpu, tmp_path):
    m, tx, ty = _fresh(cpu, False, seed=1)
    m.set_optimizer(opt.Adam(lr=0.01))
    _train(m, tx, ty, BATCHES[:1])
    m.save_states(str(tmp_path / "adam.zip"))
    other, _, _ = _fresh(cpu, False, seed=2)
    before = other.get_states()["fc.W"].to_numpy().copy()
    with pytest.raises(CheckpointError, match=r"\['m', 'v'\].*load_optimizer=False"):
        other.load_states(str(tmp_path / "adam.zip"))
    # refused before anything changed
    np.testing.assert_array_equal(other.get_states()["fc.W"].to_numpy(), before)
    other.load_states(str(tmp_path / "adam.zip"), load_optimizer=False)
    np.testing.assert_array_equal(other.get_states()["fc.W"].to_numpy(),
                                  m.get_states()["fc.W"].to_numpy())
