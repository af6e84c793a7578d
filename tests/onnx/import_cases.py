"""One table of single-node ONNX models: every import handler with non-default attributes.

Each :class:`Case` is one node (op type, attributes, inputs, opset). ``test_import_attributes``
builds it with ``onnx.helper``, checks it with ``onnx.checker`` and runs it in singa-onnx and
onnxruntime. The table is meant to set every attribute a handler declares to a value other
than ONNX's default at least once (a meta-test checks that against the handler registry and
onnx's schemas), and to reach each handler's other paths: 1-D and 2-D geometry, negative
axes, 3-D and 4-D inputs, opsets before and after an attribute became an input.

Inputs: a shape tuple is a float32 graph input drawn from N(0, 1); :class:`U` a graph input
drawn uniformly (a domain such as log's, or integers); :class:`Feed` a graph input with fixed
values; a numpy array an initializer; ``None`` an omitted optional input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from onnx import TensorProto as T
from onnx import numpy_helper

f32, i64 = np.float32, np.int64


@dataclass(frozen=True)
class U:
    """A graph input of ``shape`` drawn uniformly from [lo, hi) (integers for int dtypes)."""

    shape: tuple
    lo: float = -1.0
    hi: float = 1.0
    dtype: type = np.float32


@dataclass(frozen=True)
class Feed:
    """A graph input with exactly these values."""

    value: np.ndarray = field(compare=False)


@dataclass(frozen=True)
class Case:
    op: str
    inputs: tuple
    attrs: dict = field(default_factory=dict, compare=False)
    opset: int = 17
    outputs: int = 1
    unused: tuple = ()  # output positions left unnamed (optional outputs not asked for)
    name: str = ""
    oracle: str = "onnxruntime"  # or "reference": onnx's evaluator, where onnxruntime has none

    @property
    def id(self) -> str:
        """``op-name-attr=value-...-first input's shape-opset``: Conv-dilations=2x2-1x3x9x9-op17."""
        parts = [self.op] + ([self.name] if self.name else []) + \
            [f"{k}={_short(v)}" for k, v in self.attrs.items()] + \
            [_short(_input_shape(self.inputs[0])), f"op{self.opset}"]
        return "-".join(parts)


def _input_shape(spec) -> tuple:
    return spec.shape if isinstance(spec, (U, np.ndarray)) else spec.value.shape \
        if isinstance(spec, Feed) else spec


def _short(v):
    if isinstance(v, (list, tuple)):
        return "x".join(str(i) for i in v)
    if hasattr(v, "data_type"):  # a TensorProto attribute
        return str(numpy_helper.to_array(v).tolist())
    return str(v)


def c(*args, **kw) -> Case:
    """``c(op, inputs, attr=value, ..., opset=, outputs=, unused=, name=, oracle=)``."""
    op, inputs = args
    meta = {k: kw.pop(k) for k in ("opset", "outputs", "unused", "name", "oracle") if k in kw}
    return Case(op, tuple(inputs), kw, **meta)


def K(*values, dtype=i64):
    """An int64 (or ``dtype``) initializer: ``K(1, 2)`` is [1, 2], ``K([[1], [2]])`` nested."""
    if len(values) == 1 and isinstance(values[0], list):
        values = values[0]
    return np.array(values, dtype)


def S(value, dtype=f32):
    """A scalar initializer."""
    return np.array(value, dtype)


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(f32)


X3, X4 = (2, 3, 4), (2, 3, 4, 5)
POS = U(X3, 0.2, 3.0)

# -------------------------------------------------------------------- elementwise
_UNARY_DOMAIN = {"Log": POS, "Sqrt": POS, "Reciprocal": POS, "Acos": U(X3, -0.9, 0.9),
                 "Asin": U(X3, -0.9, 0.9), "Atanh": U(X3, -0.9, 0.9),
                 "Acosh": U(X3, 1.1, 3.0), "Not": U(X3, 0, 2, np.bool_)}
UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Neg", "Reciprocal", "Sign",
         "Ceil", "Floor", "Round", "Erf", "Cos", "Cosh", "Sin", "Sinh", "Tan", "Acos", "Acosh",
         "Asin", "Asinh", "Atan", "Atanh", "Softplus", "Softsign", "Identity", "Not", "IsNaN",
         "HardSwish", "Mish"]
ELEMENTWISE = [c(op, [_UNARY_DOMAIN.get(op, X3)], opset=22 if op in ("HardSwish", "Mish")
                 else 17) for op in UNARY]

