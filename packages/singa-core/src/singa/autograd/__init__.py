"""``singa.autograd``: SINGA's Operators, their functional wrappers, and ``backward``.

Set ``autograd.training = True`` (``Model.train()`` does it) to record what backward needs.
Calling an Operator instance returns a tuple of Tensors; the lower-case functions return one
Tensor. Every operator is built on the op table, so it runs on every backend.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..ops._elementwise import BINARY as _BINARY
from ..ops._elementwise import UNARY as _UNARY
from ..ops._rearrangements import REARRANGEMENTS as _REARRANGEMENTS
from ..ops._rearrangements import compile_def as _compile_def
from ..ops._reductions import REDUCTIONS as _REDUCTIONS
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
from ._onnx_extra import ArgMax, ConvTranspose2d, argmax, conv_transpose2d
from ._rearrangements import OPERATORS as _REARRANGEMENT_OPERATORS
from ._recurrent import GRUSeq, LSTMSeq, has_seq_kernel  # noqa: F401  (public: singa-onnx uses them)
from ._reductions import OPERATORS as _REDUCTION_OPERATORS
from ._shape import (
    AddBias,
    Concat,
    ConstantOfShape,
    CosSim,
    Embedding,
    Expand,
    Gather,
    Gemm,
    GlobalAveragePool,
    LogSoftMax,
    Matmul,
    NonZero,
    OneHot,
    Pad,
    ScatterElements,
    Shape,
    Slice,
    SoftMax,
    Split,
    Tile,
    UpSample,
    Where,
)

#: Global switch: ops cache what backward needs only while this is True (SINGA's default False).
training = False

_engine.register_training_switch(lambda: training)

globals().update(_OPERATORS)
globals().update(_REDUCTION_OPERATORS)
globals().update(_REARRANGEMENT_OPERATORS)


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


def _reduction_function(cls, doc):
    def function(x, axes=None, keepdims=1):
        return cls(axes, keepdims)(x)[0]

    function.__doc__ = doc
    return function


def _rearrangement_function(cls, decl):
    # SINGA's signature, the constructor's arguments passed on by position
    params = decl.function_params
    function = _compile_def(decl.autograd, ("x",), params,
                            f"return _cls({', '.join(p.name for p in params)})(x)[0]",
                            {"_cls": cls}, __name__)
    function.__doc__ = decl.doc("autograd", kind="Tensor")
    return function


# relu, sigmoid, ..., _not; add, sub, ..., _xor; reduce_sum, ..., reduce_min; reshape, ...,
# space_to_depth: SINGA's functional form of each Operator that the elementwise, reduction and
# rearrangement tables declare, named by the record
_FUNCTIONS = {
    **{decl.autograd: _unary_function(_OPERATORS[decl.operator or decl.op],
                                      decl.doc("autograd", kind="Tensor"))
       for decl in _UNARY.values() if decl.autograd},
    **{decl.autograd: _binary_function(_OPERATORS[decl.operator or decl.op],
                                       decl.doc("autograd", kind="Tensor"))
       for decl in _BINARY.values() if decl.autograd},
    **{decl.autograd: _reduction_function(_REDUCTION_OPERATORS[decl.operator],
                                          decl.doc("autograd", kind="Tensor"))
       for decl in _REDUCTIONS.values() if decl.operator and decl.autograd},
    **{decl.autograd: _rearrangement_function(_REARRANGEMENT_OPERATORS[decl.op], decl)
       for decl in _REARRANGEMENTS.values()},
}
for _name, _function in _FUNCTIONS.items():
    _function.__name__ = _function.__qualname__ = _name
globals().update(_FUNCTIONS)


def _first(op, *xs):
    return op(*xs)[0]


# ---------------------------------------------------------------- functional wrappers
def identity(x):
    """y = x, a copy (:class:`Identity`); dx = dy.

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(Identity(), x)


def elu(x, alpha=1.0):
    """y = x if x > 0 else alpha (exp(x) - 1), elementwise (:class:`Elu`).

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    alpha : float, default 1.0
        Scale of the negative part.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(Elu(alpha), x)


def selu(x, alpha=1.67326, gamma=1.0507):
    """y = gamma x if x > 0 else gamma alpha (exp(x) - 1), elementwise (:class:`SeLU`).

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    alpha : float, default 1.67326
        Scale of the negative part.
    gamma : float, default 1.0507
        Overall scale.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(SeLU(alpha, gamma), x)


