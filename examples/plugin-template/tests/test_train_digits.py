"""The seed CNN trains on scikit-learn's digits to >= 95% validation accuracy in graph mode on
the template device: five native kernels, everything else (convolution, pooling, softmax,
random initialisation, the optimizer's ops) through the host fallback. Slow (minutes)."""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, data, layer, model, opt, tensor
from singa.device import get_device

pytest.importorskip("sklearn")


class CNN(model.Model):
    """SINGA's MNIST CNN: conv5x5(20)-pool-conv5x5(50)-pool-linear(500)-linear(10)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = layer.Conv2d(1, 20, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=0, activation="RELU")
        self.pool1, self.pool2 = layer.MaxPool2d(2, 2), layer.MaxPool2d(2, 2)
        self.linear1, self.linear2 = layer.Linear(500), layer.Linear(num_classes)
        self.flatten, self.relu = layer.Flatten(), layer.ReLU()
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.pool2(self.conv2(self.pool1(self.conv1(x))))
        return self.linear2(self.relu(self.linear1(self.flatten(y))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss(out, y)
        self.optimizer(loss)
        return out, loss


@pytest.mark.slow
def test_seed_cnn_reaches_95_percent_on_digits_in_graph_mode():
    dev = get_device("template")
    dev.SetRandSeed(0)
    train_x, train_y, val_x, val_y = data.load_digits(size=28)
    batch, rng = 32, np.random.default_rng(0)
    net = CNN()
    net.set_optimizer(opt.SGD(lr=0.02, momentum=0.9, weight_decay=1e-5))
    tx = tensor.Tensor((batch, 1, 28, 28), dev)
    ty = tensor.Tensor((batch,), dev, tensor.int32)
    net.compile([tx], is_train=True, use_graph=True, sequential=False)
    for _epoch in range(10):
        net.train()
        autograd.training = True
        perm = rng.permutation(len(train_x))
        for b in range(len(train_x) // batch):
            idx = perm[b * batch:(b + 1) * batch]
            tx.copy_from_numpy(train_x[idx])
            ty.copy_from_numpy(train_y[idx])
            net(tx, ty)
    net.eval()
    correct = 0
    for start in range(0, len(val_x), batch):  # the last batch padded with zeros
        x = val_x[start:start + batch]
        real = len(x)
        tx.copy_from_numpy(np.concatenate([x, np.zeros((batch - real, *x.shape[1:]), x.dtype)]))
        logits = tensor.to_numpy(net(tx))[:real]
        correct += int((logits.argmax(1) == val_y[start:start + real]).sum())
    accuracy = correct / len(val_x)
    print(f"validation accuracy on template:0: {accuracy:.4f}; fallbacks {dev.fallback_stats()}")
    assert accuracy >= 0.95
    # what ran on the host: the initialisers' draws, convolution and pooling among them
    assert {"Gaussian", "Conv2d", "Pooling2d"} <= set(dev.fallback_stats())
