"""Elementwise ONNX ops: activations, math, arithmetic, comparison and logic, Cast, Where."""

from __future__ import annotations

import math

import numpy as np
from singa import autograd, tensor
from singa.ops import BINARY, UNARY, Binary, Unary

from ._registry import register


def _pair(ctx, a, b):
    """Both operands as Tensors of one dtype (host constants take the tensor's dtype)."""
    if isinstance(a, tensor.Tensor):
        return a, ctx.tensor(b, like=a)
    b = ctx.tensor(b)
    return ctx.tensor(a, like=b), b


def _operator(decl):
    """The ``singa.autograd`` Operator class of an elementwise record."""
    return getattr(autograd, decl.operator or decl.op)


def _unary(decl):
    cls, defaults, names = _operator(decl), decl.defaults, decl.onnx.attrs

    def handler(ctx, attrs, x):
        values = {field: attrs.get(name, defaults[field]) for name, field in names}
        return cls(**values)(ctx.tensor(x))[0]

    handler.__doc__ = f"y = {decl.formula}, elementwise (singa's {decl.op})."
    return handler


def _binary(decl):
    cls = _operator(decl)

    def handler(ctx, attrs, a, b):
        return cls()(*_pair(ctx, a, b))[0]

    handler.__doc__ = f"y = {decl.formula}, broadcasting (singa's {decl.op})."
    return handler


# One handler per elementwise record that names its ONNX operator (singa.ops.UNARY, BINARY:
# Relu, Sigmoid, ..., HardSigmoid with its attributes, Add, ..., Less, ..., And, Not), made from
# the record. Div and Pow are written out below: ONNX fixes their output type where singa's
# op would not (integer Div truncates; Pow's exponent may have another type than its base).
_WRITTEN_OUT = ("Div", "Pow")
_decl: Unary | Binary  # both loops below bind it: declared once, for the type checker
for _decl in UNARY.values():
    if _decl.onnx is not None:
        register(_decl.onnx.op_type, attrs=[a for a, _ in _decl.onnx.attrs])(_unary(_decl))
for _decl in BINARY.values():
    if _decl.onnx is not None and _decl.onnx.op_type not in _WRITTEN_OUT:
        register(_decl.onnx.op_type)(_binary(_decl))


# Identity, LeakyRelu, Elu, Selu: built from their Operators' declared ONNX forms (declared.py)


@register("PRelu")
def prelu(ctx, attrs, x, slope):
    """y = x if x >= 0 else slope x (slope broadcast)."""
    x, slope = _pair(ctx, x, slope)
    return autograd.prelu(x, slope)


@register("ThresholdedRelu", attrs=("alpha",))
def thresholded_relu(ctx, attrs, x):
    """y = x if x > alpha else 0."""
    x = ctx.tensor(x)
    mask = autograd.greater(x, ctx.tensor(np.float32(attrs.get("alpha", 1.0)), like=x))
    return autograd.mul(x, mask)


@register("Celu", attrs=("alpha",))
def celu(ctx, attrs, x):
    """y = max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""
    x = ctx.tensor(x)
    a = float(attrs.get("alpha", 1.0))
    # elu(x / a) * a is the same function and already has its gradient
    scaled = autograd.mul(x, ctx.tensor(np.float32(1.0 / a), like=x))
    return autograd.mul(autograd.elu(scaled, 1.0), ctx.tensor(np.float32(a), like=x))


@register("Mish")
def mish(ctx, attrs, x):
    """y = x tanh(softplus(x))."""
    x = ctx.tensor(x)
    return autograd.mul(x, autograd.tanh(autograd.softplus(x)))


@register("Gelu", attrs=("approximate",),
          check=lambda a: [] if a.get("approximate", "none") in ("none", "tanh")
          else [f"approximate={a['approximate']!r}"])
def gelu(ctx, attrs, x):
    """y = x/2 (1 + erf(x / sqrt 2)), or the tanh approximation."""
    x = ctx.tensor(x)

    def c(v):
        return ctx.tensor(np.float32(v), like=x)

    if attrs.get("approximate", "none") == "tanh":
        inner = autograd.mul(autograd.add(x, autograd.mul(c(0.044715),
                                                          autograd.mul(x, autograd.mul(x, x)))),
                             c(math.sqrt(2.0 / math.pi)))
        return autograd.mul(autograd.mul(x, c(0.5)), autograd.add(autograd.tanh(inner), c(1.0)))
    e = autograd.erf(autograd.mul(x, c(1.0 / math.sqrt(2.0))))
    return autograd.mul(autograd.mul(x, c(0.5)), autograd.add(e, c(1.0)))


def _softmax_family(fn):
    def handler(ctx, attrs, x):
        x = ctx.tensor(x)
        nd = len(x.shape)
        if ctx.opset < 13:
            # opsets 1-12 coerce to 2-D at `axis` (default 1) and normalise each row
            axis = ctx.axis(attrs.get("axis", 1), "attribute 'axis'", nd)
            y = fn(autograd.flatten(x, axis), 1)
            return autograd.reshape(y, list(x.shape))
        return fn(x, ctx.axis(attrs.get("axis", -1), "attribute 'axis'", max(nd, 1)))

    return handler


register("Softmax", attrs=("axis",))(_softmax_family(autograd.softmax))
register("LogSoftmax", attrs=("axis",))(_softmax_family(autograd.log_softmax))


@register("Clip", attrs=("min", "max"), static_inputs=(1, 2))
def clip(ctx, attrs, x, lo=None, hi=None):
    """y = min(max(x, min), max); min/max are attributes (opset < 11) or inputs."""
    lo = ctx.host(lo) if lo is not None else attrs.get("min")
    hi = ctx.host(hi) if hi is not None else attrs.get("max")
    lo = None if lo is None else float(np.asarray(lo).reshape(-1)[0])
    hi = None if hi is None else float(np.asarray(hi).reshape(-1)[0])
    return autograd.clip(ctx.tensor(x), lo, hi)


@register("Div")
def div(ctx, attrs, a, b):
    """y = a / b, broadcasting; int32 quotients truncate toward zero, as ONNX's do."""
    a, b = _pair(ctx, a, b)
    y = autograd.div(a, b)
    return autograd.cast(y, tensor.int32) if a.dtype == tensor.int32 else y


