"""The smallest model the reliability tests share: one ``Linear(3)`` layer.

Small enough that a checkpoint has one weight of a known shape (4, 3) after ``tiny()``, and
with a training step, so checkpoint, header and training tests use one definition.
"""

from __future__ import annotations

import numpy as np
from singa import autograd, layer, model, tensor


class Tiny(model.Model):
    """y = x W + b with W of shape (in_features, 3)."""

    def __init__(self):
        super().__init__()
        self.fc = layer.Linear(3)

    def forward(self, x):
        return self.fc(x)

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


def tiny() -> Tiny:
    """A :class:`Tiny` compiled for (2, 4) inputs: W is (4, 3), b is (3,)."""
    m = Tiny()
    m.compile([tensor.from_numpy(np.ones((2, 4), np.float32))], is_train=False)
    return m
