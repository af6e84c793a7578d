"""The template backend: discovery, its own buffer type, sub-buffer aliasing, and the host
fallback (warned once per op, counted per op, random ops drawing real numbers)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from singa import autograd, layer, model, opt, tensor
from singa.device import get_device
from singa.errors import HostFallbackWarning
from singa_template.buffer import Buffer, View
from singa_template.kernels import KERNELS


@pytest.fixture(scope="module")
def dev():
    return get_device("template")


def test_discovered_through_its_entry_point_with_its_own_buffers(dev):
    assert dev.name == "template:0" and dev.host_fallback
    assert {k for k, e in dev.kernels.items() if not e[0].host_fallback} >= set(KERNELS)
    assert dev.kernels["GEMM"][1] and not dev.kernels["Add"][1]  # contiguous_inputs
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = tensor.from_numpy(a, dev)
    assert type(x.data.block.data) is Buffer
    view = dev.native(x.data)
    assert type(view) is View and not isinstance(view, np.ndarray)
    y = tensor.from_numpy(a.T.copy(), dev).T()  # a strided view: offset/strides in elements
    np.testing.assert_array_equal(tensor.to_numpy(x + y), 2 * a)


def test_sub_buffers_alias_their_parent(dev):
    alloc = dev.pool.allocator
    parent = alloc.alloc(1024)
    child = alloc.sub(parent, 256, 512)
    child.mem[:4] = b"\x01\x02\x03\x04"
    assert bytes(parent.mem[256:260]) == b"\x01\x02\x03\x04" and child.nbytes == 512
    alloc.zero(child, 512)
    assert bytes(parent.mem[256:768]) == bytes(512)


class _MLP(model.Model):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = layer.Linear(16), layer.Linear(3)
        self.relu = layer.ReLU()
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.l2(self.relu(self.l1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


def test_fallbacks_are_warned_once_per_op_and_counted_per_op(dev):
    """Every op in fallback_stats() was named by exactly one warning; counts grow by the same
    amount at every graph replay; native kernels never fall back."""
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((64, 8)).astype(np.float32)
    ys = (xs[:, 0] > 0).astype(np.int32) + (xs[:, 1] > 0).astype(np.int32)
    before = dev.fallback_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dev.SetRandSeed(0)
        m = _MLP()
        m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
        tx, ty = tensor.from_numpy(xs, dev), tensor.from_numpy(ys, dev)
        m.compile([tx], is_train=True, use_graph=True)
        autograd.training = True
        snapshots, losses = [], []
        for _ in range(30):
            _, loss = m(tx, ty)
            losses.append(float(tensor.to_numpy(loss)[0]))
            snapshots.append(dev.fallback_stats())
    fb = [w for w in caught if issubclass(w.category, HostFallbackWarning)]
    named = [n for w in fb for n in dev.fallback_stats() if f"operator {n!r}" in str(w.message)]
    new_ops = set(dev.fallback_stats()) - set(before)
    assert sorted(named) == sorted(new_ops), (named, new_ops)  # each new op warned once
    assert {"Gaussian", "SoftmaxCrossEntropy"} <= set(dev.fallback_stats())
    assert not set(KERNELS) & set(dev.fallback_stats())
    steps = [{k: b[k] - a.get(k, 0) for k in b} for a, b in zip(snapshots[1:], snapshots[2:])]
    assert all(s == steps[0] for s in steps) and sum(steps[0].values()) > 0
    assert dev.memory_stats()["host_fallback_calls"] == sum(dev.fallback_stats().values())
    assert losses[-1] < 0.5 * losses[0]  # weights drawn by the host generator, not zeros


def test_random_ops_fall_back_to_the_seeded_host_generator(dev):
    def draw(seed):
        dev.SetRandSeed(seed)
        t = tensor.Tensor((100_000,), dev)
        t.gaussian(1.0, 2.0)
        return tensor.to_numpy(t)

    a, b, c = draw(7), draw(7), draw(8)
    assert dev.rand_seed == 8
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert abs(a.mean() - 1.0) < 5 * 2.0 / np.sqrt(a.size)
    assert abs(a.std() / 2.0 - 1.0) < 0.02
