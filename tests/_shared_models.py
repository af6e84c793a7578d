"""Small models the test folders share (tests/ is on ``sys.path``: tests/conftest.py is a
rootdir conftest, so ``from _shared_models import Tiny`` works in tests/nn, tests/examples, ...).

Each is the smallest network that exercises what its tests need; parameter names follow from
the attribute names (``fc.W``, ``l1.b``), which tests read back, so keep them stable.
"""

from __future__ import annotations

import numpy as np
from singa import autograd, layer, model, tensor


class Classifier(model.Model):
    """SINGA's training step: forward, softmax cross-entropy, the optimizer."""

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = autograd.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


class Tiny(Classifier):
    """y = x W + b with W of shape (in_features, 3): one checkpointed weight of known shape."""

    def __init__(self):
        super().__init__()
        self.fc = layer.Linear(3)

    def forward(self, x):
        return self.fc(x)


def tiny() -> Tiny:
    """A :class:`Tiny` compiled for (2, 4) inputs: W is (4, 3), b is (3,)."""
    m = Tiny()
    m.compile([tensor.from_numpy(np.ones((2, 4), np.float32))], is_train=False)
    return m


class MLP(Classifier):
    """l1 -> ReLU -> l2: ``Linear(hidden)`` then ``Linear(num_classes)``."""

    def __init__(self, hidden=16, num_classes=3):
        super().__init__()
        self.l1, self.l2 = layer.Linear(hidden), layer.Linear(num_classes)

    def forward(self, x):
        return self.l2(autograd.relu(self.l1(x)))
