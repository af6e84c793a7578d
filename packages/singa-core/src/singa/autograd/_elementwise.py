"""Elementwise operators: activations, math functions, arithmetic with broadcasting.

The Operator classes of the elementwise op records (:mod:`singa.ops._elementwise`: Sigmoid,
Tanh, ..., Add, Mul, Less, And, ...) are built from the records at the end of this module; the
classes written out here are those with attributes or several ops inside (Elu, Clip, Cast,
PRelu, Sum, Max, ...), each with its ``singa.autograd`` function declared on it
(:mod:`._functions`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from .. import _dtype, _math
from .._ctensor import CTensor
from ..ops._elementwise import BINARY, UNARY
from ..ops._records import Onnx, RecordDoc
from ..ops._signatures import Param
from ..tensor import Tensor
from ._engine import Operator, back_broadcast, is_training
from ._functions import ANY, Function, X, declares

_SAME = "y, of x's shape and dtype."
_XS = Param("*xs", "Tensor", "At least one tensor, all of one shape.")
_NARY = "y, of the inputs' shape."


def _ones_like(x: CTensor) -> CTensor:
    return _math.set_value(CTensor._new(x.dims, x.dev, x.dtype_code), 1.0)


def _zeros_like(x: CTensor) -> CTensor:
    return _math.set_value(CTensor._new(x.dims, x.dev, x.dtype_code), 0.0)


class _Unary(Operator):
    """Caches x (and/or y) in training for the backward formula."""

    keep_x = True
    keep_y = False

    def forward(self, x):
        y = self.compute(x)
        if is_training():
            self.x = x if self.keep_x else None
            self.y = y if self.keep_y else None
        return y

    def _cached(self):
        if not hasattr(self, "x"):
            self._need_cache()
        return self.x, self.y


def _unary_operator(decl) -> type:
    """The Operator class of a :class:`singa.ops._elementwise.Unary` record: forward runs its
    op, backward its gradient rule on the x and/or y that ``keep`` names."""
    fn = getattr(_math, decl.name)
    name = decl.operator or decl.op
    body = {"__doc__": RecordDoc(functools.partial(decl.doc, "operator")),
            "__module__": __name__, "__qualname__": name}
    if decl.grad is None:
        body["forward"] = lambda self, x: fn(x)
        body["backward"] = lambda self, dy: None
        return type(name, (Operator,), body)
    grad = decl.grad

    def compute(self, x):
        return fn(x)

    if decl.keep:
        def backward(self, dy):
            x, y = self._cached()
            return grad(_math, dy, x, y)
    else:
        def backward(self, dy):
            return grad(_math, dy, None, None)

    body.update(compute=compute, backward=backward, keep_x="x" in decl.keep,
                keep_y="y" in decl.keep)
    return type(name, (_Unary,), body)


@declares(Function(
    "identity", "y = x, a copy", (X,), ("x",), _SAME, grad="dx = dy",
    numpy=lambda x: x.copy(), example={"x": [-1.0, 0.0, 2.0]},
    onnx=Onnx("Identity")))
class Identity(_Unary):
    """y = x (a copy); dx = dy."""

    keep_x = False

    def compute(self, x):
        """y = a copy of the CTensor x."""
        return _math.copy(x)

    def backward(self, dy):
        """dx = dy."""
        return dy


@declares(Function(
    "elu", "y = x if x > 0 else alpha (exp(x) - 1), elementwise",
    (X, Param("alpha", "float", "Scale of the negative part.", 1.0)), ("x",), _SAME,
    grad="dx = dy if x > 0 else dy (y + alpha)",
    numpy=lambda x, alpha=1.0: np.where(x > 0, x, alpha * (np.exp(x) - 1)),
    example={"x": [-1.0, 0.0, 2.0], "alpha": 0.5},
    onnx=Onnx("Elu", (("alpha", "alpha"),))))
class Elu(_Unary):
    """y = x if x > 0 else alpha (exp(x) - 1); dx = dy if x > 0 else dy (y + alpha)."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def compute(self, x):
        """y = x if x > 0 else alpha (exp(x) - 1), from the CTensor x; y has x's shape and
        dtype.
        """
        pos = _math.gt(x, 0.0)
        neg = _math.mul(_math.sub(_math.exp(_math.minimum(x, 0.0)), 1.0), self.alpha)
        return _math.add(_math.mul(x, pos), _math.mul(neg, _math.rsub(pos, 1.0)))

    def backward(self, dy):
        """dx = dy if x > 0 else dy (y + alpha), a CTensor of x's shape."""
        x, _ = self._cached()
        pos = _math.gt(x, 0.0)
        g_neg = _math.mul(_math.exp(_math.minimum(x, 0.0)), self.alpha)
        return _math.mul(dy, _math.add(pos, _math.mul(g_neg, _math.rsub(pos, 1.0))))