ELEMENTWISE += [
    c("LeakyRelu", [X3], alpha=0.3),
    c("Elu", [X3], alpha=0.5),
    c("Selu", [X3], alpha=1.2, gamma=0.9),
    c("HardSigmoid", [X3], alpha=0.3, beta=0.4),
    c("ThresholdedRelu", [X3], alpha=0.4),
    c("Celu", [X3], alpha=0.7),
    c("Shrink", [X3], bias=0.2, lambd=0.3),
    c("Swish", [X3], alpha=0.5, opset=24),
    c("Gelu", [X3], opset=20),
    c("Gelu", [X3], approximate="tanh", opset=20),
    c("PRelu", [X4, _r(3, 1, 1)]),
    c("Clip", [X3, S(-0.5), S(0.7)]),
    c("Clip", [X3, None, S(0.3)], name="max_only"),
    c("Clip", [X3], min=-0.4, max=0.6, opset=6),
    c("IsInf", [Feed(np.array([[1, np.inf, -np.inf, 0]], f32))]),
    c("IsInf", [Feed(np.array([[1, np.inf, -np.inf, 0]], f32))], detect_negative=0),
    c("IsInf", [Feed(np.array([[1, np.inf, -np.inf, 0]], f32))], detect_positive=0),
    c("Cast", [X3], to=T.INT32),
    c("Cast", [X3], to=T.BOOL),
    c("Cast", [X3], to=T.DOUBLE),
    c("Cast", [U(X3, -50, 50, np.int32)], to=T.FLOAT),
    c("CastLike", [X3, K(1, dtype=np.int32)], opset=15),
    c("Where", [U(X3, 0, 2, np.bool_), X3, (3, 4)]),
    c("Pow", [POS, (4,)]),
    c("Mod", [U(X3, -20, 20, np.int32), K(3, -4, 5, 7, dtype=np.int32)]),
    c("Mod", [X3, S([0.7, -1.3, 2.0, 0.9])], fmod=1),
    c("BitShift", [U(X3, 0, 200, np.uint8), K(1, 2, 3, 0, dtype=np.uint8)], direction="LEFT",
      opset=11),
    c("BitShift", [U(X3, 0, 200, np.uint32), K(1, 2, 3, 0, dtype=np.uint32)],
      direction="RIGHT", opset=11),
]
for _op in ("Add", "Sub", "Mul", "Div"):
    ELEMENTWISE.append(c(_op, [X4, (4, 1)]))
ELEMENTWISE.append(c("Div", [U(X3, -20, 20, np.int32), K(3, -4, 5, 7, dtype=np.int32)],
                     name="int"))
for _op in ("Less", "Greater", "Equal", "LessOrEqual", "GreaterOrEqual"):
    ELEMENTWISE.append(c(_op, [U(X3, -2, 3, np.int32), U((4,), -2, 3, np.int32)]))
for _op in ("And", "Or", "Xor"):
    ELEMENTWISE.append(c(_op, [U(X3, 0, 2, np.bool_), U((3, 1), 0, 2, np.bool_)]))
for _op in ("Sum", "Max", "Min", "Mean"):
    ELEMENTWISE.append(c(_op, [X3, (3, 4), (2, 1, 4)]))

# Softmax and friends: every axis of 3-D and 4-D inputs, and the opset < 13 coercion to 2-D
SOFTMAX = []
for _op in ("Softmax", "LogSoftmax", "Hardmax"):
    for _shape, _axes in ((X3, (0, 1, -2)), (X4, (1, 2, -1))):
        SOFTMAX += [c(_op, [_shape], axis=a) for a in _axes]
    SOFTMAX.append(c(_op, [X3], opset=13, name="default_axis"))
for _op in ("Softmax", "LogSoftmax"):
    SOFTMAX += [c(_op, [X4], axis=2, opset=11), c(_op, [X3], opset=11, name="default_axis")]

# ---------------------------------------------------------------- nn: convolution
W2 = _r(4, 3, 3, 3)  # (out, in, kh, kw)
CONV = [
    c("Conv", [X4, W2], pads=[1, 1, 1, 1]),
    c("Conv", [(1, 3, 9, 9), W2], dilations=[2, 2]),
    c("Conv", [(1, 3, 9, 10), W2, _r(4)], dilations=[2, 3], pads=[2, 1, 0, 3]),
    c("Conv", [(2, 3, 9, 8), W2], strides=[2, 3], dilations=[1, 2], kernel_shape=[3, 3]),
    c("Conv", [(1, 4, 7, 7), _r(6, 2, 3, 3), _r(6)], group=2, dilations=[2, 1],
      strides=[1, 2], pads=[0, 1, 2, 1]),
    c("Conv", [(1, 4, 6, 6), _r(4, 1, 3, 3)], group=4, name="depthwise"),
    c("Conv", [(1, 3, 7, 8), W2], auto_pad="SAME_UPPER", strides=[2, 2]),
    c("Conv", [(1, 3, 7, 8), W2], auto_pad="SAME_LOWER", strides=[2, 3]),
    c("Conv", [(1, 3, 7, 8), W2], auto_pad="VALID", strides=[2, 2]),
    c("Conv", [(2, 3, 11), _r(4, 3, 3)], dilations=[3], strides=[2], pads=[1, 2]),
    c("Conv", [(1, 4, 10), _r(6, 2, 3), _r(6)], group=2, auto_pad="SAME_LOWER", strides=[2]),
    c("ConvTranspose", [(1, 3, 4, 5), _r(3, 2, 3, 3)], strides=[2, 2]),
    c("ConvTranspose", [(1, 3, 4, 5), _r(3, 2, 3, 3), _r(2)], strides=[2, 1], pads=[1, 0, 0, 1],
      output_padding=[1, 0]),
    c("ConvTranspose", [(1, 4, 4, 4), _r(4, 2, 3, 2)], group=2, dilations=[2, 1]),
    c("ConvTranspose", [(1, 3, 4, 5), _r(3, 2, 3, 3)], strides=[2, 2], output_shape=[8, 9]),
    c("ConvTranspose", [(1, 3, 4, 5), _r(3, 2, 3, 3)], strides=[2, 2], auto_pad="SAME_UPPER"),
    c("ConvTranspose", [(1, 3, 4, 5), _r(3, 2, 3, 3)], strides=[2, 2], auto_pad="SAME_LOWER"),
    c("ConvTranspose", [(1, 3, 4, 5), _r(3, 2, 3, 3)], kernel_shape=[3, 3], auto_pad="VALID"),
    c("ConvTranspose", [(2, 3, 6), _r(3, 2, 3)], strides=[2], dilations=[2], pads=[1, 0]),
]

