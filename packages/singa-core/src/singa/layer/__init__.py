"""``singa.layer``: layers with lazily created parameters (SINGA's layer API)."""

from . import _base
from ._base import Layer, LayerMeta
from ._basic import (
    Add,
    BinaryCrossEntropy,
    Cat,
    CrossEntropy,
    Dropout,
    Embedding,
    Flatten,
    Gemm,
    Linear,
    MeanSquareError,
    ReLU,
    Reshape,
    Sigmoid,
    SoftMax,
    SoftMaxCrossEntropy,
    Tanh,
)
from ._conv import (
    AvgPool1d,
    AvgPool2d,
    BatchNorm2d,
    Conv2d,
    MaxPool1d,
    MaxPool2d,
    Pooling2d,
    SeparableConv2d,
)
from ._rnn import GRU, LSTM, RNN, CudnnRNN, RNN_Base

# Every built-in layer that defines get_/set_params or get_/set_states and creates those
# tensors in initialize() (tests/nn/test_layers.py checks that none is missing): ParamLayer's
# accessors serve Linear, Gemm, Embedding, Conv2d, BatchNorm2d and RNN_Base; BatchNorm2d's
# own get_/set_states add its running statistics.
_base.params_from_first_input(_base.ParamLayer, BatchNorm2d)

__all__ = [
    "Add", "AvgPool1d", "AvgPool2d", "BatchNorm2d", "BinaryCrossEntropy", "Cat", "Conv2d",
    "CrossEntropy", "CudnnRNN", "Dropout", "Embedding", "Flatten", "GRU", "Gemm", "LSTM",
    "Layer", "LayerMeta", "Linear", "MaxPool1d", "MaxPool2d", "MeanSquareError", "Pooling2d",
    "RNN", "RNN_Base", "ReLU", "Reshape", "SeparableConv2d", "Sigmoid", "SoftMax",
    "SoftMaxCrossEntropy", "Tanh",
]