@declares(Function(
    "selu", "y = gamma x if x > 0 else gamma alpha (exp(x) - 1), elementwise",
    (X, Param("alpha", "float", "Scale of the negative part.", 1.67326),
     Param("gamma", "float", "Overall scale.", 1.0507)), ("x",), _SAME,
    grad="dx = gamma dy if x > 0 else gamma alpha exp(x) dy",
    numpy=lambda x, alpha=1.67326, gamma=1.0507: gamma * np.where(x > 0, x, alpha * (
        np.exp(x) - 1)),
    example={"x": [-1.0, 0.0, 2.0]},
    onnx=Onnx("Selu", (("alpha", "alpha"), ("gamma", "gamma")))))
class SeLU(_Unary):
    """y = gamma x if x > 0 else gamma alpha (exp(x) - 1)."""

    def __init__(self, alpha=1.67326, gamma=1.0507):
        super().__init__()
        self.alpha, self.gamma = float(alpha), float(gamma)

    def compute(self, x):
        """y = gamma x if x > 0 else gamma alpha (exp(x) - 1), from the CTensor x; y has x's
        shape and dtype.
        """
        pos = _math.gt(x, 0.0)
        neg = _math.mul(_math.sub(_math.exp(_math.minimum(x, 0.0)), 1.0),
                        self.alpha * self.gamma)
        return _math.add(_math.mul(x, _math.mul(pos, self.gamma)),
                         _math.mul(neg, _math.rsub(pos, 1.0)))

    def backward(self, dy):
        """dx = gamma dy if x > 0 else gamma alpha exp(x) dy, a CTensor of x's shape."""
        x, _ = self._cached()
        pos = _math.gt(x, 0.0)
        g_neg = _math.mul(_math.exp(_math.minimum(x, 0.0)), self.alpha * self.gamma)
        return _math.mul(dy, _math.add(_math.mul(pos, self.gamma),
                                       _math.mul(g_neg, _math.rsub(pos, 1.0))))


@declares(Function(
    "leakyrelu", "y = x if x > 0 else a x, elementwise",
    (X, Param("a", "float", "Slope of the negative part.", 0.01)), ("x",), _SAME,
    grad="dx = dy if x > 0 else a dy",
    numpy=lambda x, a=0.01: np.where(x > 0, x, a * x),
    example={"x": [-1.0, 0.0, 2.0], "a": 0.1},
    onnx=Onnx("LeakyRelu", (("alpha", "a"),))))
class LeakyRelu(_Unary):
    """y = x if x > 0 else a x; dx = dy if x > 0 else a dy."""

    def __init__(self, a=0.01):
        super().__init__()
        self.a = float(a)

    def compute(self, x):
        """y = x if x > 0 else a x, from the CTensor x; y has x's shape and dtype."""
        return _math.add(_math.relu(x), _math.mul(_math.minimum(x, 0.0), self.a))

    def backward(self, dy):
        """dx = dy if x > 0 else a dy, a CTensor of x's shape."""
        x, _ = self._cached()
        pos = _math.gt(x, 0.0)
        return _math.mul(dy, _math.add(pos, _math.mul(_math.rsub(pos, 1.0), self.a)))


@declares(Function(
    "hardsigmoid", "y = clip(alpha x + gamma, 0, 1), elementwise",
    (X, Param("alpha", "float", "Slope.", 0.2), Param("gamma", "float", "Offset.", 0.5)),
    ("x",), _SAME, grad="dx = alpha dy where 0 < alpha x + gamma < 1, else 0",
    numpy=lambda x, alpha=0.2, gamma=0.5: np.clip(alpha * x + gamma, 0, 1),
    example={"x": [-3.0, 0.0, 1.0]}))
