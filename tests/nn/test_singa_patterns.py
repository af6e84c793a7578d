"""Model patterns of Apache SINGA's example scripts, written the way those scripts write them.

Each pattern runs eagerly and in graph mode (``Model.compile(..., use_graph=True)``, BFS and
serial replay) on the default device (``SINGA_DEVICE`` picks the backend), with equal losses
where it trains:

- a ResNet whose downsample branches are built in a closure (``examples/cnn/model/resnet.py``):
  their layers are no Layer's attributes, so several parameters are called ``W``, ``scale``
  and ``bias``; momentum SGD must give each its own buffer (oracle: the momentum rule in numpy,
  per parameter, from the gradients autograd produced);
- a model built only from autograd functions (``examples/cnn/autograd/mnist_cnn.py``): every
  layer is unnamed, two convolutions have equal shapes and equal names;
- separable convolutions with SINGA's positional ``(in, out, kernel, stride, padding)``
  (oracle: a numpy depthwise + pointwise convolution);
- a GAN that applies updates by hand and then back-propagates the same loss again
  (``examples/gan``): a clear error naming the op, the parameter and the fix.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from singa import autograd, device, layer, model, opt, tensor
from singa.errors import SingaError

STEPS = 3
LR, MOMENTUM, WD = 0.05, 0.9, 1e-4  # the examples' SGD(lr, momentum=0.9, weight_decay=...)
MODES = ("eager", "bfs", "serial")


@pytest.fixture(autouse=True)
def _training():
    autograd.training = True


class SpySGD(opt.SGD):
    """SGD that also records, in eager mode, each parameter's value and gradient before its
    update: the input of the numpy oracle."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.seen = []

    def apply(self, param_name, param_value, param_grad):
        if not param_value.device.graph_enabled():
            self.seen.append((param_value, tensor.to_numpy(param_value).copy(),
                              tensor.to_numpy(param_grad).copy()))
        super().apply(param_name, param_value, param_grad)


def momentum_oracle(seen):
    """PyTorch's momentum SGD in numpy, one buffer per parameter *tensor*:
    g' = g + wd p; buf = momentum buf + g'; p -= lr buf. Returns {id(param): (param, buf,
    p_after)}."""
    out = {}
    for p, before, g in seen:
        _, buf, _ = out.get(id(p), (p, np.zeros_like(before), None))
        buf = MOMENTUM * buf + (g + WD * before)
        out[id(p)] = (p, buf, before - LR * buf)
    return out


def check_momentum(sgd, seen, params):
    """Every parameter has its own buffer and value, equal to the numpy oracle's."""
    want = momentum_oracle(seen)
    assert {id(p) for p in params} == set(want), "a parameter was not updated"
    bufs = [sgd.state_of(p)["moments"] for p in params]
    assert len({id(b) for b in bufs}) == len(params), "two parameters share one buffer"
    for p, buf in zip(params, bufs):
        _, want_buf, want_p = want[id(p)]
        np.testing.assert_allclose(tensor.to_numpy(buf), want_buf, rtol=1e-5, atol=1e-6,
                                   err_msg=f"momentum of {p.name} {p.shape}")
        np.testing.assert_allclose(tensor.to_numpy(p), want_p, rtol=1e-5, atol=1e-6,
                                   err_msg=f"value of {p.name} {p.shape}")


def batches(xshape, classes=3, seed=7):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(xshape).astype(np.float32),
             rng.integers(0, classes, xshape[0]).astype(np.int32)) for _ in range(STEPS)]


def assert_same_losses(losses, eager, mode):
    np.testing.assert_allclose(losses, eager, rtol=1e-5, atol=1e-6, err_msg=f"{mode} losses")


def assert_graph_equals_eager(train, mode):
    """``train(mode, init)`` (returning ``(..., start, losses, final)``) in ``mode``, from
    eager's initial values, gives eager's losses and final parameters."""
    *_, start, eager, eager_final = train("eager")
    *_, losses, final = train(mode, start)
    assert_same_losses(losses, eager, mode)
    for a, b in zip(final, eager_final):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- 1. ResNet, closure branches