# ---------------------------------------------------------------- nn: pooling
POOL = []
for _op in ("MaxPool", "AveragePool", "LpPool"):
    POOL += [
        c(_op, [X4], kernel_shape=[2, 3]),
        c(_op, [(1, 2, 7, 8)], kernel_shape=[3, 2], strides=[2, 3], pads=[1, 0, 0, 1]),
        c(_op, [(1, 2, 7, 8)], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        c(_op, [(1, 2, 7, 8)], kernel_shape=[3, 2], strides=[2, 3], auto_pad="SAME_LOWER"),
        c(_op, [(1, 2, 7, 8)], kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID"),
        c(_op, [(1, 2, 7, 8)], kernel_shape=[2, 2], strides=[2, 3], ceil_mode=1,
          opset=18 if _op == "LpPool" else 17),
        c(_op, [(2, 3, 9)], kernel_shape=[3], strides=[2], pads=[1, 1]),
        c(_op, [X4], kernel_shape=[2, 2], dilations=[1, 1], name="unit_dilations",
          opset={"MaxPool": 17, "AveragePool": 19, "LpPool": 18}[_op]),
    ]
POOL += [
    c("MaxPool", [X4], kernel_shape=[2, 2], storage_order=0, name="row_major"),
    c("AveragePool", [(1, 2, 7, 8)], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
      count_include_pad=1),
    c("AveragePool", [(1, 2, 7, 8)], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1],
      count_include_pad=1, ceil_mode=1),
    c("LpPool", [X4], kernel_shape=[2, 2], p=1),
    c("LpPool", [X4], kernel_shape=[3, 2], strides=[1, 2], p=3, pads=[1, 0, 1, 1]),
    c("GlobalAveragePool", [X4]),
    c("GlobalAveragePool", [X3]),
    c("GlobalMaxPool", [X4]),
    c("GlobalMaxPool", [X3]),
]

# ---------------------------------------------------------------- nn: normalisation, dense
_BN = [_r(3, seed=1), _r(3, seed=2), _r(3, seed=3), np.abs(_r(3, seed=4)) + 0.5]
NORM = [
    c("BatchNormalization", [X4, *_BN], epsilon=1e-2, momentum=0.7),
    c("BatchNormalization", [(4, 3), *_BN]),
    c("BatchNormalization", [X3, *_BN], epsilon=0.5),
    c("InstanceNormalization", [X4, _r(3), _r(3, seed=1)], epsilon=0.1),
    c("InstanceNormalization", [X3, _r(3), _r(3, seed=1)]),
    c("LayerNormalization", [X4, _r(5)], epsilon=0.1),
    c("LayerNormalization", [X4, _r(4, 5), _r(4, 5, seed=1)], axis=2),
    c("LayerNormalization", [X3, _r(3, 4)], axis=-2, outputs=3),
    c("GroupNormalization", [(2, 4, 3, 3), _r(4), _r(4, seed=1)], num_groups=2, epsilon=0.1,
      opset=21),
    c("GroupNormalization", [(2, 6, 5), _r(6), _r(6, seed=1)], num_groups=3, opset=21),
    c("RMSNormalization", [X4, _r(4, 5)], axis=2, epsilon=0.1, opset=23),
    c("RMSNormalization", [X3, _r(4)], opset=23),
    c("LpNormalization", [X3], axis=0, p=1),
    c("LpNormalization", [X4], axis=2),
    c("Gemm", [(3, 4), (4, 5)]),
    c("Gemm", [(4, 3), (5, 4), _r(5)], transA=1, transB=1, alpha=0.5, beta=2.0),
    c("Gemm", [(3, 4), (5, 4), _r(3, 1)], transB=1, beta=-1.0),
    c("MatMul", [X4, (5, 2)]),
    c("MatMul", [(3, 4), (2, 4, 5)]),
    c("Dropout", [X3, S(0.3)], seed=3, outputs=2),
    c("Dropout", [X3], ratio=0.2, opset=11),
]

# ---------------------------------------------------------------- reductions
REDUCE = []
for _op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL1", "ReduceL2",
            "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd"):
    _x = POS if _op == "ReduceLogSum" else U(X4, -1.2, 1.2) if _op == "ReduceProd" else X4
    _x3 = POS if _op == "ReduceLogSum" else X3
    REDUCE += [
        c(_op, [_x, K(0, 2)], keepdims=0, opset=18),
        c(_op, [_x, K(-1)], opset=18),
        c(_op, [_x3], keepdims=0, opset=18, name="all"),
        c(_op, [_x3, None], noop_with_empty_axes=1, opset=18),
    ]
    if _op != "ReduceSum":  # ReduceSum's axes is an input from opset 13, the others' from 18
        REDUCE.append(c(_op, [_x], axes=[1, -1], keepdims=0, opset=17))