class HardSigmoid(_Unary):
    """y = clip(alpha x + gamma, 0, 1), one op (``HardSigmoid``); dx = alpha dy where
    0 < alpha x + gamma < 1, else 0 (the record's rule, one ``HardSigmoidBackward`` op)."""

    def __init__(self, alpha=0.2, gamma=0.5):
        super().__init__()
        self.alpha, self.gamma = float(alpha), float(gamma)

    def compute(self, x):
        """y = clip(alpha x + gamma, 0, 1), from the CTensor x; y has x's shape and dtype."""
        return _math.hardsigmoid(x, alpha=self.alpha, gamma=self.gamma)

    def backward(self, dy):
        """dx = alpha dy where 0 < alpha x + gamma < 1, else 0, a CTensor of x's shape."""
        x, y = self._cached()
        return UNARY["HardSigmoid"].grad(_math, dy, x, y, alpha=self.alpha, gamma=self.gamma)


@declares(Function(
    "clip", "y = min(max(x, min), max), elementwise",
    (X, Param("min", "float or None", "Lower bound; None leaves that side open.", None),
     Param("max", "float or None", "Upper bound; None leaves that side open.", None)),
    ("x",), _SAME, grad="dx = dy inside [min, max], 0 outside",
    numpy=lambda x, min=None, max=None: np.clip(x, min, max),  # noqa: A006
    example={"x": [-1.0, 0.5, 2.0], "min": 0.0, "max": 1.0}))
class Clip(_Unary):
    """y = clip(x, min, max); dx = dy inside [min, max], 0 outside."""

    def __init__(self, min=None, max=None):  # noqa: A002
        super().__init__()
        self.min, self.max = min, max

    def compute(self, x):
        """y = min(max(x, min), max), from the CTensor x; y has x's shape and dtype."""
        return _math.clip(x, self.min, self.max)

    def backward(self, dy):
        """dx = dy inside [min, max], 0 outside, a CTensor of x's shape."""
        x, _ = self._cached()
        mask = _ones_like(x)
        if self.min is not None:
            mask = _math.mul(mask, _math.ge(x, float(self.min)))
        if self.max is not None:
            mask = _math.mul(mask, _math.le(x, float(self.max)))
        return _math.mul(dy, mask)


@declares(Function(
    "cast", "Convert x to dtype ``to``",
    (ANY, Param("to", "int", "A SINGA dtype code (``singa.tensor.float32``, ``int32``, ...).")),
    ("x",), "y, of x's shape, dtype ``to``.", grad="dx = dy cast back to x's dtype",
    numpy=lambda x, to: x.astype(_dtype.NP_DTYPE[to]),
    example={"x": [1.5, -2.0], "to": _dtype.kInt}))
class Cast(Operator):
    """Convert to dtype ``to`` (a SINGA dtype code); the gradient is cast back."""

    def __init__(self, to):
        super().__init__()
        self.to = _dtype.code_of(to)

    def forward(self, x):
        """y = x converted to dtype ``to`` (x's shape); x's dtype is kept for backward."""
        self.src_dtype = x.dtype_code
        return _math.as_type(x, self.to)

    def backward(self, dy):
        """dx = dy cast back to x's dtype (None when x's dtype has no gradient)."""
        if self.src_dtype not in _dtype.FLOATS:
            return None
        return _math.as_type(dy, self.src_dtype)


# ---------------------------------------------------------------- binary


def _common_dtype(xs: tuple) -> tuple:
    """Tensors of mixed dtypes converted to their common dtype (:data:`singa._dtype.PROMOTE`:
    int32 with float32 is float32) by :class:`Cast` ops, so a converted float input gets its
    gradient cast back to its own dtype and an int input (a mask) gets none."""
    first = None
    for x in xs:  # the common case, one dtype, in one pass (every binary op's hot path)
        if isinstance(x, Tensor):
            d = x.data.dtype_code
            if first is None:
                first = d
            elif d != first:
                break
    else:
        return xs
    dts = [x.dtype for x in xs if isinstance(x, Tensor)]
    dt = functools.reduce(lambda a, b: _dtype.PROMOTE[a, b], dts)
    return tuple(Cast(dt)(x)[0] if isinstance(x, Tensor) and x.dtype != dt else x
                 for x in xs)


class _Binary(Operator):
    def __call__(self, *xs):
        return self._do_forward(*_common_dtype(xs))

    def _cache(self, a, b):
        if is_training():
            self.a, self.b = a, b
            self.shapes = (a.dims, b.dims)

    def _cached(self):
        if not hasattr(self, "a"):
            self._need_cache()
        return self.a, self.b

    def _reduce(self, out_shape, da, db):
        sa, sb = self.shapes
        return (None if da is None else back_broadcast(out_shape, sa, da),
                None if db is None else back_broadcast(out_shape, sb, db))


