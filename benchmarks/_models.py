"""The benchmark models, defined identically for SINGA and PyTorch.

MLP 784-512-512-10; the seed CNN (Conv 20x5x5 -> pool -> Conv 50x5x5 -> pool -> 500 -> 10);
CIFAR ResNet-18 (3x3 stem, four stages of two BasicBlocks, 64..512 channels, global average
pool). All train with SGD(lr=0.05, momentum=0.9, weight_decay=1e-5) and softmax cross entropy.
"""

from __future__ import annotations

import numpy as np
from singa import autograd, layer, model, opt

LR, MOMENTUM, WD = 0.05, 0.9, 1e-5

SHAPES = {  # name -> (input shape without batch, classes)
    "mlp": ((784,), 10),
    "cnn": ((1, 28, 28), 10),
    "resnet18": ((3, 32, 32), 10),
}


class _Trainable(model.Model):
    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


class MLP(_Trainable):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = layer.Linear(512), layer.Linear(512), layer.Linear(10)

    def forward(self, x):
        x = autograd.relu(self.l1(x))
        x = autograd.relu(self.l2(x))
        return self.l3(x)


class CNN(_Trainable):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(1, 20, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=0, activation="RELU")
        self.pool1, self.pool2 = layer.MaxPool2d(2, 2), layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.linear1, self.linear2 = layer.Linear(500), layer.Linear(10)

    def forward(self, x):
        y = self.pool1(self.conv1(x))
        y = self.pool2(self.conv2(y))
        y = autograd.relu(self.linear1(self.flatten(y)))
        return self.linear2(y)


class BasicBlock(layer.Layer):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = layer.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d(cout)
        self.conv2 = layer.Conv2d(cout, cout, 3, stride=1, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d(cout)
        self.down = stride != 1 or cin != cout
        if self.down:
            self.conv_d = layer.Conv2d(cin, cout, 1, stride=stride, bias=False)
            self.bn_d = layer.BatchNorm2d(cout)

    def forward(self, x):
        y = autograd.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = self.bn_d(self.conv_d(x)) if self.down else x
        return autograd.relu(autograd.add(y, s))


class ResNet18(_Trainable):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(3, 64, 3, padding=1, bias=False)
        self.bn = layer.BatchNorm2d(64)
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.register_layers(*blocks)
        self.blocks = blocks
        self.fc = layer.Linear(10)

    def forward(self, x):
        y = autograd.relu(self.bn(self.conv(x)))
        for b in self.blocks:
            y = b(y)
        y = autograd.flatten(autograd.globalaveragepool(y))
        return self.fc(y)


SINGA_MODELS = {"mlp": MLP, "cnn": CNN, "resnet18": ResNet18}


def singa_model(name):
    m = SINGA_MODELS[name]()
    m.set_optimizer(opt.SGD(lr=LR, momentum=MOMENTUM, weight_decay=WD))
    return m


def torch_model(name, device=None):
    """The PyTorch net of ``name`` with its parameters on ``device`` (default: the CPU), and
    its SGD."""
    import torch
    from torch import nn

    if name == "mlp":
        net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                            nn.Linear(512, 10))
    elif name == "cnn":
        net = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
                            nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                            nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    else:
        class Block(nn.Module):
            def __init__(self, cin, cout, stride):
                super().__init__()
                self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
                self.b1 = nn.BatchNorm2d(cout)
                self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
                self.b2 = nn.BatchNorm2d(cout)
                self.down = None
                if stride != 1 or cin != cout:
                    self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                              nn.BatchNorm2d(cout))

            def forward(self, x):
                y = torch.relu(self.b1(self.c1(x)))
                y = self.b2(self.c2(y))
                return torch.relu(y + (self.down(x) if self.down is not None else x))

        layers, cin = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU()], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
        net = nn.Sequential(*layers)
    if device is not None:
        net.to(device)  # before building its optimizer, as torch.optim asks
    sgd = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    return net, sgd


def batch(name, n, seed=0):
    shape, classes = SHAPES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, *shape)).astype(np.float32)
    y = rng.integers(0, classes, n).astype(np.int32)
    return x, y