def leakyrelu(x, a=0.01):
    """y = x if x > 0 else a x, elementwise (:class:`LeakyRelu`).

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    a : float, default 0.01
        Slope of the negative part.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(LeakyRelu(a), x)


def hardsigmoid(x, alpha=0.2, gamma=0.5):
    """y = clip(alpha x + gamma, 0, 1), elementwise (:class:`HardSigmoid`).

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    alpha : float, default 0.2
        Slope.
    gamma : float, default 0.5
        Offset.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(HardSigmoid(alpha, gamma), x)


def prelu(x, slope):
    """y = x if x > 0 else slope x, elementwise (:class:`PRelu`); both x and slope get
    gradients.

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    slope : Tensor
        Broadcasts with x (e.g. one value per channel).

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(PRelu(), x, slope)


def clip(x, min=None, max=None):  # noqa: A002
    """y = min(max(x, min), max), elementwise (:class:`Clip`); dx = dy inside [min, max], 0
    outside.

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    min, max : float or None
        Bounds; None leaves that side open.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(Clip(min, max), x)


def cast(x, to):
    """Convert x to dtype ``to`` (:class:`Cast`); the gradient is cast back to x's dtype.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    to : int
        A SINGA dtype code (``singa.tensor.float32``, ``int32``, ...).

    Returns
    -------
    Tensor
        y, of x's shape, dtype ``to``.
    """
    return _first(Cast(to), x)


def sum(*xs):  # noqa: A001
    """y = x_1 + ... + x_n, elementwise with broadcasting (:class:`Sum`); each dx_i = dy reduced
    to x_i's shape.

    Parameters
    ----------
    *xs : Tensor
        At least one tensor; shapes broadcast together.

    Returns
    -------
    Tensor
        y, of the broadcast shape.
    """
    return _first(Sum(), *xs)


def mean(*xs):
    """y = (x_1 + ... + x_n) / n, elementwise with broadcasting (:class:`Mean`).

    Parameters
    ----------
    *xs : Tensor
        At least one tensor; shapes broadcast together.

    Returns
    -------
    Tensor
        y, of the broadcast shape.
    """
    return _first(Mean(), *xs)


def max(*xs):  # noqa: A001
    """y = max(x_1, ..., x_n), elementwise with broadcasting (:class:`Max`); the gradient goes
    to the input holding the maximum.

    Parameters
    ----------
    *xs : Tensor
        At least one tensor; shapes broadcast together.

    Returns
    -------
    Tensor
        y, of the broadcast shape.
    """
    return _first(Max(), *xs)


def min(*xs):  # noqa: A001
    """y = min(x_1, ..., x_n), elementwise with broadcasting (:class:`Min`); the gradient goes
    to the input holding the minimum.

    Parameters
    ----------
    *xs : Tensor
        At least one tensor; shapes broadcast together.

    Returns
    -------
    Tensor
        y, of the broadcast shape.
    """
    return _first(Min(), *xs)


def matmul(x, w):
    """y = x @ w with numpy's matmul semantics, batched with broadcasting (:class:`Matmul`); dx
    = dy w^T, dw = x^T dy.

    Parameters
    ----------
    x : Tensor
        Shape (..., M, K); a floating dtype.
    w : Tensor
        Shape (..., K, N), same dtype.

    Returns
    -------
    Tensor
        y, shape (..., M, N).
    """
    return _first(Matmul(), x, w)


def add_bias(x, b, axis=0):
    """y = x + b for a 2-D x (:class:`AddBias`); x is not modified.

    Parameters
    ----------
    x : Tensor
        Shape (M, N).
    b : Tensor
        Shape (N,) for axis 0, (M,) for axis 1.
    axis : int, default 0
        0 adds b to every row, 1 to every column.

    Returns
    -------
    Tensor
        y, shape (M, N).
    """
    return _first(AddBias(axis), x, b)


def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):  # noqa: N803
    """y = alpha op(A) op(B) + beta C, op(M) = M^T when its flag is set (ONNX Gemm,
    :class:`Gemm`).

    Parameters
    ----------
    A : Tensor
        Shape (M, K), or (K, M) with transA.
    B : Tensor
        Shape (K, N), or (N, K) with transB.
    C : Tensor, optional
        Broadcasts to (M, N); omitted: no bias term.
    alpha, beta : float, default 1.0
        Scales of the product and of C.
    transA, transB : int, default 0
        1 transposes A (B) first.

    Returns
    -------
    Tensor
        y, shape (M, N).
    """
    op = Gemm(alpha, beta, transA, transB)
    return _first(op, A, B) if C is None else _first(op, A, B, C)