def _float_pair(a, b):
    """SINGA runs Mul on int inputs in float, then casts back."""
    if a.dtype_code == _dtype.kInt and b.dtype_code == _dtype.kInt:
        return _math.as_type(a, _dtype.kFloat32), _math.as_type(b, _dtype.kFloat32), True
    return a, b, False


class _NoGradBinary(_Binary):
    """Comparisons and logic: outputs 1/0, no gradient flows."""

    fn = None

    def forward(self, a, b):
        return type(self).fn(a, b)

    def backward(self, dy):
        return None, None


def _binary_operator(decl) -> type:
    """The Operator class of a :class:`singa.ops._elementwise.Binary` record: forward runs its
    op (keeping a, b and y as ``keep`` says), backward its gradient rule reduced to each
    input's shape."""
    fn = getattr(_math, decl.name)
    name = decl.operator or decl.op
    body = {"__doc__": RecordDoc(functools.partial(decl.doc, "operator")),
            "__module__": __name__, "__qualname__": name}
    if decl.grad is None:
        body["fn"] = staticmethod(fn)
        return type(name, (_NoGradBinary,), body)
    grad, int_as_float = decl.grad, decl.int_as_float
    keep_ab, keep_y = "a" in decl.keep, "y" in decl.keep

    def forward(self, a, b):
        was_int = False
        if int_as_float:
            a, b, was_int = _float_pair(a, b)
        self.shapes = (a.dims, b.dims)
        y = fn(a, b)
        if is_training():
            if keep_ab:
                self.a, self.b = a, b
            if keep_y:
                self.y = y
        return _math.as_type(y, _dtype.kInt) if was_int else y

    def backward(self, dy):
        a, b = self._cached() if keep_ab else (None, None)
        da, db = grad(_math, dy, a, b, self.y if keep_y else None)
        return self._reduce(dy.dims, da, db)

    body.update(forward=forward, backward=backward)
    return type(name, (_Binary,), body)


@declares(Function(
    "prelu", "y = x if x > 0 else slope x, elementwise",
    (X, Param("slope", "Tensor", "Broadcasts with x (e.g. one value per channel).")),
    ("x", "slope"), _SAME,
    grad="dx = dy if x > 0 else slope dy; dslope = dy x where x <= 0, summed to slope's shape",
    numpy=lambda x, slope: np.where(x > 0, x, slope * x),
    example={"x": [[-2.0, 1.0], [3.0, -4.0]], "slope": [0.1, 0.5]},
    onnx=Onnx("PRelu")))
class PRelu(_Binary):
    """y = x if x > 0 else slope x (slope broadcasts); dslope = sum(dy x [x <= 0])."""

    def forward(self, x, slope):
        """y = x if x > 0 else slope x, with slope broadcast against the CTensor x; y has the
        broadcast shape.
        """
        self._cache(x, slope)
        pos = _math.gt(x, 0.0)
        return _math.add(_math.mul(x, pos), _math.mul(_math.mul(x, slope), _math.rsub(pos, 1.0)))

    def backward(self, dy):
        """(dx, dslope): dx = dy if x > 0 else slope dy, dslope = dy x where x <= 0, each summed
        to its input's shape.
        """
        x, slope = self._cached()
        pos = _math.gt(x, 0.0)
        neg = _math.rsub(pos, 1.0)
        dx = _math.mul(dy, _math.add(pos, _math.mul(neg, slope)))
        dslope = _math.mul(dy, _math.mul(x, neg))
        return self._reduce(dy.dims, dx, dslope)


class _Nary(Operator):
    """Ops over N same-shape inputs."""

    def __call__(self, *xs):
        return self._do_forward(*_common_dtype(xs))

    def _check(self, xs):
        for x in xs[1:]:
            if x.dims != xs[0].dims:
                from ..errors import ShapeError

                raise ShapeError(f"{type(self).__name__}: all inputs must have one shape, got "
                                 f"{[t.dims for t in xs]}")

    def _total(self, xs):
        """The sum of the inputs, left to right (and n, for backward)."""
        self._check(xs)
        self.n = len(xs)
        y = xs[0]
        for x in xs[1:]:
            y = _math.add(y, x)
        return y