REDUCE += [
    c("ReduceSum", [X4], axes=[1, 3], opset=11),
    c("ArgMax", [U(X4, 0, 3, np.int32)], axis=1, keepdims=0),
    c("ArgMax", [U(X3, 0, 3, np.int32)], axis=-1, select_last_index=1),
    c("ArgMin", [U(X4, 0, 3, np.int32)], axis=2, keepdims=0, select_last_index=1),
    c("ArgMin", [X3]),
    c("TopK", [X4, K(2)], axis=1, outputs=2),
    c("TopK", [X3, K(3)], largest=0, outputs=2),
    c("TopK", [U(X3, 0, 3, np.int32), K(2)], axis=0, largest=0, outputs=2, name="ties"),
    c("CumSum", [X3, S(1, i64)]),
    c("CumSum", [X4, S(-2, i64)], exclusive=1),
    c("CumSum", [X3, S(0, i64)], reverse=1),
    c("CumSum", [X3, S(2, i64)], reverse=1, exclusive=1),
    c("CumProd", [U(X3, 0.5, 1.5), S(1, i64)], opset=26),
    c("CumProd", [U(X3, 0.5, 1.5), S(-1, i64)], exclusive=1, reverse=1, opset=26),
]

# ---------------------------------------------------------------- shape and indexing
SHAPE = [
    c("Reshape", [X4, K(0, -1, 5)]),
    c("Reshape", [X4, K(6, 20)], allowzero=1, opset=14),
    c("Flatten", [X4], axis=0),
    c("Flatten", [X4], axis=2),
    c("Flatten", [X4], axis=-1),
    c("Squeeze", [(2, 1, 4, 1), K(1)], name="axes_input"),
    c("Squeeze", [(2, 1, 4, 1), K(-1, 1)], name="negative_axes"),
    c("Squeeze", [(2, 1, 4, 1)], name="all"),
    c("Squeeze", [(2, 1, 4, 1)], axes=[3], opset=11),
    c("Unsqueeze", [X3, K(0, 3)], name="axes_input"),
    c("Unsqueeze", [X3, K(-1, 1)], name="negative_axes"),
    c("Unsqueeze", [X3], axes=[1, -1], opset=11),
    c("Transpose", [X3]),
    c("Transpose", [X4], perm=[0, 3, 1, 2]),
    c("Transpose", [X3], perm=[1, 0, 2]),
    c("Concat", [X3, (2, 1, 4), (2, 2, 4)], axis=1),
    c("Concat", [X3, (1, 3, 4)], axis=0),
    c("Concat", [X4, (2, 3, 4, 2)], axis=-1),
    c("Split", [X4, K(1, 2)], axis=1, outputs=2),
    c("Split", [(2, 7, 3)], axis=1, num_outputs=3, outputs=3, opset=18),
    c("Split", [X4], axis=-1, split=[2, 3], outputs=2, opset=11),
    c("Split", [(6, 2)], outputs=3, name="equal"),
    c("Slice", [X4, K(1, 0), K(3, -1), K(1, 3)]),
    c("Slice", [X4, K(-1, 4), K(-5, 0), K(2, 3), K(-1, -2)], name="negative_steps"),
    c("Slice", [X4, K(0), K(9223372036854775807), K(-1), K(2)], name="to_the_end"),
    c("Slice", [X3], starts=[1], ends=[3], axes=[2], opset=9),
    c("Gather", [X4, K([0, 2], [1, 1])], axis=1),
    c("Gather", [X3, K(-1)], axis=-1),
    c("Gather", [(5, 3), U((2, 4), 0, 5, np.int64)], name="runtime_ids"),
    c("GatherElements", [X3, K([[[0, 2, 1, 0]] * 3] * 2)], axis=1),
    c("GatherElements", [X3, K([[[3, -1], [0, 1], [2, 2]]] * 2)], axis=2),
    c("GatherND", [X3, K([[0, 1], [1, 2]])]),
    c("GatherND", [X3, K([[1], [0]])], batch_dims=1),
    c("Expand", [(3, 1), K(2, 3, 4)]),
    c("Tile", [X3, K(2, 1, 3)]),
    c("Tile", [(2, 1, 3, 1, 2), K(1, 2, 1, 3, 1)]),
    c("Pad", [X4, K(0, 1, 2, 0, 0, 2, 1, 1), S(1.5)]),
    c("Pad", [X4, K(0, 0, 2, 1, 0, 0, 1, 3)], mode="reflect"),
    c("Pad", [X4, K(0, 1, 1, 2, 0, 2, 0, 1)], mode="edge"),
    c("Pad", [X4, K(1, 2, 2, 1), S(-1.0), K(1, -1)], opset=18, name="axes"),
    c("Pad", [X3], pads=[0, 1, 2, 0, 1, 0], value=2.5, opset=10),
    c("Shape", [X4]),
    c("Shape", [X4], start=1, opset=15),
    c("Shape", [X4], start=-3, end=-1, opset=15),
    c("Size", [X4]),
    c("ConstantOfShape", [U((3,), 1, 4, np.int64)],
      value=numpy_helper.from_array(np.array([2.5], f32))),
    c("ConstantOfShape", [U((2,), 1, 4, np.int64)],
      value=numpy_helper.from_array(np.array([7], np.int32))),
    c("Range", [U((), 0, 3, np.int64), S(9, i64), S(2, i64)], name="int64"),
    c("Range", [U((), 0.0, 1.0), S(-2.0), S(-0.5)], name="float"),
    c("EyeLike", [(3, 4)], k=1),
    c("EyeLike", [(4, 3)], k=-1, dtype=T.INT32),
    c("DepthToSpace", [(1, 8, 2, 3)], blocksize=2),
    c("DepthToSpace", [(1, 8, 2, 3)], blocksize=2, mode="CRD"),
    c("SpaceToDepth", [(1, 2, 4, 6)], blocksize=2),
    c("OneHot", [U((2, 3), -4, 4, np.int64), S(4, i64), np.array([-1.0, 2.0], f32)]),
    c("OneHot", [U((2, 3), 0, 4, np.int64), S(4, i64), np.array([0.0, 1.0], f32)], axis=0),
    c("OneHot", [U((2, 3), 0, 4, np.int64), S(4, i64), np.array([0.0, 3.0], f32)], axis=1),
    c("NonZero", [U(X3, 0, 2, np.int32)]),
    c("ScatterElements", [X3, K([[[1, 0, 2, 1]]] * 2), _r(2, 1, 4)], axis=1),
    c("ScatterElements", [X3, K([[[-1, 0]]] * 2), _r(2, 1, 2)], axis=-1),
    c("ScatterND", [X3, K([[0, 1], [1, 2]]), _r(2, 4)]),
    c("Scatter", [X3, K([[[1, 0, 2, 1]]] * 2), _r(2, 1, 4)], axis=1, opset=10),
    c("Compress", [X3, K(1, 0, 1, dtype=np.bool_)], axis=1),
    c("Compress", [X3, K(0, 1, 1, 0, 1, dtype=np.bool_)]),
    c("CenterCropPad", [(2, 5, 4), K(3, 6)], axes=[1, 2], opset=18),
    c("CenterCropPad", [(2, 5, 4), K(4, 3, 5)], opset=18),
    c("Trilu", [X4]),
    c("Trilu", [X4, S(1, i64)], upper=0),
    c("Trilu", [X3, S(-1, i64)]),
    # the masked-out part is 0 whatever the values (a causal attention mask is -inf above the
    # diagonal): infinities and NaN in a graph input and in an initializer
    c("Trilu", [Feed(np.array([[-np.inf, 1.0, np.nan], [np.inf, -np.inf, 2.0]], f32))],
      name="non-finite"),
    c("Trilu", [np.full((3, 3), -np.inf, f32), S(1, i64)], upper=0, name="non-finite constant"),
    c("Einsum", [(2, 3, 4), (2, 4, 5)], equation="bij,bjk->bik", opset=12),
    c("Einsum", [(3, 4), (3, 4)], equation="ij,ij->i", opset=12),
    c("Einsum", [(3, 4), (4, 5)], equation="ij,jk", opset=12),
    c("Einsum", [X3], equation="ijk->kji", opset=12),
    c("ReverseSequence", [(4, 3, 2), K(4, 1, 3)]),
    c("ReverseSequence", [(3, 4, 2), K(2, 4, 1)], batch_axis=0, time_axis=1),
    c("Unique", [U((6,), 0, 4, np.int64)], outputs=4, opset=11),
    c("Unique", [U((5, 2), 0, 2, np.int64)], axis=0, sorted=0, outputs=4, opset=11),
    c("NonMaxSuppression", [Feed(np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 0.9, 1, 2],
                                             [0, 10, 1, 11], [0, 10.1, 1, 11.1],
                                             [0, 100, 1, 101]]], f32)),
                            Feed(np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3]]], f32)),
                            K(3), S(0.5), S(0.0)]),
    c("NonMaxSuppression", [Feed(np.array([[[0.5, 0.5, 1, 1], [0.5, 0.6, 1, 1],
                                             [0.5, 0.4, 1, 1], [0.5, 10.5, 1, 1]]], f32)),
                            Feed(np.array([[[0.9, 0.75, 0.6, 0.95]]], f32)),
                            K(2), S(0.4)], center_point_box=1),
]

