"""Graph replay (BFS and serial) gives the numbers of eager execution, over several iterations.

Oracle: the same model trained eagerly from the same initial parameters, data and RNG seed.
Covers the seed CNN, a ResNet basic block with batch norm (running statistics included), and
a model with dropout (a new mask each iteration) under an exponentially decaying learning rate.
With rematerialisation (the scheduler recomputing dropped batch-norm, add and ReLU outputs) the
graph's losses, parameters and running statistics are bitwise those of eager execution.
"""

from __future__ import annotations

import numpy as np
import pytest
from _shared_models import Classifier
from singa import autograd, device, layer, opt, tensor
from singa.ops import OPS

STEPS = 4


class SeedCNN(Classifier):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(1, 4, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(4, 6, 3, padding=1, activation="RELU")
        self.pool1, self.pool2 = layer.MaxPool2d(2, 2), layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.linear1, self.linear2 = layer.Linear(16), layer.Linear(3)

    def forward(self, x):
        y = self.pool1(self.conv1(x))
        y = self.pool2(self.conv2(y))
        return self.linear2(autograd.relu(self.linear1(self.flatten(y))))


class ResBlock(Classifier):
    """conv-bn-relu-conv-bn + (1x1 conv-bn downsample) -> add -> relu -> pool -> linear."""

    def __init__(self):
        super().__init__()
        self.c1 = layer.Conv2d(3, 6, 3, stride=2, padding=1, bias=False)
        self.b1 = layer.BatchNorm2d(6)
        self.c2 = layer.Conv2d(6, 6, 3, padding=1, bias=False)
        self.b2 = layer.BatchNorm2d(6)
        self.cd = layer.Conv2d(3, 6, 1, stride=2, bias=False)
        self.bd = layer.BatchNorm2d(6)
        self.fc = layer.Linear(3)

    def forward(self, x):
        y = autograd.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        y = autograd.relu(autograd.add(y, self.bd(self.cd(x))))
        return self.fc(autograd.flatten(autograd.globalaveragepool(y)))


class TwoBlocks(Classifier):
    """A stem and two ResNet basic blocks with identity shortcuts: relu(bn(conv)) outputs kept
    for the backward pass, the pattern the scheduler rematerialises."""

    def __init__(self):
        super().__init__()
        self.c0, self.b0 = layer.Conv2d(3, 8, 3, padding=1, bias=False), layer.BatchNorm2d(8)
        self.convs = [layer.Conv2d(8, 8, 3, padding=1, bias=False) for _ in range(4)]
        self.bns = [layer.BatchNorm2d(8) for _ in range(4)]
        for i, (c, b) in enumerate(zip(self.convs, self.bns)):
            setattr(self, f"c{i + 1}", c)
            setattr(self, f"b{i + 1}", b)
        self.fc = layer.Linear(3)

    def forward(self, x):
        y = autograd.relu(self.b0(self.c0(x)))
        for i in (0, 2):
            z = autograd.relu(self.bns[i](self.convs[i](y)))
            z = self.bns[i + 1](self.convs[i + 1](z))
            y = autograd.relu(autograd.add(z, y))
        return self.fc(autograd.flatten(autograd.globalaveragepool(y)))


class DropoutMLP(Classifier):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = layer.Linear(12), layer.Linear(3)
        self.drop = layer.Dropout(0.3)

    def forward(self, x):
        return self.l2(self.drop(autograd.relu(self.l1(x))))


CASES = {
    "seed_cnn": (SeedCNN, (4, 1, 12, 12), lambda: opt.SGD(0.05, momentum=0.9,
                                                          weight_decay=1e-4)),
    "resnet_block": (ResBlock, (4, 3, 8, 8), lambda: opt.SGD(0.05, momentum=0.9)),
    "two_blocks": (TwoBlocks, (4, 3, 8, 8), lambda: opt.SGD(0.05, momentum=0.9,
                                                            weight_decay=1e-4)),
    "dropout_lr_schedule": (DropoutMLP, (6, 5), lambda: opt.SGD(
        opt.ExponentialDecay(0.2, 1, 0.7), momentum=0.5)),
}


def train(case, mode, init_states=None):
    cls, xshape, make_opt = CASES[case]
    dev = device.get_default_device()
    rng = np.random.default_rng(7)
    xs = [rng.standard_normal(xshape).astype(np.float32) for _ in range(STEPS)]
    ys = [rng.integers(0, 3, xshape[0]).astype(np.int32) for _ in range(STEPS)]
    m = cls()
    m.set_optimizer(make_opt())
    tx = tensor.Tensor(xshape, dev, tensor.float32)
    ty = tensor.Tensor((xshape[0],), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=mode != "eager", sequential=mode == "serial")
    if init_states is not None:
        m.set_states(init_states)
    start = {k: tensor.to_numpy(v).copy() for k, v in m.get_states().items()}
    dev.SetRandSeed(1234)
    losses = []
    for x, y in zip(xs, ys):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _out, loss = m(tx, ty)
        losses.append(float(tensor.to_numpy(loss)[0]))
    final = {k: tensor.to_numpy(v) for k, v in m.get_states().items()}
    return start, losses, final, m._graph


@pytest.mark.parametrize("case", list(CASES))
def test_graph_matches_eager(case):
    start, eager_losses, eager_final, _ = train(case, "eager")
    for mode in ("bfs", "serial"):
        _, losses, final, _ = train(case, mode, start)
        np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6,
                                   err_msg=f"{case} {mode} losses")
        assert set(final) == set(eager_final)
        for k in final:
            np.testing.assert_allclose(final[k], eager_final[k], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{case} {mode} {k}")
    # the run trained: the parameters moved and (for BN) the running statistics too
    assert any(not np.allclose(start[k], eager_final[k]) for k in start)
    if case == "resnet_block":
        assert not np.allclose(eager_final["b1.running_mean"], 0)


@pytest.mark.parametrize("recompute", ["1", "0"])
@pytest.mark.parametrize("case", ["resnet_block", "two_blocks", "dropout_lr_schedule"])
def test_rematerialized_graph_equals_eager_bitwise(case, recompute, monkeypatch):
    """Losses, parameters and BN running statistics: exactly eager's, every iteration."""
    monkeypatch.setenv("SINGA_GRAPH_RECOMPUTE", recompute)
    start, eager_losses, eager_final, _ = train(case, "eager")
    for mode in ("bfs", "serial"):
        _, losses, final, graph = train(case, mode, start)
        assert losses == eager_losses, f"{case} {mode}"
        for k in final:
            np.testing.assert_array_equal(final[k], eager_final[k], err_msg=f"{case} {mode} {k}")
        remats = {n.name for n in graph.plan.steps if n.remat}
        assert not any(OPS[name].random for name in remats)
        if recompute == "0":
            assert not remats
        elif case == "two_blocks":
            assert {"BatchNormTrain", "ReLU"} <= remats, f"{mode}: {remats}"
    if case != "dropout_lr_schedule":
        assert not np.allclose(eager_final["b1.running_mean"], 0)


@pytest.mark.parametrize("mode", ["bfs", "serial"])
def test_fused_graph_equals_unfused_bitwise(mode, monkeypatch):
    """The seed CNN's convolutions run with their ReLU, its pooling gradients with the ReLU's
    gradient and its hidden dense layer's bias with its ReLU, as fused kernels, and the
    optimizer's updates of each parameter as one
    compiled elementwise chain, where the device has them: every loss and parameter is
    exactly what the graph gives with fusion off (and, as above, close to eager)."""
    monkeypatch.setenv("SINGA_GRAPH_FUSE", "0")
    start, plain_losses, plain_final, plain = train("seed_cnn", mode)
    assert not any("+" in n.name or "[" in n.name for n in plain.plan.steps)
    monkeypatch.setenv("SINGA_GRAPH_FUSE", "1")
    _, losses, final, graph = train("seed_cnn", mode, start)
    fused = [n.name for n in graph.plan.steps if "+" in n.name]
    dev = device.get_default_device()
    convs = [name for name in ("Conv2d+ReLU+Pooling2d", "Conv2d+ReLU") if name in dev.kernels]
    available = convs[:1] + [name for name in ("Pooling2dBackward+ReLUBackward",)
                             if name in dev.kernels]
    available *= 2  # two conv layers, two poolings
    available += [name for name in ("Add+ReLU",) if name in dev.kernels]  # fc1's bias, ReLU
    assert sorted(fused) == sorted(available), fused
    chains = [n.name for n in graph.plan.steps if n.name.startswith("Elementwise[")]
    if dev.chain_compiler() is not None:  # SGD with momentum and weight decay, 8 parameters
        assert sum("Axpy,Axpy" in c for c in chains) >= 8, chains
    else:
        assert not chains
    # nodes taken into chains (a conv, its ReLU and pooling are one node where fused)
    merged = len(plain.plan.steps) - len(fused) - len(graph.plan.steps) - 2 * (convs[:1] == [
        "Conv2d+ReLU+Pooling2d"])
    assert merged >= len(chains) and (merged > 0) == bool(chains)
    assert losses == plain_losses
    for k in final:
        np.testing.assert_array_equal(final[k], plain_final[k], err_msg=k)
