"""``singa.autograd``: SINGA's Operators, their functional wrappers, and ``backward``.

Set ``autograd.training = True`` (``Model.train()`` does it) to record what backward needs.
Calling an Operator instance returns a tuple of Tensors; the lower-case functions return one
Tensor. Every operator is built on the op table, so it runs on every backend.
"""

from __future__ import annotations

import sys

from ..errors import ShapeError
from ..ops._elementwise import BINARY as _BINARY
from ..ops._elementwise import UNARY as _UNARY
from . import _engine
from ._elementwise import (
    OPERATORS as _OPERATORS,
)
from ._elementwise import (
    Cast,
    Clip,
    Elu,
    HardSigmoid,
    Identity,
    LeakyRelu,
    Max,
    Mean,
    Min,
    PRelu,
    SeLU,
    Sum,
)
from ._engine import (
    Dummy,
    Operation,
    Operator,
    add_all,
    axis_helper,
    back_broadcast,
    backward,
    ctensor2numpy,
    gradients,
    infer_dependency,
)
from ._nn import (
    _RNN,
    BinaryCrossEntropy,
    CrossEntropy,
    Dropout,
    MeanSquareError,
    RankingLoss,
    SoftMaxCrossEntropy,
    _BatchNorm2d,
    _Conv2d,
    _Pooling2d,
)
from ._onnx_extra import (
    ArgMax,
    ConvTranspose2d,
    ReduceMax,
    ReduceMin,
    argmax,
    conv_transpose2d,
    reduce_max,
    reduce_min,
)
from ._recurrent import _GRUSeq, _has_seq_kernel, _LSTMSeq  # noqa: F401  (LSTM/GRU)
from ._shape import (
    AddBias,
    Concat,
    ConstantOfShape,
    CosSim,
    DepthToSpace,
    Embedding,
    Expand,
    Flatten,
    Gather,
    Gemm,
    GlobalAveragePool,
    LogSoftMax,
    Matmul,
    NonZero,
    OneHot,
    Pad,
    ReduceMean,
    ReduceSum,
    Reshape,
    ScatterElements,
    Shape,
    Slice,
    SoftMax,
    SpaceToDepth,
    Split,
    Squeeze,
    Tile,
    Transpose,
    Unsqueeze,
    UpSample,
    Where,
)

#: Global switch: ops cache what backward needs only while this is True (SINGA's default False).
training = False

_engine._pkg = sys.modules[__name__]

globals().update(_OPERATORS)


def _unary_function(cls, doc):
    def function(x):
        return cls()(x)[0]

    function.__doc__ = doc
    return function


def _binary_function(cls, doc):
    def function(a, b):
        return cls()(a, b)[0]

    function.__doc__ = doc
    return function


# relu, sigmoid, ..., _not; add, sub, ..., _xor: SINGA's functional form of each Operator that
# the elementwise tables declare, named by the record
_FUNCTIONS = {
    **{decl.autograd: _unary_function(_OPERATORS[decl.operator or decl.op],
                                      decl.doc("autograd", kind="Tensor"))
       for decl in _UNARY.values() if decl.autograd},
    **{decl.autograd: _binary_function(_OPERATORS[decl.operator or decl.op],
                                       decl.doc("autograd", kind="Tensor"))
       for decl in _BINARY.values() if decl.autograd},
}
for _name, _function in _FUNCTIONS.items():
    _function.__name__ = _function.__qualname__ = _name
globals().update(_FUNCTIONS)


def _first(op, *xs):
    return op(*xs)[0]


# ---------------------------------------------------------------- functional wrappers
def identity(x):
    return _first(Identity(), x)


def elu(x, alpha=1.0):
    return _first(Elu(alpha), x)


def selu(x, alpha=1.67326, gamma=1.0507):
    return _first(SeLU(alpha, gamma), x)


def leakyrelu(x, a=0.01):
    return _first(LeakyRelu(a), x)


def hardsigmoid(x, alpha=0.2, gamma=0.5):
    return _first(HardSigmoid(alpha, gamma), x)


def prelu(x, slope):
    return _first(PRelu(), x, slope)


def clip(x, min=None, max=None):  # noqa: A002
    return _first(Clip(min, max), x)


def cast(x, to):
    return _first(Cast(to), x)


def sum(*xs):  # noqa: A001
    return _first(Sum(), *xs)


def mean(*xs):
    return _first(Mean(), *xs)


def max(*xs):  # noqa: A001
    return _first(Max(), *xs)


