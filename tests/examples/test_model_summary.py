"""``repr(model)`` and ``model.summary()`` of the seed CNN against hand-counted parameters:

conv1 5x5, 1 -> 20 channels: 1*20*5*5 + 20 = 520; conv2 5x5, 20 -> 50: 20*50*25 + 50 = 25,050;
linear1 800 -> 500 (50 maps of 4x4 after two conv/pool stages): 800*500 + 500 = 400,500;
linear2 500 -> 10: 5,010. Total 431,080. Output shapes for a batch of 8 follow from
28 -conv5-> 24 -pool2-> 12 -conv5-> 8 -pool2-> 4.
"""

from __future__ import annotations

import pytest
from examples_support import load_example
from singa import layer, model, tensor

HAND = {"conv1": 520, "conv2": 25050, "linear1": 400500, "linear2": 5010, "pooling1": 0,
        "pooling2": 0, "relu": 0, "flatten": 0, "softmax_cross_entropy": 0}
SHAPES = {"conv1": (8, 20, 24, 24), "pooling1": (8, 20, 12, 12), "conv2": (8, 50, 8, 8),
          "pooling2": (8, 50, 4, 4), "flatten": (8, 800), "linear1": (8, 500),
          "relu": (8, 500), "linear2": (8, 10)}


@pytest.fixture
def cnn():
    train_cnn = load_example("cnn/train_cnn.py", "singa_example_train_cnn_summary")
    return train_cnn.create_model("cnn", 1, 10)


def test_summary_counts_and_shapes_of_the_seed_cnn(cnn):
    cnn.compile([tensor.Tensor((8, 1, 28, 28))], is_train=False, use_graph=False)
    s = cnn.summary()
    assert s.total_params == sum(HAND.values()) == 431080
    assert s.non_trainable_states == 0
    rows = {r.name: r for r in s.rows}
    assert {n: r.params for n, r in rows.items() if r.params is not None} == {
        n: c for n, c in HAND.items() if n != "softmax_cross_entropy"}
    assert rows["softmax_cross_entropy"].output_shape is None  # not called by forward
    assert {n: r.output_shape for n, r in rows.items() if r.output_shape} == SHAPES
    assert s.input_shapes == [(8, 1, 28, 28)] and s.output_shape == (8, 10)
    text = str(s)
    assert "Total params: 431,080" in text
    assert "linear1 (Linear)" in text and "(8, 50, 8, 8)" in text and "400,500" in text


def test_repr_lists_layers_and_counts(cnn):
    before = repr(cnn)
    assert before.startswith("CNN(  # not initialised")
    assert "(linear1): Linear(out_features=500)" in before
    assert "params" not in before.split("\n", 1)[1]  # no counts before the layers exist
    cnn.compile([tensor.Tensor((8, 1, 28, 28))], is_train=False, use_graph=False)
    text = repr(cnn)
    assert text.splitlines()[0] == "CNN(  # 431,080 params"
    for name, count in HAND.items():
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"({name}):"))
        assert line.endswith(f"{count:,} params") == bool(count), line
    assert "(conv1): Conv2d(in_channels=1, nb_kernels=20, kernel_size=(5, 5)" in text
    assert text.endswith(")")


class Block(layer.Layer):
    def __init__(self):
        super().__init__()
        self.fc = layer.Linear(6)
        self.bn = layer.BatchNorm2d(3)

    def forward(self, x):
        return self.fc(layer.Flatten()(self.bn(x)))


class Nested(model.Model):
    def __init__(self):
        super().__init__()
        self.block = Block()
        self.head = layer.Linear(2)

    def forward(self, x):
        return self.head(self.block(x))


def test_nested_layers_and_non_trainable_states():
    m = Nested()
    m.compile([tensor.Tensor((4, 3, 2, 2))], is_train=False, use_graph=False)
    s = m.summary()
    # fc: 12*6 + 6 = 78; bn: scale + bias 3 + 3 = 6 (running mean/var 6 more, not trainable)
    # head: 6*2 + 2 = 14
    assert [(r.name, r.depth, r.params) for r in s.rows] == [
        ("block", 0, 84), ("block.fc", 1, 78), ("block.bn", 1, 6), ("head", 0, 14)]
    assert s.total_params == 98 and s.non_trainable_states == 6
    assert s.rows[0].output_shape == (4, 6)
    text = repr(m)
    assert "  (block): Block(  # 84 params\n    (fc): Linear(" in text
