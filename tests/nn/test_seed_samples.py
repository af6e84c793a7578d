# The samples are kept as the docs write them (super(CNN, self), unused loop variables).
# ruff: noqa: B007, UP008
"""The code samples of SINGA's autograd and Model docs, run as written (on the CPU in place of
``create_cuda_gpu``); each must train: the loss falls.

Data: scikit-learn's bundled 8x8 digits, upsampled 3x and padded to 28x28 (the samples' MNIST
size), or the samples' own synthetic 2-D two-class set for the MLPs.
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import autograd, device, layer, model, opt, tensor
from singa.tensor import Tensor


def _two_class_data(n=400, seed=0):
    """The MLP examples' data: label = whether y lies above 5x + 1 (plus noise)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, n)
    y = 5 * x + 1 + 2 * rng.standard_normal(n)
    label = (5 * x + 1 > y).astype(np.int32)
    data = np.stack([x, y], 1).astype(np.float32)
    return data, label


def _digits_28(n, seed=0):
    datasets = pytest.importorskip("sklearn.datasets")
    d = datasets.load_digits()
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(d.images))[:n]
    imgs = np.kron(d.images[idx] / 16.0, np.ones((3, 3)))  # 24x24
    imgs = np.pad(imgs, ((0, 0), (2, 2), (2, 2)))[:, None].astype(np.float32)
    return imgs, d.target[idx].astype(np.int32)


# ---------------------------------------------------------------- autograd doc: operations only
def test_operation_only_mlp():
    # a fixed initialisation: from about 1 in 100 random ones (2 of 200 seeds measured) the
    # loss falls by less than the 3% checked below within the 100 steps
    device.get_default_device().SetRandSeed(0)
    data, label = _two_class_data()

    w0 = Tensor(shape=(2, 3), requires_grad=True, stores_grad=True)
    w0.gaussian(0.0, 0.1)
    b0 = Tensor(shape=(1, 3), requires_grad=True, stores_grad=True)
    b0.set_value(0.0)

    w1 = Tensor(shape=(3, 2), requires_grad=True, stores_grad=True)
    w1.gaussian(0.0, 0.1)
    b1 = Tensor(shape=(1, 2), requires_grad=True, stores_grad=True)
    b1.set_value(0.0)

    inputs = Tensor(data=data)  # data matrix
    target = Tensor(data=label)  # label vector
    autograd.training = True    # for training
    sgd = opt.SGD(0.05)   # optimizer

    losses = []
    for i in range(100):
        x = autograd.matmul(inputs, w0)  # matrix multiplication
        x = autograd.add_bias(x, b0)    # add the bias vector
        x = autograd.relu(x)            # ReLU activation operation

        x = autograd.matmul(x, w1)
        x = autograd.add_bias(x, b1)

        loss = autograd.softmax_cross_entropy(x, target)

        for p, g in autograd.backward(loss):
            sgd.update(p, g)
        losses.append(tensor.to_numpy(loss)[0])
    # full-batch gradient descent with a small step: the loss falls at every iteration
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.97 * losses[0], losses


# ---------------------------------------------------------------- autograd doc: operations + layers
def test_operation_and_layer_cnn():
    dev = device.create_cpu_device()
    # a fixed initialisation (the layers draw from this device's generator): from 7 of 240
    # random ones (seeds 60-299 measured) the sample as written diverges in its first epoch
    # (loss ~2 -> 20-40: lr 0.01 into a Linear of 25088 inputs), which a CI run once hit
    dev.SetRandSeed(0)
    batch_sz, n = 8, 24
    x_train, y_train = _digits_28(n)

    conv1 = autograd.Conv2d(1, 32, 3, padding=1, bias=False)
    bn1 = autograd.BatchNorm2d(32)
    pooling1 = autograd.MaxPool2d(3, 1, padding=1)
    conv21 = autograd.Conv2d(32, 16, 3, padding=1)
    conv22 = autograd.Conv2d(32, 16, 3, padding=1)
    bn2 = autograd.BatchNorm2d(32)
    linear = autograd.Linear(32 * 28 * 28, 10)
    pooling2 = autograd.AvgPool2d(3, 1, padding=1)

    def forward(x, t):
        # x is the input data (a batch of images)
        # t is the label vector (a batch of integers)
        y = conv1(x)           # Conv layer
        y = autograd.relu(y)   # ReLU operation
        y = bn1(y)             # BN layer
        y = pooling1(y)        # Pooling Layer

        # two parallel convolution layers
        y1 = conv21(y)
        y2 = conv22(y)
        y = autograd.cat((y1, y2), 1)  # cat operation
        y = autograd.relu(y)           # ReLU operation
        y = bn2(y)
        y = pooling2(y)

        y = autograd.flatten(y)        # flatten operation
        y = linear(y)                  # Linear layer
        loss = autograd.softmax_cross_entropy(y, t)  # operation
        return loss, y

    sgd = opt.SGD(lr=0.01)
    autograd.training = True
    epochs, batch_number = 3, n // batch_sz
    first, last = [], []
    for epoch in range(epochs):
        for i in range(batch_number):
            inputs = tensor.Tensor(device=dev, data=x_train[
                                   i * batch_sz:(1 + i) * batch_sz], stores_grad=False)
            targets = tensor.Tensor(device=dev, data=y_train[
                                    i * batch_sz:(1 + i) * batch_sz], requires_grad=False,
                                    stores_grad=False)

            loss, y = forward(inputs, targets)  # forward the net

            for p, gp in autograd.backward(loss):  # auto backward
                sgd.update(p, gp)
            (first if epoch == 0 else last if epoch == epochs - 1 else []).append(
                tensor.to_numpy(loss)[0])
    assert np.mean(last) < 0.7 * np.mean(first), (first, last)