def softmax(x, axis=1):
    """y = exp(x) / sum(exp(x)) along ``axis`` (:class:`SoftMax`).

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    axis : int, default 1
        The axis normalised.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(SoftMax(axis), x)


def log_softmax(x, axis=1):
    """y = x - log(sum(exp(x))) along ``axis`` (:class:`LogSoftMax`).

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    axis : int, default 1
        The axis normalised.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(LogSoftMax(axis), x)


def globalaveragepool(x, data_format="channels_first"):
    """Mean over the spatial axes, kept as size 1 (:class:`GlobalAveragePool`).

    Parameters
    ----------
    x : Tensor
        Shape (N, C, *spatial) (channels_first) or (N, *spatial, C) (channels_last).
    data_format : str, default "channels_first"
        Where the channel axis is.

    Returns
    -------
    Tensor
        y, x's shape with every spatial axis 1.
    """
    return _first(GlobalAveragePool(data_format), x)


def shape(x):
    """The shape of x as a 1-D int32 tensor (:class:`Shape`); no gradient flows.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.

    Returns
    -------
    Tensor
        Shape (x.ndim,), int32.
    """
    return _first(Shape(), x)







def cat(xs, axis=0):
    """Concatenate along ``axis`` (:class:`Concat`); dx_i = the matching slice of dy.

    Parameters
    ----------
    xs : sequence of Tensor
        At least one; equal shapes except along axis, one dtype.
    axis : int, default 0
        The axis joined.

    Returns
    -------
    Tensor
        y, whose size along axis is the sum of the inputs'.

    Raises
    ------
    ShapeError
        xs is empty.
    """
    if not xs:
        raise ShapeError("cat: needs at least one tensor to concatenate, got an empty list")
    return _first(Concat(axis), *xs)


def split(x, axis, parts, num_output=None):
    """Split x along ``axis`` (:class:`Split`).

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    axis : int
        The axis cut.
    parts : sequence of int or None
        Sizes of the pieces, summing to x.shape[axis].
    num_output : int, optional
        With parts None: the number of equal pieces.

    Returns
    -------
    tuple of Tensor
        The pieces, in order.
    """
    return Split(axis, parts, num_output)(x)


def slice(x, starts, ends, axes=None, steps=None):  # noqa: A001
    """ONNX Slice (:class:`Slice`): x[starts:ends:steps] on ``axes``, numpy semantics per axis;
    dx = dy written into zeros.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    starts, ends : sequence of int
        Bounds per sliced axis (negative counts from the end).
    axes : sequence of int, optional
        The sliced axes; None: the first len(starts).
    steps : sequence of int, optional
        Strides; None: 1.

    Returns
    -------
    Tensor
        y, x's dtype.
    """
    return _first(Slice(starts, ends, axes, steps), x)


def gather(x, axis, indices):
    """y = take(x, indices, axis) (:class:`Gather`); dx = scatter-add of dy.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    axis : int
        The axis indexed.
    indices : int or sequence of int
        Positions along axis (nested lists give more dimensions).

    Returns
    -------
    Tensor
        y, x.shape with axis replaced by the shape of indices.
    """
    return _first(Gather(axis, indices), x)


def tile(x, repeats):
    """numpy.tile (:class:`Tile`): repeat x ``repeats[i]`` times along axis i.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    repeats : int or sequence of int
        A shorter sequence applies to the trailing axes, a longer one adds leading axes.

    Returns
    -------
    Tensor
        y, x's dtype.
    """
    return _first(Tile(repeats), x)


def expand(x, shape):
    """ONNX Expand (:class:`Expand`): broadcast x against ``shape``; dx = dy summed back.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    shape : sequence of int
        Broadcasts with x.shape.

    Returns
    -------
    Tensor
        y, the broadcast shape.
    """
    return _first(Expand(shape), x)


def pad(x, mode, pads, constant=0.0):
    """Pad x (:class:`Pad`).

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    mode : str
        "constant", "reflect" or "edge".
    pads : sequence of int
        ONNX order: the begin pads of every axis, then the end pads (2 x.ndim values).
    constant : float, default 0.0
        The fill of constant mode.

    Returns
    -------
    Tensor
        y, each axis grown by its two pads.
    """
    return _first(Pad(mode, pads, constant), x)