class BasicBlock(layer.Layer):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = layer.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d(planes)
        self.conv2 = layer.Conv2d(planes, planes, 3, stride=1, padding=1, bias=False)
        self.bn2 = layer.BatchNorm2d(planes)
        self.relu1 = layer.ReLU()
        self.add = layer.Add()
        self.relu2 = layer.ReLU()
        self.downsample = downsample  # a plain function, as in SINGA's example

    def forward(self, x):
        residual = x
        out = self.relu1(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            residual = self.downsample(x)
        return self.relu2(self.add(out, residual))


class ClosureResNet(model.Model):
    """SINGA's ResNet with two stages of one block, each with a downsample branch whose conv
    and BN live only in the closure ``_downsample`` (named ``W``, ``scale``, ``bias``)."""

    def __init__(self, num_classes=3):
        self.inplanes = 4
        super().__init__()
        self.branch_layers = []  # the closures' layers, kept only so that the test sees them
        self.conv1 = layer.Conv2d(3, 4, 3, stride=1, padding=1, bias=False)
        self.bn1 = layer.BatchNorm2d(4)
        self.relu = layer.ReLU()
        self.layer1, layers1 = self._make_layer(BasicBlock, 6, 1, stride=2)
        self.layer2, layers2 = self._make_layer(BasicBlock, 8, 1, stride=2)
        self.avgpool = layer.AvgPool2d(2, stride=1)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()
        self.register_layers(*layers1, *layers2)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            conv = layer.Conv2d(self.inplanes, planes * block.expansion, 1, stride=stride,
                                bias=False)
            bn = layer.BatchNorm2d(planes * block.expansion)
            self.branch_layers += [conv, bn]

            def _downsample(x):
                return bn(conv(x))

            downsample = _downsample
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))

        def forward(x):
            for lyr in layers:
                x = lyr(x)
            return x

        return forward, layers

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer2(self.layer1(x))
        return self.fc(self.flatten(self.avgpool(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss

    def all_states(self):
        """Every state tensor, the closures' included, in a fixed order."""
        own = [v for _, v in sorted(self.get_states().items())]
        return own + [t for lyr in self.branch_layers for t in lyr.get_states().values()]

    def all_params(self):
        own = [v for _, v in sorted(self.get_params().items())]
        return own + [t for lyr in self.branch_layers for t in lyr.get_params().values()]


def _train_resnet(mode, init=None):
    dev = device.get_default_device()
    dev.SetRandSeed(0)
    m = ClosureResNet()
    sgd = SpySGD(LR, momentum=MOMENTUM, weight_decay=WD)
    m.set_optimizer(sgd)
    tx = tensor.Tensor((4, 3, 8, 8), dev, tensor.float32)
    ty = tensor.Tensor((4,), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=mode != "eager", sequential=mode == "serial")
    if init is not None:
        for t, v in zip(m.all_states(), init):
            t.copy_from_numpy(v)
    start = [tensor.to_numpy(t).copy() for t in m.all_states()]
    m.train()
    losses = []
    for x, y in batches((4, 3, 8, 8)):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _, loss = m(tx, ty)
        losses.append(float(tensor.to_numpy(loss)[0]))
    final = [tensor.to_numpy(t) for t in m.all_states()]
    return m, sgd, start, losses, final


def test_resnet_with_closure_downsample_trains_with_a_momentum_buffer_per_parameter():
    m, sgd, start, losses, final = _train_resnet("eager")
    params = m.all_params()
    names = [p.name for p in params]
    assert len(set(names)) < len(names), f"the pattern needs shared names, got {names}"
    assert {"W", "scale", "bias"} <= {n for n in names if names.count(n) > 1}
    check_momentum(sgd, sgd.seen, params)
    assert all(np.isfinite(losses)) and any(not np.allclose(a, b) for a, b in
                                            zip(start, final))


@pytest.mark.parametrize("mode", ["bfs", "serial"])
def test_resnet_with_closure_downsample_graph_equals_eager(mode):
    assert_graph_equals_eager(_train_resnet, mode)


# ---------------------------------------------------------------- 2. autograd functions only
def mnist_cnn_net():
    """The layers of SINGA's autograd mnist_cnn.py (smaller), none of them a Layer attribute,
    so every weight is called ``W``; conv21 and conv22 have equal shapes; bn2 runs twice."""
    conv1 = autograd.Conv2d(1, 4, 3, padding=1, bias=False)
    bn1 = autograd.BatchNorm2d(4)
    pooling1 = autograd.MaxPool2d(3, 1, padding=1)
    conv21 = autograd.Conv2d(4, 3, 3, padding=1)
    conv22 = autograd.Conv2d(4, 3, 3, padding=1)
    bn2 = autograd.BatchNorm2d(6)
    linear = autograd.Linear(6 * 6 * 6, 3)
    pooling2 = autograd.AvgPool2d(3, 1, padding=1)
    layers = [conv1, bn1, conv21, conv22, bn2, linear]

    def forward(x, t):
        y = conv1(x)
        y = autograd.relu(y)
        y = bn1(y)
        y = pooling1(y)
        y1 = conv21(y)
        y2 = conv22(y)
        y = autograd.cat((y1, y2), 1)
        y = bn2(y)
        y = autograd.relu(y)
        y = bn2(y)
        y = pooling2(y)
        y = autograd.flatten(y)
        y = linear(y)
        loss = autograd.softmax_cross_entropy(y, t)
        return loss, y

    return layers, forward


def _states(layers):
    return [t for lyr in layers for t in lyr.get_states().values()]


def _params(layers):
    return [t for lyr in layers for t in lyr.get_params().values()]


class AutogradNet(model.Model):
    """The same script's loop as a Model's train_one_batch, for graph mode."""

    def __init__(self, net):
        super().__init__()
        self.net = net  # a function: nothing is registered, as in the script

    def forward(self, x):
        return self.net(x, None)[1]

    def train_one_batch(self, x, t):
        loss, y = self.net(x, t)
        for p, gp in autograd.backward(loss):
            self.optimizer.update(p, gp)
        self.optimizer.step()
        return y, loss


def _train_autograd_net(mode, init=None):
    dev = device.get_default_device()
    dev.SetRandSeed(0)
    layers, forward = mnist_cnn_net()
    sgd = SpySGD(lr=LR, momentum=MOMENTUM, weight_decay=WD)
    data = batches((4, 1, 6, 6))
    tx = tensor.Tensor((4, 1, 6, 6), dev, tensor.float32)
    ty = tensor.Tensor((4,), dev, tensor.int32)
    losses = []
    if mode == "eager":  # the script itself: no Model at all
        tx.copy_from_numpy(data[0][0])
        ty.copy_from_numpy(data[0][1])
        forward(tx, ty)  # creates the parameters; SINGA's scripts do no probe, nor harm
        if init is not None:
            for t, v in zip(_states(layers), init):
                t.copy_from_numpy(v)
        start = [tensor.to_numpy(t).copy() for t in _states(layers)]
        for x, y in data:
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            loss, _ = forward(tx, ty)
            for p, gp in autograd.backward(loss):
                sgd.update(p, gp)
            sgd.step()
            losses.append(float(tensor.to_numpy(loss)[0]))
    else:
        m = AutogradNet(lambda x, t: forward(x, t if t is not None else ty))
        m.set_optimizer(sgd)
        m.compile([tx], is_train=True, use_graph=True, sequential=mode == "serial")
        for t, v in zip(_states(layers), init):
            t.copy_from_numpy(v)
        start = None
        m.train()
        for x, y in data:
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)
            _, loss = m(tx, ty)
            losses.append(float(tensor.to_numpy(loss)[0]))
    return layers, sgd, start, losses, [tensor.to_numpy(t) for t in _states(layers)]


def test_autograd_only_model_trains_with_a_momentum_buffer_per_parameter():
    layers, sgd, start, losses, final = _train_autograd_net("eager")
    params = _params(layers)
    names = [p.name for p in params]
    assert names.count("W") == 4 and layers[2].W.shape == layers[3].W.shape  # conv21, conv22
    check_momentum(sgd, sgd.seen, params)
    assert all(np.isfinite(losses)) and any(not np.allclose(a, b) for a, b in
                                            zip(start, final))


@pytest.mark.parametrize("mode", ["bfs", "serial"])
def test_autograd_only_model_graph_equals_eager(mode):
    assert_graph_equals_eager(_train_autograd_net, mode)


# ---------------------------------------------------------------- 3. separable convolutions
def separable_reference(x, wd, bd, wp, bp, stride, padding):
    """Depthwise (one k x k filter per channel) then pointwise (1 x 1) convolution in numpy."""
    n, c, h, w = x.shape
    k = wd.shape[-1]
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - k) // stride + 1, (w + 2 * padding - k) // stride + 1
    dw = np.zeros((n, c, oh, ow), np.float64)
    for i in range(k):
        for j in range(k):
            win = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            dw += win * wd[None, :, 0, i, j, None, None]
    if bd is not None:
        dw += bd[None, :, None, None]
    y = np.einsum("oc,nchw->nohw", wp[:, :, 0, 0], dw)
    if bp is not None:
        y += bp[None, :, None, None]
    return y


@settings(max_examples=12)
@example(cin=3, cout=5, k=3, stride=2, padding=1, size=7, bias=False)
@given(cin=st.integers(1, 4), cout=st.integers(1, 5), k=st.sampled_from([1, 3]),
       stride=st.integers(1, 3), padding=st.integers(0, 2), size=st.integers(5, 9),
       bias=st.booleans())
def test_separable_conv2d_positional_stride_and_padding(cin, cout, k, stride, padding, size,
                                                        bias):
    """SINGA's ``SeparableConv2d(in, out, kernel, stride, padding)``: shape and values."""
    rng = np.random.default_rng(cin * 100 + cout * 10 + size)
    x = rng.standard_normal((2, cin, size, size)).astype(np.float32)
    conv = layer.SeparableConv2d(cin, cout, k, stride, padding, bias=bias)
    y = tensor.to_numpy(conv(tensor.from_numpy(x)))
    out = (size + 2 * padding - k) // stride + 1
    assert y.shape == (2, cout, out, out)
    d, p = conv.depthwise_conv, conv.point_conv
    want = separable_reference(
        x.astype(np.float64), tensor.to_numpy(d.W), tensor.to_numpy(d.b) if bias else None,
        tensor.to_numpy(p.W), tensor.to_numpy(p.b) if bias else None, stride, padding)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_xception_separable_conv_keeps_149_by_149():
    """Xception's blocks: ``SeparableConv2d(64, 128, 3, 1, 1)`` keeps a 149x149 map (SINGA's
    Xception pools 10x10 at the end and fails if the maps shrink)."""
    x = tensor.Tensor((1, 64, 149, 149), device.get_default_device(), tensor.float32)
    x.gaussian(0.0, 1.0)
    assert layer.SeparableConv2d(64, 128, 3, 1, 1)(x).shape == (1, 128, 149, 149)
    assert layer.SeparableConv2d(64, 128, 3, 2, 1)(x).shape == (1, 128, 75, 75)


class SeparableNet(model.Model):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.SeparableConv2d(3, 6, 3, 2, 2, bias=False)
        self.bn1 = layer.BatchNorm2d(6)
        self.relu = layer.ReLU()
        self.conv2 = layer.SeparableConv2d(6, 8, 3, 1, 1)
        self.pool = layer.MaxPool2d(5, 1)
        self.flatten = layer.Flatten()
        self.fc = layer.Linear(3)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        x = self.conv2(self.relu(self.bn1(self.conv1(x))))
        return self.fc(self.flatten(self.pool(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


def _train_separable(mode, init=None):
    dev = device.get_default_device()
    dev.SetRandSeed(0)
    m = SeparableNet()
    m.set_optimizer(opt.SGD(LR, momentum=MOMENTUM, weight_decay=WD))
    tx = tensor.Tensor((4, 3, 8, 8), dev, tensor.float32)
    ty = tensor.Tensor((4,), dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=mode != "eager", sequential=mode == "serial")
    if init is not None:
        m.set_states(init)
    start = {k: tensor.to_numpy(v).copy() for k, v in m.get_states().items()}
    m.train()
    losses = []
    for x, y in batches((4, 3, 8, 8)):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _, loss = m(tx, ty)
        losses.append(float(tensor.to_numpy(loss)[0]))
    return start, losses, {k: tensor.to_numpy(v) for k, v in m.get_states().items()}


def test_separable_conv_model_graph_equals_eager():
    """5x5 maps after the stride-2, padding-2 separable conv (8 -> 5), kept by the padding-1
    one: the 5x5 pooling leaves 1x1, so fc's W is (8, 3)."""
    start, eager, eager_final = _train_separable("eager")
    assert start["fc.W"].shape == (8, 3)
    assert any(not np.allclose(start[k], eager_final[k]) for k in start)
    for mode in ("bfs", "serial"):
        _, losses, final = _train_separable(mode, start)
        assert_same_losses(losses, eager, mode)
        for k in final:
            np.testing.assert_allclose(final[k], eager_final[k], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- 4. GAN, updates by hand
class GanMLP(model.Model):
    """SINGA's examples/gan/model/gan_mlp.py (smaller): the discriminator step applies its
    gradients by hand while back-propagating, then calls ``self.optimizer(loss)`` on the same
    loss, whose forward pass read the weights just updated."""

    def __init__(self, feature_size=12, hidden_size=6, fixed=False):
        super().__init__()
        self.fixed = fixed
        self.gen_net_fc_0 = layer.Linear(hidden_size)
        self.gen_net_relu_0 = layer.ReLU()
        self.gen_net_fc_1 = layer.Linear(feature_size)
        self.gen_net_sigmoid_1 = layer.Sigmoid()
        self.dis_net_fc_0 = layer.Linear(hidden_size)
        self.dis_net_relu_0 = layer.ReLU()
        self.dis_net_fc_1 = layer.Linear(1)
        self.dis_net_sigmoid_1 = layer.Sigmoid()
        self.binary_cross_entropy = layer.BinaryCrossEntropy()

    def forward(self, x):
        return self.forward_dis(self.forward_gen(x))

    def forward_dis(self, x):
        y = self.dis_net_relu_0(self.dis_net_fc_0(x))
        return self.dis_net_sigmoid_1(self.dis_net_fc_1(y))

    def forward_gen(self, x):
        y = self.gen_net_relu_0(self.gen_net_fc_0(x))
        return self.gen_net_sigmoid_1(self.gen_net_fc_1(y))

    def train_one_batch_dis(self, x, y):
        out = self.forward_dis(x)
        loss = self.binary_cross_entropy(out, y)
        for p, g in autograd.backward(loss):
            if "dis_net" in p.name:
                self.optimizer.apply(p.name, p, g)
        if self.fixed:  # the fix the error names: one backward per loss
            self.optimizer.step()
        else:
            self.optimizer(loss)
        return out, loss

    def train_one_batch(self, noise, real, real_labels, fake_labels):
        """One iteration of vanilla.py's loop (recorded as one graph in graph mode)."""
        _, d_loss_real = self.train_one_batch_dis(real, real_labels)
        _, d_loss_fake = self.train_one_batch_dis(self.forward_gen(noise), fake_labels)
        out = self.forward(noise)
        g_loss = self.binary_cross_entropy(out, real_labels)
        for p, g in autograd.backward(g_loss):
            if "gen_net" in p.name:
                self.optimizer.apply(p.name, p, g)
        return d_loss_real, g_loss


def _gan(mode, fixed, init=None):
    dev = device.get_default_device()
    dev.SetRandSeed(0)
    m = GanMLP(fixed=fixed)
    m.set_optimizer(opt.Adam(lr=0.01))
    noise = tensor.Tensor((4, 8), dev, tensor.float32)
    real = tensor.Tensor((4, 12), dev, tensor.float32)
    real_labels = tensor.Tensor((4, 1), dev, tensor.float32)
    fake_labels = tensor.Tensor((4, 1), dev, tensor.float32)
    real_labels.set_value(1.0)
    fake_labels.set_value(0.0)
    m.compile([noise], is_train=True, use_graph=mode != "eager", sequential=mode == "serial")
    if init is not None:
        m.set_states(init)
    start = {k: tensor.to_numpy(v).copy() for k, v in m.get_states().items()}
    m.train()
    rng = np.random.default_rng(3)
    losses = []
    for _ in range(STEPS):
        noise.copy_from_numpy(rng.uniform(-1, 1, (4, 8)).astype(np.float32))
        real.copy_from_numpy(rng.random((4, 12)).astype(np.float32))
        d_loss, g_loss = m(noise, real, real_labels, fake_labels)
        losses.append((float(tensor.to_numpy(d_loss)[0]), float(tensor.to_numpy(g_loss)[0])))
    return start, losses


@pytest.mark.parametrize("mode", MODES)
def test_gan_backward_through_updated_weights_names_the_op_and_the_fix(mode):
    with pytest.raises(SingaError) as info:
        _gan(mode, fixed=False)
    msg = str(info.value)
    assert "Matmul" in msg and "parameter 'dis_net_fc_1.W'" in msg, msg
    assert "modified by an in-place operation" in msg, msg
    assert "Back-propagate each loss once" in msg and "forward pass again" in msg, msg
    # the fix it names (one backward per loss) trains, with eager's losses in graph mode
    start, eager = _gan("eager", fixed=True)
    _, losses = _gan(mode, fixed=True, init=start)
    assert np.isfinite(eager).all()
    np.testing.assert_allclose(losses, eager, rtol=1e-5, atol=1e-6, err_msg=mode)
