"""The MLP with SINGA's Model API: Linear -> ReLU -> Linear, softmax cross-entropy loss.

Run directly, it trains on the synthetic two-class data (400 points, full batch)::

    python examples/mlp/model.py [-p float32|float16] [-g] [-m 1001]

``train_cnn.py mlp <data>`` reuses :class:`MLP` through :func:`create_model`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from singa import device, layer, model, opt, tensor

__all__ = ["MLP", "create_model"]

_UPDATES = {
    "plain": lambda o, loss, spars: o(loss),
    "half": lambda o, loss, spars: o.backward_and_update_half(loss),
    "partialUpdate": lambda o, loss, spars: o.backward_and_partial_update(loss),
    "sparseTopK": lambda o, loss, spars: o.backward_and_sparse_update(loss, topK=True,
                                                                      spars=spars),
    "sparseThreshold": lambda o, loss, spars: o.backward_and_sparse_update(loss, topK=False,
                                                                           spars=spars),
}


class MLP(model.Model):
    """Two dense layers; ``dimension`` 2 (inputs are (N, data_size) rows)."""

    def __init__(self, data_size=10, perceptron_size=100, num_classes=10):
        super().__init__()
        self.num_classes = num_classes
        self.dimension = 2
        self.data_size = data_size
        self.relu = layer.ReLU()
        self.linear1 = layer.Linear(perceptron_size)
        self.linear2 = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, inputs):
        return self.linear2(self.relu(self.linear1(inputs)))

    def train_one_batch(self, x, y, dist_option="plain", spars=None):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        # SINGA matched no branch for unknown options and silently skipped the update
        if dist_option not in _UPDATES:
            raise ValueError(f"dist_option must be one of {tuple(_UPDATES)}, got "
                             f"{dist_option!r}")
        _UPDATES[dist_option](self.optimizer, loss, spars)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def create_model(pretrained=False, **kwargs):
    """An :class:`MLP` (``data_size``, ``perceptron_size``, ``num_classes``)."""
    if pretrained:
        raise NotImplementedError("no pretrained MLP weights are shipped")
    return MLP(**kwargs)


_PRECISION = {"float32": (tensor.float32, np.float32), "float16": (tensor.float16, np.float16)}


def train(max_epoch=1001, precision="float32", graph=True, dev=None, seed=0, log_every=100,
          verbose=True):
    """Full-batch training on the synthetic data; returns ``(losses, final accuracy)``."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from synthetic import make_data

    dev = dev or device.get_default_device()
    dev.SetRandSeed(seed)
    data, label = make_data(seed=seed)
    singa_dtype, np_dtype = _PRECISION[precision]

    m = create_model(data_size=2, perceptron_size=100, num_classes=2)
    # keywords on purpose: SINGA's example passed SGD(0.1, 0.9, 1e-5), which sets the
    # dampening (the third positional argument), not the weight decay it meant
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9, weight_decay=1e-5, dtype=singa_dtype))
    tx = tensor.Tensor((len(data), 2), dev, singa_dtype)
    ty = tensor.Tensor((len(data),), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=graph, sequential=True)
    tx.copy_from_numpy(data.astype(np_dtype))
    ty.copy_from_numpy(label)

    losses = []
    t0 = time.perf_counter()
    for epoch in range(max_epoch):
        out, loss = m(tx, ty, "plain", None)
        losses.append(float(tensor.to_numpy(loss)[0]))
        if verbose and (epoch % log_every == 0 or epoch == max_epoch - 1):
            print(f"epoch {epoch:4d}  training loss = {losses[-1]:.6f}", flush=True)
    accuracy = float((tensor.to_numpy(out).argmax(1) == label).mean())
    if verbose:
        print(f"final training accuracy = {accuracy:.4f}  "
              f"({max_epoch} epochs in {time.perf_counter() - t0:.1f} s, "
              f"graph {'on' if graph else 'off'}, {precision})")
    return losses, accuracy


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train SINGA's MLP on synthetic 2-D data")
    parser.add_argument("-p", choices=list(_PRECISION), default="float32", dest="precision",
                        help="data type of the input and the parameters")
    parser.add_argument("-g", "--disable-graph", action="store_false", dest="graph",
                        help="run eagerly instead of recording and replaying the graph")
    parser.add_argument("-m", "--max-epoch", type=int, default=1001, dest="max_epoch")
    parser.add_argument("--device", default="cpu", help="cpu, opencl, cuda:0, ...")
    args = parser.parse_args(argv)
    return train(args.max_epoch, args.precision, args.graph, device.get_device(args.device))


if __name__ == "__main__":
    main()
