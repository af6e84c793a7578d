"""Xception for 299x299 images (Chollet 2017).

Entry: 3x3/2 conv (32) and 3x3 conv (64), each with BN and ReLU, then 12 blocks of separable
convolutions with residual shortcuts (3 down-sampling entry blocks, 8 middle blocks at 728
channels, 1 exit block), separable convs to 1536 and 2048 channels, a 10x10 max-pool and a
linear classifier.
"""

from singa import layer, model

from ._update import apply_update

__all__ = ["Block", "Xception", "create_model"]


class Block(layer.Layer):
    """``reps`` x (ReLU -> separable 3x3 conv -> BN), an optional 3x3 max-pool with
    ``strides``, and a shortcut (1x1 conv + BN when the shape changes)."""

    def __init__(self, in_filters, out_filters, reps, strides=1, padding=0,
                 start_with_relu=True, grow_first=True):
        super().__init__()
        if out_filters != in_filters or strides != 1:
            self.skip = layer.Conv2d(in_filters, out_filters, 1, stride=strides, padding=0,
                                     bias=False)
            self.skipbn = layer.BatchNorm2d(out_filters)
        else:
            self.skip = None
        parts = []
        filters = in_filters
        if grow_first:
            parts += self._unit(in_filters, out_filters)
            filters = out_filters
        for _ in range(reps - 1):
            parts += self._unit(filters, filters)
        if not grow_first:
            parts += self._unit(in_filters, out_filters)
        if not start_with_relu:
            parts = parts[1:]
        if strides != 1:
            parts.append(layer.MaxPool2d(3, strides, padding + 1))
        self.register_layers(*parts)
        self.parts = parts
        self.add = layer.Add()

    @staticmethod
    def _unit(cin, cout):
        # SINGA's positional form: (in_channels, out_channels, kernel_size, stride, padding)
        return [layer.ReLU(), layer.SeparableConv2d(cin, cout, 3, 1, 1, bias=False),
                layer.BatchNorm2d(cout)]

    def forward(self, x):
        y = x
        for part in self.parts:
            y = part(y)
        skip = x if self.skip is None else self.skipbn(self.skip(x))
        return self.add(y, skip)


class Xception(model.Model):
    """Xception; ``input_size`` 299."""

    def __init__(self, num_classes=10, num_channels=3):
        super().__init__()
        self.num_classes = num_classes
        self.input_size = 299
        self.dimension = 4
        self.conv1 = layer.Conv2d(num_channels, 32, 3, stride=2, padding=0, bias=False)
        self.bn1 = layer.BatchNorm2d(32)
        self.relu1 = layer.ReLU()
        self.conv2 = layer.Conv2d(32, 64, 3, stride=1, padding=0, bias=False)
        self.bn2 = layer.BatchNorm2d(64)
        self.relu2 = layer.ReLU()
        self.block1 = Block(64, 128, 2, 2, padding=0, start_with_relu=False)
        self.block2 = Block(128, 256, 2, 2, padding=0)
        self.block3 = Block(256, 728, 2, 2, padding=0)
        for i in range(4, 12):
            setattr(self, f"block{i}", Block(728, 728, 3, 1))
        self.block12 = Block(728, 1024, 2, 2, padding=0, grow_first=False)
        self.conv3 = layer.SeparableConv2d(1024, 1536, 3, 1, 1)
        self.bn3 = layer.BatchNorm2d(1536)
        self.relu3 = layer.ReLU()
        self.conv4 = layer.SeparableConv2d(1536, 2048, 3, 1, 1)
        self.bn4 = layer.BatchNorm2d(2048)
        self.relu4 = layer.ReLU()
        self.globalpooling = layer.MaxPool2d(10, 1)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def features(self, x):
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.bn2(self.conv2(x)))
        for i in range(1, 13):
            x = getattr(self, f"block{i}")(x)
        x = self.relu3(self.bn3(self.conv3(x)))
        return self.bn4(self.conv4(x))

    def forward(self, x):
        x = self.relu4(self.features(x))
        return self.fc(self.flatten(self.globalpooling(x)))

    def train_one_batch(self, x, y, dist_option="plain", spars=None):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        apply_update(self.optimizer, loss, dist_option, spars)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def create_model(pretrained=False, **kwargs):
    """An :class:`Xception` (``num_classes``, ``num_channels``); no pretrained weights."""
    if pretrained:
        raise NotImplementedError("no pretrained Xception weights are shipped")
    return Xception(**kwargs)