def upsample(x, mode, scales):
    """Nearest-neighbour upsampling by integer ``scales`` (:class:`UpSample`).

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    mode : str
        "nearest".
    scales : sequence of int
        One factor per axis.

    Returns
    -------
    Tensor
        y, y.shape[i] = x.shape[i] scales[i].
    """
    return _first(UpSample(mode, scales), x)




def where(x, y, condition):
    """y = x where condition else y, with broadcasting (:class:`Where`); the gradient is routed
    by the condition.

    Parameters
    ----------
    x, y : Tensor
        The two sources; shapes broadcast with condition.
    condition : Tensor or array-like
        Nonzero (true) picks x.

    Returns
    -------
    Tensor
        Of the broadcast shape.
    """
    return _first(Where(condition), x, y)


def scatter_elements(x, indices, updates, axis=0):
    """ONNX ScatterElements (:class:`ScatterElements`): y = x with y[..., indices[i], ...] =
    updates[i] along ``axis``; dx = dy with the scattered cells 0.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.
    indices : Tensor or array-like of int
        Positions along axis, of updates' shape.
    updates : Tensor or array-like
        The values written (constant: no gradient).
    axis : int, default 0
        The axis indexed.

    Returns
    -------
    Tensor
        y, x's shape and dtype.
    """
    return _first(ScatterElements(indices, updates, axis), x)


def constant_of_shape(x, value=0.0):
    """A tensor of the shape held by x, filled with ``value`` (:class:`ConstantOfShape`).

    Parameters
    ----------
    x : Tensor
        1-D, an integer shape.
    value : float, default 0.0
        The fill.

    Returns
    -------
    Tensor
        y, of shape tuple(x).
    """
    return _first(ConstantOfShape(value), x)


def nonzero(x):
    """Indices of the nonzero cells of x (:class:`NonZero`), computed on the host.

    Parameters
    ----------
    x : Tensor
        Any shape and dtype.

    Returns
    -------
    Tensor
        Shape (x.ndim, nnz), int32.
    """
    return _first(NonZero(), x)


def onehot(axis, indices, depth, values):
    """One-hot encoding along ``axis`` (:class:`OneHot`): y = on where the position equals the
    index, off elsewhere.

    Parameters
    ----------
    axis : int
        Where the new axis of length depth goes.
    indices : Tensor
        Integer class ids, any shape.
    depth : int
        The number of classes.
    values : sequence of 2 numbers
        [off, on].

    Returns
    -------
    Tensor
        y, indices' shape with depth inserted at axis.
    """
    return _first(OneHot(axis, depth, values), indices)


def cossim(a, b):
    """Row-wise cosine similarity (:class:`CosSim`): y_i = a_i . b_i / (|a_i| |b_i|).

    Parameters
    ----------
    a, b : Tensor
        Shape (N, D), a floating dtype.

    Returns
    -------
    Tensor
        y, shape (N,).
    """
    return _first(CosSim(), a, b)


def embedding(x, w):
    """y = the rows of w at the integer ids x (:class:`Embedding`); dw = scatter-add of dy.

    Parameters
    ----------
    x : Tensor
        Integer ids, any shape; a float dtype is refused.
    w : Tensor
        Shape (V, D), the embedding table.

    Returns
    -------
    Tensor
        y, shape x.shape + (D,), w's dtype.
    """
    return _first(Embedding(), x, w)


def dropout(x, seed=0, ratio=0.5):
    """Training: y = x * mask / (1 - ratio), mask ~ Bernoulli(1 - ratio); otherwise y = x
    (:class:`Dropout`).

    Parameters
    ----------
    x : Tensor
        Any shape; a floating dtype (float32, float16 or float64).
    seed : int, default 0
        Seed of the mask.
    ratio : float, default 0.5
        The probability of dropping a cell.

    Returns
    -------
    Tensor
        y, of x's shape and dtype.
    """
    return _first(Dropout(seed, ratio), x)


def conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0, 0)):
    """y = conv(x, W) + b with the geometry of ``handle`` (NCHW).

    Parameters
    ----------
    handle : ConvHandle
        Kernel size, stride, padding, groups and channels.
    x : Tensor
        Shape (N, C_in, H, W).
    W : Tensor
        Shape (C_out, C_in / group, kh, kw).
    b : Tensor, optional
        Shape (C_out,).
    odd_padding : tuple of 4 int, default (0, 0, 0, 0)
        Extra asymmetric pads of x.

    Returns
    -------
    Tensor
        y, shape (N, C_out, H_out, W_out).
    """
    op = _Conv2d(handle, odd_padding)
    return _first(op, x, W) if b is None else _first(op, x, W, b)