_RESIZE_X = (1, 2, 3, 4)
RESIZE = [c("Resize", [_RESIZE_X, None, K(1, 1, 2, 1.5, dtype=f32)])]
for _ctm in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
             "tf_half_pixel_for_nn", "half_pixel_symmetric"):
    for _nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        RESIZE.append(c("Resize", [_RESIZE_X, None, K(1, 1, 2.5, 1.75, dtype=f32)],
                        coordinate_transformation_mode=_ctm, nearest_mode=_nm, opset=19))
for _ctm in ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
             "half_pixel_symmetric"):
    RESIZE.append(c("Resize", [_RESIZE_X, None, K(1, 1, 0.67, 1.6, dtype=f32)], mode="linear",
                    coordinate_transformation_mode=_ctm, opset=19))
RESIZE += [
    c("Resize", [_RESIZE_X, None, None, K(1, 2, 5, 7)], mode="linear"),
    c("Resize", [_RESIZE_X, None, None, K(2, 3)], axes=[2, 3], opset=18),
    c("Resize", [_RESIZE_X, None, K(3.0, 0.5, dtype=f32)], axes=[-2, -1], mode="linear",
      opset=18),
    c("Resize", [_RESIZE_X, None, None, K(6, 6)], axes=[2, 3],
      keep_aspect_ratio_policy="not_larger", opset=18),
    c("Resize", [_RESIZE_X, None, None, K(6, 6)], axes=[2, 3],
      keep_aspect_ratio_policy="not_smaller", opset=18),
    # opsets < 11 are upgraded to 13, which must keep their asymmetric coordinates (and
    # onnxruntime's nearest rounding: down when upsampling, up when downsampling)
    c("Upsample", [_RESIZE_X, K(1, 1, 2, 3, dtype=f32)], opset=9),
    c("Upsample", [_RESIZE_X], scales=[1.0, 1.0, 2.0, 1.5], opset=7),
    c("Resize", [_RESIZE_X, K(1, 1, 2.5, 1.75, dtype=f32)], opset=10),
    c("Resize", [_RESIZE_X, K(1, 1, 0.67, 0.6, dtype=f32)], opset=10, name="down"),
    c("Resize", [_RESIZE_X, K(1, 1, 2.5, 0.6, dtype=f32)], mode="linear", opset=10),
    c("Upsample", [_RESIZE_X, K(1, 1, 2, 2, dtype=f32)], mode="linear", opset=9),
]

