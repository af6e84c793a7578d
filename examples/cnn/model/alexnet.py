"""AlexNet for 224x224 images (SINGA's single-column variant).

Five convolutions (11x11/4, 5x5, three 3x3) with ReLUs and three 2x2 max-pools, a 3x3/2
average pool, then dropout -> linear 4096 -> ReLU, twice, and a linear classifier.
"""

from singa import layer, model

from ._update import apply_update

__all__ = ["AlexNet", "create_model"]


class AlexNet(model.Model):
    """AlexNet; ``input_size`` 224."""

    def __init__(self, num_classes=10, num_channels=1):
        super().__init__()
        self.num_classes = num_classes
        self.input_size = 224
        self.dimension = 4
        self.conv1 = layer.Conv2d(num_channels, 64, 11, stride=4, padding=2)
        self.conv2 = layer.Conv2d(64, 192, 5, padding=2)
        self.conv3 = layer.Conv2d(192, 384, 3, padding=1)
        self.conv4 = layer.Conv2d(384, 256, 3, padding=1)
        self.conv5 = layer.Conv2d(256, 256, 3, padding=1)
        self.linear1 = layer.Linear(4096)
        self.linear2 = layer.Linear(4096)
        self.linear3 = layer.Linear(num_classes)
        self.pooling1 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling2 = layer.MaxPool2d(2, 2, padding=0)
        self.pooling3 = layer.MaxPool2d(2, 2, padding=0)
        self.avg_pooling1 = layer.AvgPool2d(3, 2, padding=0)
        self.relu = layer.ReLU()
        self.flatten = layer.Flatten()
        self.dropout1 = layer.Dropout()
        self.dropout2 = layer.Dropout()
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        relu = self.relu
        y = self.pooling1(relu(self.conv1(x)))
        y = self.pooling2(relu(self.conv2(y)))
        y = relu(self.conv3(y))
        y = relu(self.conv4(y))
        y = self.pooling3(relu(self.conv5(y)))
        y = self.flatten(self.avg_pooling1(y))
        y = relu(self.linear1(self.dropout1(y)))
        y = relu(self.linear2(self.dropout2(y)))
        return self.linear3(y)

    def train_one_batch(self, x, y, dist_option="plain", spars=None):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        apply_update(self.optimizer, loss, dist_option, spars)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def create_model(pretrained=False, **kwargs):
    """An :class:`AlexNet` (``num_classes``, ``num_channels``); no pretrained weights."""
    if pretrained:
        raise NotImplementedError("no pretrained AlexNet weights are shipped")
    return AlexNet(**kwargs)
