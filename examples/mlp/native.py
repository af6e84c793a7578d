"""An MLP written with autograd operations only (no Layer, no Model), as in SINGA's
autograd guide: matmul -> add_bias -> relu -> matmul -> add_bias -> softmax_cross_entropy,
trained with opt.SGD(0.05, 0.8) on the synthetic two-class data.

    python examples/mlp/native.py [-m 1000]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from synthetic import make_data  # noqa: I001  (local module, found through the path above)

from singa import autograd, device, opt, tensor
from singa.tensor import Tensor


def train(max_epoch=1000, log_every=100, seed=0, verbose=True):
    """Train and return ``(losses per epoch, final accuracy)``."""
    data, label = make_data(seed=seed)
    device.get_default_device().SetRandSeed(seed)
    # parameters: stores_grad so that backward yields their gradients
    w0 = Tensor(shape=(2, 3), requires_grad=True, stores_grad=True)
    w0.gaussian(0.0, 0.1)
    b0 = Tensor(shape=(3,), requires_grad=True, stores_grad=True)
    b0.set_value(0.0)
    w1 = Tensor(shape=(3, 2), requires_grad=True, stores_grad=True)
    w1.gaussian(0.0, 0.1)
    b1 = Tensor(shape=(2,), requires_grad=True, stores_grad=True)
    b1.set_value(0.0)

    inputs = Tensor(data=data, requires_grad=False)
    target = Tensor(data=label, dtype=tensor.int32, requires_grad=False)
    autograd.training = True
    sgd = opt.SGD(0.05, 0.8)  # lr, momentum

    losses = []
    for epoch in range(max_epoch):
        x = autograd.matmul(inputs, w0)
        x = autograd.add_bias(x, b0)
        x = autograd.relu(x)
        x = autograd.matmul(x, w1)
        x = autograd.add_bias(x, b1)
        loss = autograd.softmax_cross_entropy(x, target)
        sgd(loss)
        losses.append(float(tensor.to_numpy(loss)[0]))
        if verbose and (epoch % log_every == 0 or epoch == max_epoch - 1):
            print(f"epoch {epoch:4d}  training loss = {losses[-1]:.6f}", flush=True)
    accuracy = float((tensor.to_numpy(x).argmax(1) == label).mean())
    if verbose:
        print(f"final training accuracy = {accuracy:.4f}")
    return losses, accuracy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--max-epoch", type=int, default=1000, dest="max_epoch")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic data")
    args = parser.parse_args(argv)
    return train(args.max_epoch, seed=args.seed)


if __name__ == "__main__":
    main()
