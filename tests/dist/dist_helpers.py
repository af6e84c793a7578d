"""A small model and data for the DistOpt tests, plus SINGA's bucket rule in numpy."""

from __future__ import annotations

import numpy as np
from singa import autograd, layer, model, tensor

IN, HID, OUT = 12, 16, 5


class Net(model.Model):
    """linear -> ReLU -> linear -> softmax cross-entropy; ``mode`` names the DistOpt call."""

    def __init__(self):
        super().__init__()
        self.l1 = layer.Linear(HID)
        self.relu = layer.ReLU()
        self.l2 = layer.Linear(OUT)
        self.loss_fn = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.l2(self.relu(self.l1(x)))

    def train_one_batch(self, x, y, mode="backward_and_update", kw=None):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        getattr(self.optimizer, mode)(loss, **(kw or {}))
        return out, loss


def init_values(seed=7):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) * 0.5
            for s in ((IN, HID), (HID,), (HID, OUT), (OUT,))]


def params(net):
    return list(net.get_params().values())


def make(dev, optimizer, batch, graph=False, values=None):
    """A compiled Net with the given parameter values and its input tensors."""
    net = Net()
    tx = tensor.Tensor((batch, IN), dev)
    ty = tensor.Tensor((batch,), dev, tensor.int32)
    net.set_optimizer(optimizer)
    tx.copy_from_numpy(np.zeros((batch, IN), np.float32))
    net.compile([tx], is_train=True, use_graph=graph, sequential=False)
    for p, v in zip(params(net), values if values is not None else init_values()):
        p.copy_from_numpy(v)
    return net, tx, ty


def batches(steps, rows, seed=3):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((rows, IN)).astype(np.float32),
             rng.integers(0, OUT, rows).astype(np.int32)) for _ in range(steps)]


def step(net, tx, ty, x, y, mode="backward_and_update", kw=None):
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    net.train()
    net(tx, ty, mode, kw)


def values(net):
    return [tensor.to_numpy(p) for p in params(net)]


def grads_in_backward_order(net, tx, ty, x, y, vals):
    """(param index, gradient) pairs of one local forward/backward at ``vals``, eagerly."""
    for p, v in zip(params(net), vals):
        p.copy_from_numpy(v)
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    autograd.training = True
    loss = net.loss_fn(net.forward(tx), ty)
    index = {id(p): i for i, p in enumerate(params(net))}
    return [(index[id(p)], tensor.to_numpy(g)) for p, g in autograd.backward(loss)]


def buckets(sizes, threshold):
    """SINGA's grouping of items (in backward order) by element count."""
    out, small, acc = [], [], 0
    for i, n in enumerate(sizes):
        if n > threshold:
            out.append([i])
        else:
            small.append(i)
            acc += n
            if acc > threshold:
                out.append(small)
                small, acc = [], 0
    if small:
        out.append(small)
    return out