# LessOrEqual, GreaterOrEqual: singa's LE and GE records have no autograd Operator to import
# into, so the handlers compose the ops autograd has
@register("LessOrEqual")
def less_equal(ctx, attrs, a, b):
    """y = a <= b, as not(a > b)."""
    a, b = _pair(ctx, a, b)
    return autograd._not(autograd.greater(a, b))


@register("GreaterOrEqual")
def greater_equal(ctx, attrs, a, b):
    """y = a >= b, as not(a < b)."""
    a, b = _pair(ctx, a, b)
    return autograd._not(autograd.less(a, b))


@register("Pow")
def pow_(ctx, attrs, a, b):
    """y = a ** b (b broadcast; cast to a's type as ONNX's output type is a's)."""
    a = ctx.tensor(a)
    b = ctx.tensor(b, like=a)
    return autograd.pow(a, b)


def _nary(fn):
    def handler(ctx, attrs, *xs):
        out = ctx.tensor(xs[0])
        for x in xs[1:]:
            out = fn(*_pair(ctx, out, x))
        return out

    return handler


register("Sum")(_nary(autograd.add))
def _broadcast_pair(fn):
    # singa's Max/Min take equal shapes: broadcast both operands first
    def f(a, b):
        shape = list(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
        a = a if list(a.shape) == shape else autograd.expand(a, shape)
        b = b if list(b.shape) == shape else autograd.expand(b, shape)
        return fn(a, b)

    return f


register("Max")(_nary(_broadcast_pair(autograd.max)))
register("Min")(_nary(_broadcast_pair(autograd.min)))


@register("Mean")
def mean(ctx, attrs, *xs):
    """y = (x_1 + ... + x_n) / n, broadcasting."""
    s = _nary(autograd.add)(ctx, attrs, *xs)
    return autograd.mul(s, ctx.tensor(np.float32(1.0 / len(xs)), like=s))


_CAST_CHECK_OK = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13}  # numeric and bool ONNX types


def _check_cast(attrs):
    to = attrs.get("to")
    return [] if to in _CAST_CHECK_OK else [f"to={to} (only numeric and bool types)"]


@register("Cast", attrs=("to", "saturate", "round_mode"), check=_check_cast)
def cast(ctx, attrs, x):
    """y = x converted to type ``to`` (ints held as int32, bools as 0/1 floats)."""
    x = ctx.tensor(x)
    to = attrs["to"]
    if to == 9:  # bool: nonzero -> 1
        zero = ctx.tensor(np.zeros((), np.float32), like=x)
        return autograd.cast(autograd._not(autograd.equal(x, zero)), tensor.float32)
    want = tensor.float32 if to in (1, 10, 11) else tensor.int32
    return x if x.dtype == want else autograd.cast(x, want)


@register("CastLike", attrs=("saturate", "round_mode"))
def cast_like(ctx, attrs, x, target):
    """y = x converted to the type of ``target``."""
    x = ctx.tensor(x)
    t = ctx.tensor(target)
    return x if x.dtype == t.dtype else autograd.cast(x, t.dtype)


@register("Where")
def where(ctx, attrs, cond, a, b):
    """y = a where cond else b, broadcasting all three."""
    a, b = _pair(ctx, a, b)
    c = ctx.tensor(cond, like=a)
    return autograd.where(a, b, c.data)