def batchnorm_2d(handle, x, scale, bias, running_mean, running_var):
    """Batch normalisation over axis 1 of (N, C) or (N, C, H, W) input: y = scale (x - mean) /
    sqrt(var + eps) + bias.

    In training, mean and var are the batch's and the running statistics are updated in place
    (running = momentum running + (1 - momentum) batch); otherwise the running ones are used.

    Parameters
    ----------
    handle : BatchNormHandle
        Momentum and eps.
    x : Tensor
        Shape (N, C) or (N, C, H, W).
    scale, bias : Tensor
        Shape (C,).
    running_mean, running_var : Tensor
        Shape (C,).

    Returns
    -------
    Tensor
        y, x's shape.
    """
    return _first(_BatchNorm2d(handle, running_mean, running_var), x, scale, bias)


def pooling_2d(handle, x, odd_padding=(0, 0, 0, 0)):
    """Max or average pooling with the geometry of ``handle`` (NCHW).

    Parameters
    ----------
    handle : PoolingHandle
        Kernel, stride, padding and the pooling kind.
    x : Tensor
        Shape (N, C, H, W).
    odd_padding : tuple of 4 int, default (0, 0, 0, 0)
        Extra asymmetric pads of x.

    Returns
    -------
    Tensor
        y, shape (N, C, H_out, W_out).
    """
    return _first(_Pooling2d(handle, odd_padding), x)


def softmax_cross_entropy(x, t):
    """loss = mean_n(-sum_c q log softmax(x)) (:class:`SoftMaxCrossEntropy`).

    Parameters
    ----------
    x : Tensor
        Logits, shape (N, C).
    t : Tensor
        Int class ids of shape (N,), or a dense (N, C) target read as q = t / sum_c t.

    Returns
    -------
    Tensor
        The loss, shape (1,), x's dtype.
    """
    return _first(SoftMaxCrossEntropy(t), x)


def cross_entropy(y, t):
    """loss = -sum(t log y) / N for probabilities y (:class:`CrossEntropy`).

    Parameters
    ----------
    y : Tensor
        Probabilities, shape (N, C).
    t : Tensor
        Target, shape (N, C).

    Returns
    -------
    Tensor
        The loss, shape (1,).
    """
    return _first(CrossEntropy(t), y)


def binary_cross_entropy(x, t):
    """loss = -sum(t log(x + eps) + (1 - t) log(1 - x + eps)) / N, eps = 1e-4
    (:class:`BinaryCrossEntropy`).

    Parameters
    ----------
    x : Tensor
        Probabilities, shape (N, ...).
    t : Tensor
        Target of x's shape.

    Returns
    -------
    Tensor
        The loss, shape (1,).
    """
    return _first(BinaryCrossEntropy(t), x)


def mse_loss(x, t):
    """loss = sum((x - t)^2) / n over the n cells (:class:`MeanSquareError`); dx = 2 (x - t) / n
    dy.

    Parameters
    ----------
    x : Tensor
        Any shape.
    t : Tensor
        Target of x's shape.

    Returns
    -------
    Tensor
        The loss, shape (1,).
    """
    # SINGA's form: the target is part of the operator, so the loss has one input and
    # ``loss.creator.backward()`` returns dx alone
    return _first(MeanSquareError(t), x)


def ranking_loss(pos, neg, M=0.2):  # noqa: N803
    """loss = mean(max(0, M - pos + neg)) (:class:`RankingLoss`).

    Parameters
    ----------
    pos, neg : Tensor
        Scores of the positive and negative samples, one shape.
    M : float, default 0.2
        The margin.

    Returns
    -------
    Tensor
        The loss, shape (1,).
    """
    return _first(RankingLoss(M), pos, neg)


_LAYER_ALIASES = ("Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                  "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN_Base", "RNN", "LSTM")


def __getattr__(name):
    # SINGA re-exports these layers from autograd; import lazily (layer imports autograd).
    if name in _LAYER_ALIASES:
        from .. import layer

        return getattr(layer, name)
    raise AttributeError(f"module 'singa.autograd' has no attribute {name!r}")