# ---------------------------------------------------------------- Model doc: CNN with the graph
class CNN(model.Model):

    def __init__(self, num_classes=10, num_channels=1):
        super(CNN, self).__init__()
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
        y = self.conv1(x)
        y = self.pooling1(y)
        y = self.conv2(y)
        y = self.pooling2(y)
        y = self.flatten(y)
        y = self.linear1(y)
        y = self.relu(y)
        y = self.linear2(y)
        return y

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss


def test_model_api_cnn():
    # a fixed initialisation: from 1 of 400 random ones (seeds 0-399 measured: 198) the loss
    # falls by less than checked below
    device.get_default_device().SetRandSeed(0)
    use_graph, sequential = True, False
    batch_size, IMG_SIZE, num_classes = 16, 28, 10
    images, labels = _digits_28(48)
    onehot = np.eye(num_classes, dtype=np.int32)[labels]

    model_ = CNN()

    # initialize optimizer and attach it to the model
    sgd = opt.SGD(lr=0.005, momentum=0.9, weight_decay=1e-5)
    model_.set_optimizer(sgd)

    # initialize device (the CPU here, in place of device.create_cuda_gpu())
    dev = device.get_default_device()
    dev.ResetGraph()

    # input and target placeholders for the model
    tx = tensor.Tensor((batch_size, 1, IMG_SIZE, IMG_SIZE), dev, tensor.float32)
    ty = tensor.Tensor((batch_size, num_classes), dev, tensor.int32)

    # compile the model before training
    model_.compile([tx], is_train=True, use_graph=use_graph, sequential=sequential)

    losses = []
    num_train_batch = len(images) // batch_size
    for epoch in range(3):
        for b in range(num_train_batch):
            # generate the next mini-batch
            x = images[b * batch_size:(b + 1) * batch_size]
            y = onehot[b * batch_size:(b + 1) * batch_size]

            # Copy the data into input tensors
            tx.copy_from_numpy(x)
            ty.copy_from_numpy(y)

            # Training with one batch
            out, loss = model_(tx, ty)
            losses.append(tensor.to_numpy(loss)[0])
    assert out.shape == (batch_size, num_classes)
    assert np.mean(losses[-num_train_batch:]) < 0.9 * np.mean(losses[:num_train_batch]), losses


# ---------------------------------------------------------------- Model doc: MLP with the graph
class MLP(model.Model):  # the model is a subclass of Model

    def __init__(self, data_size=10, perceptron_size=100, num_classes=10):
        super(MLP, self).__init__()

        # init the operators, layers and other objects
        self.relu = layer.ReLU()
        self.linear1 = layer.Linear(perceptron_size)
        self.linear2 = layer.Linear(num_classes)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, inputs):  # define the forward function
        y = self.linear1(inputs)
        y = self.relu(y)
        y = self.linear2(y)
        return y

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss

    def set_optimizer(self, optimizer):  # attach an optimizer
        self.optimizer = optimizer


@pytest.mark.parametrize("sequential", [False, True])
def test_model_api_mlp_with_graph_and_checkpoint(sequential, tmp_path):
    """The doc's MLP (on the 2-D example data: its Linear layers need (batch, features)
    input), trained with the graph, then the doc's save/load checkpoint calls."""
    data, label = _two_class_data()
    batch_size, num_classes = 40, 2
    onehot = np.eye(num_classes, dtype=np.int32)[label]
    dev = device.get_default_device()
    dev.ResetGraph()

    # create a model instance
    model_ = MLP(num_classes=num_classes)
    # initialize optimizer and attach it to the model
    sgd = opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5)
    model_.set_optimizer(sgd)
    # input and target placeholders for the model
    tx = tensor.Tensor((batch_size, 2), dev, tensor.float32)
    ty = tensor.Tensor((batch_size, num_classes), dev, tensor.int32)
    # compile the model before training
    model_.compile([tx], is_train=True, use_graph=True, sequential=sequential)

    losses = []
    for epoch in range(8):
        for b in range(len(data) // batch_size):
            tx.copy_from_numpy(data[b * batch_size:(b + 1) * batch_size])
            ty.copy_from_numpy(onehot[b * batch_size:(b + 1) * batch_size])
            out, loss = model_(tx, ty)
            losses.append(tensor.to_numpy(loss)[0])
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10])

    # save a checkpoint, then load it back (the doc's two snippets)
    checkpointpath = str(tmp_path / "checkpoint.zip")
    model_.save_states(fpath=checkpointpath)
    saved = {k: v.to_numpy() for k, v in model_.get_states().items()}
    tx.copy_from_numpy(data[:batch_size])
    ty.copy_from_numpy(onehot[:batch_size])
    model_(tx, ty)
    import os
    if os.path.exists(checkpointpath):
        model_.load_states(fpath=checkpointpath)
    for k, v in model_.get_states().items():
        np.testing.assert_array_equal(v.to_numpy(), saved[k])
