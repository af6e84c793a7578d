"""ResNet for 224x224 images (He et al. 2015), built from BasicBlock or Bottleneck.

Stem: 7x7/2 conv -> BN -> ReLU -> 3x3/2 max-pool; four stages of residual blocks (64, 128,
256, 512 planes; stride 2 from the second stage on); 7x7 average pool -> linear.
"""

from singa import layer, model

from ._update import apply_update

__all__ = ["BasicBlock", "Bottleneck", "ResNet", "create_model", "resnet18", "resnet34",
           "resnet50", "resnet101", "resnet152"]


def _conv(planes, k, stride=1):
    return layer.Conv2d(planes, k, stride=stride, padding=k // 2, bias=False)


class Downsample(layer.Layer):
    """The projection shortcut: 1x1 conv with stride, then BN."""

    def __init__(self, planes, stride):
        super().__init__()
        self.conv = _conv(planes, 1, stride)
        self.bn = layer.BatchNorm2d(planes)

    def forward(self, x):
        return self.bn(self.conv(x))


class BasicBlock(layer.Layer):
    """Two 3x3 convs with BN; out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x))."""

    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = _conv(planes, 3, stride)
        self.bn1 = layer.BatchNorm2d(planes)
        self.conv2 = _conv(planes, 3)
        self.bn2 = layer.BatchNorm2d(planes)
        self.relu1 = layer.ReLU()
        self.relu2 = layer.ReLU()
        self.add = layer.Add()
        self.downsample = downsample

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu2(self.add(out, shortcut))


class Bottleneck(layer.Layer):
    """1x1 reduce -> 3x3 (with the stride) -> 1x1 expand (x4), each with BN; plus shortcut."""

    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = _conv(planes, 1)
        self.bn1 = layer.BatchNorm2d(planes)
        self.conv2 = _conv(planes, 3, stride)
        self.bn2 = layer.BatchNorm2d(planes)
        self.conv3 = _conv(planes * self.expansion, 1)
        self.bn3 = layer.BatchNorm2d(planes * self.expansion)
        self.relu1 = layer.ReLU()
        self.relu2 = layer.ReLU()
        self.relu3 = layer.ReLU()
        self.add = layer.Add()
        self.downsample = downsample

    def forward(self, x):
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.relu2(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return self.relu3(self.add(out, shortcut))


class Stage(layer.Layer):
    """A run of residual blocks, registered as ``<Block>_<i>`` (SINGA's register_layers)."""

    def __init__(self, blocks):
        super().__init__()
        self.register_layers(*blocks)
        self.blocks = blocks

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class ResNet(model.Model):
    """ResNet with ``layers`` blocks of type ``block`` per stage; ``input_size`` 224."""

    def __init__(self, block, layers, num_classes=10, num_channels=3):
        super().__init__()
        self.num_classes = num_classes
        self.input_size = 224
        self.dimension = 4
        self.inplanes = 64
        self.conv1 = layer.Conv2d(num_channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = layer.BatchNorm2d(64)
        self.relu = layer.ReLU()
        self.maxpool = layer.MaxPool2d(3, 2, padding=1)
        self.layer1 = self._make_stage(block, 64, layers[0])
        self.layer2 = self._make_stage(block, 128, layers[1], stride=2)
        self.layer3 = self._make_stage(block, 256, layers[2], stride=2)
        self.layer4 = self._make_stage(block, 512, layers[3], stride=2)
        self.avgpool = layer.AvgPool2d(7, stride=1)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def _make_stage(self, block, planes, n, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = Downsample(planes * block.expansion, stride)
        blocks = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        blocks += [block(self.inplanes, planes) for _ in range(1, n)]
        return Stage(blocks)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(self.flatten(self.avgpool(x)))

    def train_one_batch(self, x, y, dist_option="plain", spars=None):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        apply_update(self.optimizer, loss, dist_option, spars)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def resnet18(pretrained=False, **kwargs):
    return _build(BasicBlock, [2, 2, 2, 2], pretrained, kwargs)


def resnet34(pretrained=False, **kwargs):
    return _build(BasicBlock, [3, 4, 6, 3], pretrained, kwargs)


def resnet50(pretrained=False, **kwargs):
    return _build(Bottleneck, [3, 4, 6, 3], pretrained, kwargs)


def resnet101(pretrained=False, **kwargs):
    return _build(Bottleneck, [3, 4, 23, 3], pretrained, kwargs)


def resnet152(pretrained=False, **kwargs):
    return _build(Bottleneck, [3, 8, 36, 3], pretrained, kwargs)


def _build(block, layers, pretrained, kwargs):
    if pretrained:
        raise NotImplementedError("no pretrained ResNet weights are shipped")
    return ResNet(block, layers, **kwargs)


def create_model(pretrained=False, **kwargs):
    """ResNet-50, as SINGA's train_cnn uses (``num_classes``, ``num_channels``)."""
    return resnet50(pretrained, **kwargs)