# ---------------------------------------------------------------- misc: losses, quantisation
_T = U((3,), 0, 4, np.int64)
_T2 = Feed(np.array([[0, 3], [2, 1], [1, 1]], i64))
MISC = [
    c("NegativeLogLikelihoodLoss", [(3, 4), _T]),
    c("NegativeLogLikelihoodLoss", [(3, 4), _T], reduction="sum"),
    c("NegativeLogLikelihoodLoss", [(3, 4, 2), _T2, np.array([1, 2, 0.5, 3], f32)],
      reduction="none"),
    c("NegativeLogLikelihoodLoss", [(3, 4, 2), _T2, np.array([1, 2, 0.5, 3], f32)],
      ignore_index=1),
    c("SoftmaxCrossEntropyLoss", [(3, 4), _T], outputs=2),
    c("SoftmaxCrossEntropyLoss", [(3, 4, 2), _T2], reduction="sum", ignore_index=3),
    c("SoftmaxCrossEntropyLoss", [(3, 4, 2), _T2, np.array([1, 2, 0.5, 3], f32)],
      reduction="none", outputs=2),
    c("DequantizeLinear", [U(X3, 0, 255, np.uint8), S(0.1), S(128, np.uint8)]),
    c("DequantizeLinear", [U(X3, -128, 127, np.int8), np.array([0.1, 0.2, 0.3], f32),
                           np.array([1, -2, 3], np.int8)], axis=1, opset=13),
    c("DequantizeLinear", [U(X3, -128, 127, np.int8), np.array([0.1, 0.2, 0.3, 0.4], f32)],
      axis=-1, opset=13),
    c("DequantizeLinear", [U(X3, 0, 255, np.uint8), S(0.1), S(3, np.uint8)],
      output_dtype=T.FLOAT, opset=23),
    c("QuantizeLinear", [U(X3, -10, 10), S(0.1), S(128, np.uint8)]),
    c("QuantizeLinear", [U(X3, -10, 10), np.array([0.1, 0.2, 0.3], f32),
                         np.array([1, -2, 3], np.int8)], axis=1, opset=13),
    c("QuantizeLinear", [U(X3, -10, 10), np.array([0.05, 0.1, 0.2, 0.3], f32)], axis=-1,
      opset=13),
    c("QuantizeLinear", [U(X3, -10, 10), S(0.1)], output_dtype=T.INT8, opset=21),
    c("QuantizeLinear", [U(X3, -10, 10), S(0.1), S(3, np.uint8)], precision=T.FLOAT,
      opset=25),
]

