"""Graph replay overhead: a recorded chain of tiny ops, and a graph-mode model step.

    python benchmarks/graph_replay.py

Reports microseconds per ``Device.RunGraph`` of 100 recorded elementwise adds on 1x1 tensors
(SINGA's unscoped calls: the per-node cost of the replay loop) and per ``train_one_batch``
replay of a small graph-mode MLP (batch 4, 8 -> 16 -> 3, momentum SGD: the Model's own graph,
with its input checks). Each is the best of 7 repeats of 2000 calls; the machine is shared and
noisy, so compare runs made one after the other.
"""

from __future__ import annotations

import timeit

import numpy as np
from singa import autograd, device, layer, model, opt, tensor


class MLP(model.Model):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = layer.Linear(16), layer.Linear(3)

    def forward(self, x):
        return self.l2(autograd.relu(self.l1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


def best_us(fn, number=2000, repeat=7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main() -> None:
    dev = device.get_default_device()
    a = tensor.from_numpy(np.ones((1, 1), np.float32))
    b = tensor.from_numpy(np.ones((1, 1), np.float32))
    dev.EnableGraph(True)
    c = a
    for _ in range(100):
        c = c + b
    dev.EnableGraph(False)
    dev.RunGraph()
    chain = best_us(dev.RunGraph)

    x = tensor.from_numpy(np.ones((4, 8), np.float32))
    y = tensor.from_numpy(np.zeros(4, np.int32))
    m = MLP()
    m.set_optimizer(opt.SGD(lr=0.01, momentum=0.9))
    m.compile([x], is_train=True, use_graph=True)
    m.train()
    m(x, y)
    step = best_us(lambda: m(x, y))
    print(f"{'RunGraph of 100 recorded 1x1 adds':<45} {chain:8.1f} us")
    print(f"{'graph-mode MLP train_one_batch replay':<45} {step:8.1f} us")


if __name__ == "__main__":
    main()
