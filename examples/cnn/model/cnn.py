"""The seed CNN for 28x28 images (MNIST, or the upsampled scikit-learn digits).

conv 5x5 (20) -> ReLU -> max-pool 2 -> conv 5x5 (50) -> ReLU -> max-pool 2 -> flatten ->
linear 500 -> ReLU -> linear (classes).
"""

from singa import layer, model

from ._update import apply_update

__all__ = ["CNN", "create_model"]


class CNN(model.Model):
    """SINGA's MNIST CNN; ``input_size`` 28."""

    def __init__(self, num_classes=10, num_channels=1):
        super().__init__()
        self.num_classes = num_classes
        self.input_size = 28
        self.dimension = 4
        self.conv1 = layer.Conv2d(num_channels, 20, 5, padding=0, activation="RELU")
        self.conv2 = layer.Conv2d(20, 50, 5, padding=0, activation="RELU")
        self.linear1 = layer.Linear(500)
        self.linear2 = layer.Linear(num_classes)
        self.pooling1 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling2 = layer.MaxPool2d(2, 2, padding=0)
        self.relu = layer.ReLU()
        self.flatten = layer.Flatten()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.pooling1(self.conv1(x))
        y = self.pooling2(self.conv2(y))
        y = self.relu(self.linear1(self.flatten(y)))
        return self.linear2(y)

    def train_one_batch(self, x, y, dist_option="plain", spars=None):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        apply_update(self.optimizer, loss, dist_option, spars)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def create_model(pretrained=False, **kwargs):
    """A :class:`CNN` (``num_classes``, ``num_channels``); there are no pretrained weights."""
    if pretrained:
        raise NotImplementedError("no pretrained CNN weights are shipped")
    return CNN(**kwargs)