# ---------------------------------------------------------------- recurrent
def _rnn(op, dirs, seq=3, batch=2, inp=4, hidden=5, bias=True, h0=False, layout=0, **attrs):
    g = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    x = (batch, seq, inp) if layout else (seq, batch, inp)
    ins = [x, _r(dirs, g * hidden, inp, seed=1), _r(dirs, g * hidden, hidden, seed=2)]
    ins.append(_r(dirs, 2 * g * hidden, seed=3) if bias or h0 else None)
    if h0:
        hshape = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
        ins += [None, _r(*hshape, seed=4)]
        if op == "LSTM":
            ins.append(_r(*hshape, seed=5))
    n_out = 3 if op == "LSTM" else 2
    # onnxruntime's CPU kernels refuse batch-major layout: onnx's evaluator is the oracle
    oracle = "reference" if layout else "onnxruntime"
    return c(op, ins, hidden_size=hidden, outputs=n_out, oracle=oracle, **attrs,
             **({"layout": layout} if layout else {}))


RNN = []
for _op in ("LSTM", "GRU", "RNN"):
    RNN += [
        _rnn(_op, 1),
        _rnn(_op, 2, direction="bidirectional", h0=True),
        _rnn(_op, 1, direction="reverse", bias=False),
        _rnn(_op, 2, direction="bidirectional", layout=1, h0=True),
    ]
RNN += [_rnn("GRU", 1, linear_before_reset=1, h0=True),
        _rnn("GRU", 2, direction="bidirectional", linear_before_reset=1)]


# ---------------------------------------------------------------- attention (opset 23)
def _attn(q, k, v, *extra, outputs=1, **attrs):
    # the scores output (4th) without past key/value: present key/value left unnamed
    unused = (1, 2) if outputs == 4 and len(extra) < 3 else ()
    return c("Attention", [q, k, v, *extra], opset=23, outputs=outputs, unused=unused, **attrs)


ATTENTION = [
    _attn((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4)),
    _attn((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6), is_causal=1, scale=0.3),
    _attn((1, 4, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), softcap=2.0, name="gqa"),
    _attn((2, 3, 8), (2, 5, 4), (2, 5, 6), q_num_heads=2, kv_num_heads=1),
    _attn((2, 3, 8), (2, 3, 4), (2, 3, 4), q_num_heads=4, kv_num_heads=2, is_causal=1),
    _attn((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), U((3, 3), 0, 2, np.bool_)),
    _attn((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), _r(3, 3), outputs=4,
          qk_matmul_output_mode=2, softcap=1.5),
    _attn((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), outputs=4, qk_matmul_output_mode=1,
          softcap=1.5),
    _attn((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), outputs=4, qk_matmul_output_mode=3),
    _attn((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), None, _r(1, 2, 2, 4), _r(1, 2, 2, 4),
          outputs=3, is_causal=1, name="past"),
    _attn((1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4), softmax_precision=T.FLOAT),
]

CASES: list[Case] = (ELEMENTWISE + SOFTMAX + CONV + POOL + NORM + REDUCE + SHAPE + RESIZE
                     + MISC + RNN + ATTENTION)