@declares(Function(
    "sum", "y = x_1 + ... + x_n, elementwise", (_XS,), ("*xs",), _NARY,
    grad="each dx_i = dy", numpy=lambda xs: np.sum(xs, 0),
    example={"*xs": ([1.0, 5.0], [3.0, 2.0])},
    onnx=Onnx("Sum")))
class Sum(_Nary):
    """y = sum of the inputs; each dx = dy."""

    def forward(self, *xs):
        """y = x_1 + ... + x_n of the CTensors xs, broadcast."""
        y = self._total(xs)
        return y if len(xs) > 1 else _math.copy(y)

    def backward(self, dy):
        """(dx_1, ..., dx_n), each dy (reduced to its input's shape by the engine)."""
        return tuple(dy for _ in range(self.n))


@declares(Function(
    "mean", "y = (x_1 + ... + x_n) / n, elementwise", (_XS,), ("*xs",), _NARY,
    grad="each dx_i = dy / n", numpy=lambda xs: np.mean(xs, 0),
    example={"*xs": ([1.0, 5.0], [3.0, 2.0])},
    onnx=Onnx("Mean")))
class Mean(_Nary):
    """y = mean of the inputs; each dx = dy / n."""

    def forward(self, *xs):
        """y = (x_1 + ... + x_n) / n of the CTensors xs, broadcast."""
        return _math.mul(self._total(xs), 1.0 / len(xs))

    def backward(self, dy):
        """(dx_1, ..., dx_n), each dy / n."""
        g = _math.mul(dy, 1.0 / self.n)
        return tuple(g for _ in range(self.n))


class _Extreme(_Nary):
    """Elementwise max/min of N inputs.

    dx_k = dy where x_k is the first input equal to y, else 0: at a tie the earliest input
    takes the gradient, as in SINGA (a valid subgradient; splitting it among the tied inputs
    would double-count it). With one input, ``backward`` returns the single gradient (not a
    tuple), SINGA's return form. SINGA returned the selection masks without multiplying them
    by dy; this chains dy.
    """

    pick: Any = None  # _math.maximum or minimum, a staticmethod set by each subclass

    def forward(self, *xs):
        self._check(xs)
        y = xs[0]
        for x in xs[1:]:
            y = type(self).pick(y, x)
        if is_training():
            self.xs, self.y = xs, y
        return y if len(xs) > 1 else _math.copy(y)

    def backward(self, dy):
        if not hasattr(self, "xs"):
            self._need_cache()
        if len(self.xs) == 1:
            return _math.copy(dy)
        taken = None  # 1 where an earlier input already matched y
        dxs = []
        for x in self.xs:
            hit = _math.eq(x, self.y)
            first = hit if taken is None else _math.mul(hit, _math.rsub(taken, 1.0))
            taken = hit if taken is None else _math.maximum(taken, hit)
            dxs.append(_math.mul(dy, first))
        return tuple(dxs)


@declares(Function(
    "max", "y = max(x_1, ..., x_n), elementwise", (_XS,), ("*xs",), _NARY,
    grad="dx_i = dy where x_i is the first input holding the maximum, else 0",
    numpy=lambda xs: np.max(xs, 0), example={"*xs": ([1.0, 5.0], [3.0, 2.0])},
    onnx=Onnx("Max")))
class Max(_Extreme):
    """y = elementwise max of the inputs."""

    pick = staticmethod(_math.maximum)


@declares(Function(
    "min", "y = min(x_1, ..., x_n), elementwise", (_XS,), ("*xs",), _NARY,
    grad="dx_i = dy where x_i is the first input holding the minimum, else 0",
    numpy=lambda xs: np.min(xs, 0), example={"*xs": ([1.0, 5.0], [3.0, 2.0])},
    onnx=Onnx("Min")))
class Min(_Extreme):
    """y = elementwise min of the inputs."""

    pick = staticmethod(_math.minimum)


# Sigmoid, Tanh, ..., Not; Add, Sub, Mul, Div, Pow, Less, Greater, Equal, And, Or, Xor: one
# class per record of the elementwise tables that autograd names
OPERATORS = {**{(decl.operator or decl.op): _unary_operator(decl)
                for decl in UNARY.values() if decl.autograd},
             **{(decl.operator or decl.op): _binary_operator(decl)
                for decl in BINARY.values() if decl.autograd}}
globals().update(OPERATORS)
