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
from . import _engine, _functions
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
from ._onnx_extra import ArgMax, ConvTranspose2d
from ._products import AddBias, CosSim, Gemm, GlobalAveragePool, LogSoftMax, Matmul, SoftMax
from ._rearrangements import OPERATORS as _REARRANGEMENT_OPERATORS
from ._recurrent import GRUSeq, LSTMSeq, has_seq_kernel  # noqa: F401  (public: singa-onnx uses them)
from ._reductions import OPERATORS as _REDUCTION_OPERATORS
from ._shape import (
    Concat,
    ConstantOfShape,
    Embedding,
    Expand,
    Gather,
    NonZero,
    OneHot,
    Pad,
    ScatterElements,
    Shape,
    Slice,
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


# identity, elu, ..., matmul, ..., softmax_cross_entropy, ..., argmax: the functions declared
# on their Operator classes (``@declares(Function(...))``), each only building its Operator and
# calling it
_DECLARED = {name: _functions.build(decl, cls, __name__)
             for name, (decl, cls) in _functions.FUNCTIONS.items()}
globals().update(_DECLARED)


# ---------------------------------------------------------------- written out
# cat checks for an empty list (an Operator called on nothing has no input to read the
# device from) and passes the sequence's tensors as the Operator's inputs
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
    return Concat(axis)(*xs)[0]


_LAYER_ALIASES = ("Linear", "Conv2d", "SeparableConv2d", "BatchNorm2d", "Pooling2d",
                  "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN_Base", "RNN", "LSTM")


def __getattr__(name):
    # SINGA re-exports these layers from autograd; import lazily (layer imports autograd).
    if name in _LAYER_ALIASES:
        from .. import layer

        return getattr(layer, name)
    raise AttributeError(f"module 'singa.autograd' has no attribute {name!r}")