def min(*xs):  # noqa: A001
    return _first(Min(), *xs)


def matmul(x, w):
    return _first(Matmul(), x, w)


def add_bias(x, b, axis=0):
    return _first(AddBias(axis), x, b)


def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):  # noqa: N803
    op = Gemm(alpha, beta, transA, transB)
    return _first(op, A, B) if C is None else _first(op, A, B, C)


def softmax(x, axis=1):
    return _first(SoftMax(axis), x)


def log_softmax(x, axis=1):
    return _first(LogSoftMax(axis), x)


def reduce_sum(x, axes=None, keepdims=1):
    return _first(ReduceSum(axes, keepdims), x)


def reduce_mean(x, axes=None, keepdims=1):
    return _first(ReduceMean(axes, keepdims), x)


def globalaveragepool(x, data_format="channels_first"):
    return _first(GlobalAveragePool(data_format), x)


def shape(x):
    return _first(Shape(), x)


def reshape(x, shape):
    return _first(Reshape(shape), x)


def flatten(x, axis=1):
    return _first(Flatten(axis), x)


def unsqueeze(x, axis=-1):
    return _first(Unsqueeze(axis), x)


def squeeze(x, axis=()):
    return _first(Squeeze(axis), x)


def transpose(x, shape=None):
    return _first(Transpose(shape), x)


def cat(xs, axis=0):
    if not xs:
        raise ShapeError("cat: needs at least one tensor to concatenate, got an empty list")
    return _first(Concat(axis), *xs)


def split(x, axis, parts, num_output=None):
    return Split(axis, parts, num_output)(x)


def slice(x, starts, ends, axes=None, steps=None):  # noqa: A001
    return _first(Slice(starts, ends, axes, steps), x)


def gather(x, axis, indices):
    return _first(Gather(axis, indices), x)


def tile(x, repeats):
    return _first(Tile(repeats), x)


def expand(x, shape):
    return _first(Expand(shape), x)


def pad(x, mode, pads, constant=0.0):
    return _first(Pad(mode, pads, constant), x)


def upsample(x, mode, scales):
    return _first(UpSample(mode, scales), x)


def depth_to_space(x, blocksize, mode="DCR"):
    return _first(DepthToSpace(blocksize, mode), x)


def space_to_depth(x, blocksize, mode="DCR"):
    return _first(SpaceToDepth(blocksize, mode), x)


def where(x, y, condition):
    return _first(Where(condition), x, y)


def scatter_elements(x, indices, updates, axis=0):
    return _first(ScatterElements(indices, updates, axis), x)


def constant_of_shape(x, value=0.0):
    return _first(ConstantOfShape(value), x)


def nonzero(x):
    return _first(NonZero(), x)


def onehot(axis, indices, depth, values):
    return _first(OneHot(axis, depth, values), indices)


def cossim(a, b):
    return _first(CosSim(), a, b)


def embedding(x, w):
    return _first(Embedding(), x, w)


def dropout(x, seed=0, ratio=0.5):
    return _first(Dropout(seed, ratio), x)


def conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0, 0)):
    op = _Conv2d(handle, odd_padding)
    return _first(op, x, W) if b is None else _first(op, x, W, b)


def batchnorm_2d(handle, x, scale, bias, running_mean, running_var):
    return _first(_BatchNorm2d(handle, running_mean, running_var), x, scale, bias)


def pooling_2d(handle, x, odd_padding=(0, 0, 0, 0)):
    return _first(_Pooling2d(handle, odd_padding), x)


def softmax_cross_entropy(x, t):
    return _first(SoftMaxCrossEntropy(t), x)


def cross_entropy(y, t):
    return _first(CrossEntropy(t), y)


def binary_cross_entropy(x, t):
    return _first(BinaryCrossEntropy(t), x)


def mse_loss(x, t):
    # SINGA's form: the target is part of the operator, so the loss has one input and
    # ``loss.creator.backward()`` returns dx alone
    return _first(MeanSquareError(t), x)


def ranking_loss(pos, neg, M=0.2):  # noqa: N803
    return _first(RankingLoss(M), pos, neg)


_LAYER_ALIASES = ("Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                  "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN_Base", "RNN", "LSTM")


def __getattr__(name):
    # SINGA re-exports these layers from autograd; import lazily (layer imports autograd).
    if name in _LAYER_ALIASES:
        from .. import layer

        return getattr(layer, name)
    raise AttributeError(f"module 'singa.autograd' has no attribute {name!r}")