# attribute values the handlers cannot honour: each must be refused by name at prepare time,
# never ignored (a dilated max pool run as an undilated one would return wrong numbers)
REFUSED = [
    (c("MaxPool", [X4], kernel_shape=[2, 2], dilations=[2, 2]), "dilations"),
    (c("AveragePool", [X4], kernel_shape=[2, 2], dilations=[1, 2], opset=19), "dilations"),
    (c("LpPool", [X4], kernel_shape=[2, 2], dilations=[2, 1], opset=18), "dilations"),
    (c("MaxPool", [X4], kernel_shape=[2, 2], storage_order=1, outputs=2), "storage_order"),
    (c("MaxPool", [X4], kernel_shape=[2, 2], outputs=2), "Indices"),
    (c("Conv", [(1, 1, 4, 4, 4), _r(1, 1, 2, 2, 2)]), "1-D and 2-D"),
    (c("Conv", [(1, 1, 4, 4, 4), _r(1, 1, 2, 2, 2)], kernel_shape=[2, 2, 2]), "3-D"),
    (c("BatchNormalization", [X4, *_BN], training_mode=1, outputs=3), "training_mode"),
    (_rnn("LSTM", 1, clip=1.0), "clip"),
    (_rnn("LSTM", 1, input_forget=1), "input_forget"),
    (_rnn("LSTM", 1, activations=["Sigmoid", "Tanh", "Relu"]), "activations"),
    (_rnn("GRU", 1, clip=2.0), "clip"),
    (_rnn("RNN", 1, clip=2.0), "clip"),
    (_rnn("GRU", 1, activations=["Relu", "Tanh"]), "activations"),
    (_rnn("RNN", 1, activations=["Relu"], activation_alpha=[0.5]), "activations"),
    (c("Resize", [_RESIZE_X, None, K(1, 1, 2, 2, dtype=f32)], mode="cubic",
       cubic_coeff_a=-0.5), "cubic"),
    (c("Resize", [_RESIZE_X, None, K(1, 1, 2, 2, dtype=f32)], mode="linear", antialias=1,
       opset=18), "antialias"),
    (c("Resize", [_RESIZE_X, np.array([0, 0, 0, 0, 1, 1, 1, 1], f32),
                  K(1, 1, 2, 2, dtype=f32)], coordinate_transformation_mode="tf_crop_and_resize",
       extrapolation_value=1.0), "tf_crop_and_resize"),
    (c("Resize", [_RESIZE_X, K(1, 1, 2.5, 0.6, dtype=f32)], opset=10, name="mixed"),
     "opset >= 11"),  # nearest rounding per axis: no opset-13 form
    (c("Pad", [X3, K(0, 1, 1, 0, 1, 1)], mode="wrap", opset=19), "wrap"),
    (c("ScatterElements", [X3, K([[[1, 0, 2, 1]]] * 2), _r(2, 1, 4)], axis=1,
       reduction="add", opset=16), "reduction"),
    (c("ScatterND", [X3, K([[0, 1]]), _r(1, 4)], reduction="mul", opset=16), "reduction"),
    (c("Cast", [X3], to=T.STRING), "to=8"),
    (c("QuantizeLinear", [U((4, 4)), np.full((4, 2), 0.1, f32)], axis=1, block_size=2,
       opset=21), "block_size"),
    (c("DequantizeLinear", [U((4, 4), 0, 255, np.uint8), np.full((4, 2), 0.1, f32)], axis=1,
       block_size=2, opset=21), "block_size"),
    (c("Attention", [(1, 2, 3, 4)] * 3, left_window_size=1, opset=25), "left_window_size"),
]

# (op, attribute) pairs the table does not set to a non-default value, and why
WAIVED = {
    ("Dropout", "is_test"): "Dropout-1/6 only: opsets < 11 are upgraded to 13 before planning",
    ("BatchNormalization", "spatial"): "BatchNormalization-7/9 only: upgraded before planning",
    ("Resize", "cubic_coeff_a"): "cubic mode only, which is refused (REFUSED)",
    ("Resize", "extrapolation_value"): "tf_crop_and_resize only, which is refused (REFUSED)",
    ("Resize", "antialias"): "refused (REFUSED)",
    ("TopK", "sorted"): "sorted=0 leaves the order unspecified: onnxruntime's order is not an "
                        "oracle; the handler's sorted order is one valid answer",
    ("Cast", "round_mode"): "applies to float8e8m0 only, which singa does not hold",
    ("Cast", "saturate"): "applies to float8 targets only (onnxruntime refuses it elsewhere), "
                          "which singa does not hold",
    ("CastLike", "saturate"): "applies to float8 targets only (onnxruntime refuses it "
                              "elsewhere), which singa does not hold",
    ("QuantizeLinear", "saturate"): "applies to float8 targets only, which singa does not hold",
    ("Resize", "exclude_outside"): "cubic mode or antialias only (onnxruntime refuses it "
                                   "elsewhere), both refused (REFUSED)",
    ("CastLike", "round_mode"): "applies to float8e8m0 only, which singa does not hold",
    ("LayerNormalization", "stash_type"): "float32 is singa's compute type whatever it says",
    ("GroupNormalization", "stash_type"): "float32 is singa's compute type whatever it says",
    ("RMSNormalization", "stash_type"): "float32 is singa's compute type whatever it says",
    ("LSTM", "activation_alpha"): "only used by non-default activations, which are refused",
    ("LSTM", "activation_beta"): "only used by non-default activations, which are refused",
    ("GRU", "activation_alpha"): "only used by non-default activations, which are refused",
    ("GRU", "activation_beta"): "only used by non-default activations, which are refused",
    ("RNN", "activation_alpha"): "only used by non-default activations, which are refused",
    ("RNN", "activation_beta"): "only used by non-default activations, which are refused",
}
