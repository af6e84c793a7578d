"""Elementwise operators: activations, math functions, arithmetic with broadcasting."""

from __future__ import annotations

import functools
import math

from .. import _dtype
from .. import _math as M
from .._ctensor import CTensor
from ..tensor import Tensor
from ._engine import Operator, back_broadcast, is_training


def _ones_like(x: CTensor) -> CTensor:
    return M.set_value(CTensor._new(x.shp, x.dev, x.dt), 1.0)


def _zeros_like(x: CTensor) -> CTensor:
    return M.set_value(CTensor._new(x.shp, x.dev, x.dt), 0.0)


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


class ReLU(_Unary):
    """y = max(x, 0); dx = dy * (y > 0).

    Keeps y rather than x (y > 0 exactly where x > 0): y is usually kept anyway by the next
    op, so x (e.g. a batch-norm output) can be freed after the forward pass.
    """

    keep_x, keep_y = False, True

    def compute(self, x):
        return M.relu(x)

    def backward(self, dy):
        _, y = self._cached()
        return M.relu_backward(dy, y)


class Sigmoid(_Unary):
    """y = 1 / (1 + exp(-x)); dx = dy * y * (1 - y)."""

    keep_x, keep_y = False, True

    def compute(self, x):
        return M.sigmoid(x)

    def backward(self, dy):
        _, y = self._cached()
        return M.mul(dy, M.mul(y, M.rsub(y, 1.0)))


class Tanh(_Unary):
    """y = tanh(x); dx = dy * (1 - y^2)."""

    keep_x, keep_y = False, True

    def compute(self, x):
        return M.tanh(x)

    def backward(self, dy):
        _, y = self._cached()
        return M.mul(dy, M.rsub(M.square(y), 1.0))


class Exp(_Unary):
    """y = exp(x); dx = dy * y."""

    keep_x, keep_y = False, True

    def compute(self, x):
        return M.exp(x)

    def backward(self, dy):
        return M.mul(dy, self._cached()[1])


class Log(_Unary):
    """y = log(x); dx = dy / x."""

    def compute(self, x):
        return M.log(x)

    def backward(self, dy):
        return M.div(dy, self._cached()[0])


class Sqrt(_Unary):
    """y = sqrt(x); dx = dy * 0.5 / y."""

    keep_x, keep_y = False, True

    def compute(self, x):
        return M.sqrt(x)

    def backward(self, dy):
        return M.div(M.mul(dy, 0.5), self._cached()[1])


class Abs(_Unary):
    """y = |x|; dx = dy * sign(x)."""

    def compute(self, x):
        return M.abs(x)

    def backward(self, dy):
        return M.mul(dy, M.sign(self._cached()[0]))


class Square(_Unary):
    """y = x^2; dx = 2 x dy."""

    def compute(self, x):
        return M.square(x)

    def backward(self, dy):
        return M.mul(M.mul(dy, self._cached()[0]), 2.0)


class _ZeroGrad(_Unary):
    """Piecewise-constant functions: the gradient is zero almost everywhere."""

    keep_x = False

    def backward(self, dy):
        return _zeros_like(dy)


def _zero_grad_op(name, fn, doc):
    return type(name, (_ZeroGrad,), {"compute": lambda self, x: fn(x), "__doc__": doc})


Sign = _zero_grad_op("Sign", M.sign, "y = sign(x); dx = 0.")
Ceil = _zero_grad_op("Ceil", M.ceil, "y = ceil(x); dx = 0.")
Floor = _zero_grad_op("Floor", M.floor, "y = floor(x); dx = 0.")
Round = _zero_grad_op("Round", M.round, "y = round(x), halves away from zero; dx = 0.")
Rounde = _zero_grad_op("Rounde", M.rounde, "y = round(x), halves to even; dx = 0.")


def _deriv_op(name, fwd, deriv, doc):
    """An op with dx = dy * deriv(x)."""

    def compute(self, x):
        return fwd(x)

    def backward(self, dy):
        return M.mul(dy, deriv(self._cached()[0]))

    return type(name, (_Unary,), {"compute": compute, "backward": backward, "__doc__": doc})


def _inv_sqrt(x):
    return M.pow(x, -0.5)


Cos = _deriv_op("Cos", M.cos, lambda x: M.neg(M.sin(x)), "y = cos(x); dx = -sin(x) dy.")
Sin = _deriv_op("Sin", M.sin, M.cos, "y = sin(x); dx = cos(x) dy.")
Tan = _deriv_op("Tan", M.tan, lambda x: M.rdiv(M.square(M.cos(x)), 1.0),
                "y = tan(x); dx = dy / cos(x)^2.")
Cosh = _deriv_op("Cosh", M.cosh, M.sinh, "y = cosh(x); dx = sinh(x) dy.")
Sinh = _deriv_op("Sinh", M.sinh, M.cosh, "y = sinh(x); dx = cosh(x) dy.")
Acos = _deriv_op("Acos", M.acos, lambda x: M.neg(_inv_sqrt(M.rsub(M.square(x), 1.0))),
                 "y = acos(x); dx = -dy / sqrt(1 - x^2).")
Asin = _deriv_op("Asin", M.asin, lambda x: _inv_sqrt(M.rsub(M.square(x), 1.0)),
                 "y = asin(x); dx = dy / sqrt(1 - x^2).")
Atan = _deriv_op("Atan", M.atan, lambda x: M.rdiv(M.add(M.square(x), 1.0), 1.0),
                 "y = atan(x); dx = dy / (1 + x^2).")
Acosh = _deriv_op("Acosh", M.acosh, lambda x: _inv_sqrt(M.sub(M.square(x), 1.0)),
                  "y = acosh(x); dx = dy / sqrt(x^2 - 1).")
Asinh = _deriv_op("Asinh", M.asinh, lambda x: _inv_sqrt(M.add(M.square(x), 1.0)),
                  "y = asinh(x); dx = dy / sqrt(x^2 + 1).")
Atanh = _deriv_op("Atanh", M.atanh, lambda x: M.rdiv(M.rsub(M.square(x), 1.0), 1.0),
                  "y = atanh(x); dx = dy / (1 - x^2).")
SoftSign = _deriv_op("SoftSign", M.softsign,
                     lambda x: M.rdiv(M.square(M.add(M.abs(x), 1.0)), 1.0),
                     "y = x / (1 + |x|); dx = dy / (1 + |x|)^2.")
SoftPlus = _deriv_op("SoftPlus", M.softplus, M.sigmoid,
                     "y = log(1 + exp(x)); dx = sigmoid(x) dy.")
Reciprocal = _deriv_op("Reciprocal", M.reciprocal,
                       lambda x: M.neg(M.reciprocal(M.square(x))),
                       "y = 1 / x; dx = -dy / x^2.")
Erf = _deriv_op("Erf", M.erf,
                lambda x: M.mul(M.exp(M.neg(M.square(x))), 2.0 / math.sqrt(math.pi)),
                "y = erf(x); dx = 2/sqrt(pi) exp(-x^2) dy (SINGA used dy in place of x).")


class Negative(_Unary):
    """y = -x; dx = -dy."""

    keep_x = False

    def compute(self, x):
        return M.neg(x)

    def backward(self, dy):
        return M.neg(dy)


class Identity(_Unary):
    """y = x (a copy); dx = dy."""

    keep_x = False

    def compute(self, x):
        return M.copy(x)

    def backward(self, dy):
        return dy


class Elu(_Unary):
    """y = x if x > 0 else alpha (exp(x) - 1); dx = dy if x > 0 else dy (y + alpha)."""

    def __init__(self, alpha=1.0):
        super().__init__()
        self.alpha = float(alpha)

    def compute(self, x):
        pos = M.gt(x, 0.0)
        neg = M.mul(M.sub(M.exp(M.minimum(x, 0.0)), 1.0), self.alpha)
        return M.add(M.mul(x, pos), M.mul(neg, M.rsub(pos, 1.0)))

    def backward(self, dy):
        x, _ = self._cached()
        pos = M.gt(x, 0.0)
        g_neg = M.mul(M.exp(M.minimum(x, 0.0)), self.alpha)
        return M.mul(dy, M.add(pos, M.mul(g_neg, M.rsub(pos, 1.0))))


class SeLU(_Unary):
    """y = gamma x if x > 0 else gamma alpha (exp(x) - 1)."""

    def __init__(self, alpha=1.67326, gamma=1.0507):
        super().__init__()
        self.alpha, self.gamma = float(alpha), float(gamma)

    def compute(self, x):
        pos = M.gt(x, 0.0)
        neg = M.mul(M.sub(M.exp(M.minimum(x, 0.0)), 1.0), self.alpha * self.gamma)
        return M.add(M.mul(x, M.mul(pos, self.gamma)), M.mul(neg, M.rsub(pos, 1.0)))

    def backward(self, dy):
        x, _ = self._cached()
        pos = M.gt(x, 0.0)
        g_neg = M.mul(M.exp(M.minimum(x, 0.0)), self.alpha * self.gamma)
        return M.mul(dy, M.add(M.mul(pos, self.gamma), M.mul(g_neg, M.rsub(pos, 1.0))))


class LeakyRelu(_Unary):
    """y = x if x > 0 else a x; dx = dy if x > 0 else a dy."""

    def __init__(self, a=0.01):
        super().__init__()
        self.a = float(a)

    def compute(self, x):
        return M.add(M.relu(x), M.mul(M.minimum(x, 0.0), self.a))

    def backward(self, dy):
        x, _ = self._cached()
        pos = M.gt(x, 0.0)
        return M.mul(dy, M.add(pos, M.mul(M.rsub(pos, 1.0), self.a)))


class HardSigmoid(_Unary):
    """y = clip(alpha x + gamma, 0, 1); dx = alpha dy where 0 < alpha x + gamma < 1."""

    def __init__(self, alpha=0.2, gamma=0.5):
        super().__init__()
        self.alpha, self.gamma = float(alpha), float(gamma)

    def compute(self, x):
        return M.clip(M.add(M.mul(x, self.alpha), self.gamma), 0.0, 1.0)

    def backward(self, dy):
        x, _ = self._cached()
        z = M.add(M.mul(x, self.alpha), self.gamma)
        mask = M.mul(M.gt(z, 0.0), M.lt(z, 1.0))
        return M.mul(dy, M.mul(mask, self.alpha))


class Clip(_Unary):
    """y = clip(x, min, max); dx = dy inside [min, max], 0 outside."""

    def __init__(self, min=None, max=None):  # noqa: A002
        super().__init__()
        self.min, self.max = min, max

    def compute(self, x):
        return M.clip(x, self.min, self.max)

    def backward(self, dy):
        x, _ = self._cached()
        mask = _ones_like(x)
        if self.min is not None:
            mask = M.mul(mask, M.ge(x, float(self.min)))
        if self.max is not None:
            mask = M.mul(mask, M.le(x, float(self.max)))
        return M.mul(dy, mask)


class Cast(Operator):
    """Convert to dtype ``to`` (a SINGA dtype code); the gradient is cast back."""

    def __init__(self, to):
        super().__init__()
        self.to = _dtype.code_of(to)

    def forward(self, x):
        self.src_dtype = x.dt
        return M.as_type(x, self.to)

    def backward(self, dy):
        if self.src_dtype not in _dtype.FLOATS:
            return None
        return M.as_type(dy, self.src_dtype)


# ---------------------------------------------------------------- binary


def _common_dtype(xs: tuple) -> tuple:
    """Tensors of mixed dtypes converted to their common dtype (:data:`singa._dtype.PROMOTE`:
    int32 with float32 is float32) by :class:`Cast` ops, so a converted float input gets its
    gradient cast back to its own dtype and an int input (a mask) gets none."""
    dts = [x.dtype for x in xs if isinstance(x, Tensor)]
    if all(d == dts[0] for d in dts):
        return xs
    dt = functools.reduce(lambda a, b: _dtype.PROMOTE[a, b], dts)
    return tuple(Cast(dt)(x)[0] if isinstance(x, Tensor) and x.dtype != dt else x
                 for x in xs)


class _Binary(Operator):
    def __call__(self, *xs):
        return self._do_forward(*_common_dtype(xs))

    def _cache(self, a, b):
        if is_training():
            self.a, self.b = a, b
            self.shapes = (a.shp, b.shp)

    def _cached(self):
        if not hasattr(self, "a"):
            self._need_cache()
        return self.a, self.b

    def _reduce(self, out_shape, da, db):
        sa, sb = self.shapes
        return (None if da is None else back_broadcast(out_shape, sa, da),
                None if db is None else back_broadcast(out_shape, sb, db))


class Add(_Binary):
    """y = a + b (broadcast); da, db = dy reduced to each shape."""

    def forward(self, a, b):
        self.shapes = (a.shp, b.shp)
        return M.add(a, b)

    def backward(self, dy):
        return self._reduce(dy.shp, dy, dy)


class Sub(_Binary):
    """y = a - b; da = dy, db = -dy (reduced)."""

    def forward(self, a, b):
        self.shapes = (a.shp, b.shp)
        return M.sub(a, b)

    def backward(self, dy):
        return self._reduce(dy.shp, dy, M.neg(dy))


def _float_pair(a, b):
    """SINGA runs Mul/Div on int inputs in float, then casts back."""
    if a.dt == _dtype.kInt and b.dt == _dtype.kInt:
        return M.as_type(a, _dtype.kFloat32), M.as_type(b, _dtype.kFloat32), True
    return a, b, False


class Mul(_Binary):
    """y = a * b; da = dy b, db = dy a (reduced)."""

    def forward(self, a, b):
        a2, b2, was_int = _float_pair(a, b)
        self._cache(a2, b2)
        y = M.mul(a2, b2)
        return M.as_type(y, _dtype.kInt) if was_int else y

    def backward(self, dy):
        a, b = self._cached()
        return self._reduce(dy.shp, M.mul(dy, b), M.mul(dy, a))


class Div(_Binary):
    """y = a / b; da = dy / b, db = -dy a / b^2 (reduced)."""

    def forward(self, a, b):
        self._cache(a, b)
        return M.div(a, b)

    def backward(self, dy):
        a, b = self._cached()
        da = M.div(dy, b)
        db = M.neg(M.div(M.mul(da, a), b))
        return self._reduce(dy.shp, da, db)


class Pow(_Binary):
    """y = a ** b; da = dy b a^(b-1), db = dy log(a) a^b (reduced)."""

    def forward(self, a, b):
        self._cache(a, b)
        y = M.pow(a, b)
        if is_training():
            self.y = y
        return y

    def backward(self, dy):
        a, b = self._cached()
        da = M.mul(dy, M.mul(b, M.pow(a, M.sub(b, 1.0))))
        db = M.mul(dy, M.mul(M.log(a), self.y))
        return self._reduce(dy.shp, da, db)


class _NoGradBinary(_Binary):
    """Comparisons and logic: outputs 1/0, no gradient flows."""

    fn = None

    def forward(self, a, b):
        return type(self).fn(a, b)

    def backward(self, dy):
        return None, None


class Less(_NoGradBinary):
    """y = (a < b) as 1/0."""

    fn = staticmethod(M.lt)


class Greater(_NoGradBinary):
    """y = (a > b) as 1/0."""

    fn = staticmethod(M.gt)


class Equal(_NoGradBinary):
    """y = (a == b) as 1/0."""

    fn = staticmethod(M.eq)


class And(_NoGradBinary):
    """y = a and b (nonzero is true)."""

    fn = staticmethod(M.logical_and)


class Or(_NoGradBinary):
    """y = a or b."""

    fn = staticmethod(M.logical_or)


class Xor(_NoGradBinary):
    """y = a xor b."""

    fn = staticmethod(M.logical_xor)


class Not(Operator):
    """y = not x (1 where x == 0)."""

    def forward(self, x):
        return M.logical_not(x)

    def backward(self, dy):
        return None


class PRelu(_Binary):
    """y = x if x > 0 else slope x (slope broadcasts); dslope = sum(dy x [x <= 0])."""

    def forward(self, x, slope):
        self._cache(x, slope)
        pos = M.gt(x, 0.0)
        return M.add(M.mul(x, pos), M.mul(M.mul(x, slope), M.rsub(pos, 1.0)))

    def backward(self, dy):
        x, slope = self._cached()
        pos = M.gt(x, 0.0)
        neg = M.rsub(pos, 1.0)
        dx = M.mul(dy, M.add(pos, M.mul(neg, slope)))
        dslope = M.mul(dy, M.mul(x, neg))
        return self._reduce(dy.shp, dx, dslope)


class _Nary(Operator):
    """Ops over N same-shape inputs."""

    def __call__(self, *xs):
        return self._do_forward(*_common_dtype(xs))

    def _check(self, xs):
        for x in xs[1:]:
            if x.shp != xs[0].shp:
                from ..errors import ShapeError

                raise ShapeError(f"{type(self).__name__}: all inputs must have one shape, got "
                                 f"{[t.shp for t in xs]}")


class Sum(_Nary):
    """y = sum of the inputs; each dx = dy."""

    def forward(self, *xs):
        self._check(xs)
        self.n = len(xs)
        y = xs[0]
        for x in xs[1:]:
            y = M.add(y, x)
        return y if len(xs) > 1 else M.copy(y)

    def backward(self, dy):
        return tuple(dy for _ in range(self.n))


class Mean(_Nary):
    """y = mean of the inputs; each dx = dy / n."""

    def forward(self, *xs):
        self._check(xs)
        self.n = len(xs)
        y = xs[0]
        for x in xs[1:]:
            y = M.add(y, x)
        return M.mul(y, 1.0 / len(xs))

    def backward(self, dy):
        g = M.mul(dy, 1.0 / self.n)
        return tuple(g for _ in range(self.n))


class _Extreme(_Nary):
    """Elementwise max/min of N inputs.

    dx_k = dy where x_k is the first input equal to y, else 0: at a tie the earliest input
    takes the gradient, as in SINGA (a valid subgradient; splitting it among the tied inputs
    would double-count it). With one input, ``backward`` returns the single gradient (not a
    tuple), SINGA's return form. SINGA returned the selection masks without multiplying them
    by dy; this chains dy.
    """

    pick = None

    def forward(self, *xs):
        self._check(xs)
        y = xs[0]
        for x in xs[1:]:
            y = type(self).pick(y, x)
        if is_training():
            self.xs, self.y = xs, y
        return y if len(xs) > 1 else M.copy(y)

    def backward(self, dy):
        if not hasattr(self, "xs"):
            self._need_cache()
        if len(self.xs) == 1:
            return M.copy(dy)
        taken = None  # 1 where an earlier input already matched y
        dxs = []
        for x in self.xs:
            hit = M.eq(x, self.y)
            first = hit if taken is None else M.mul(hit, M.rsub(taken, 1.0))
            taken = hit if taken is None else M.maximum(taken, hit)
            dxs.append(M.mul(dy, first))
        return tuple(dxs)


class Max(_Extreme):
    """y = elementwise max of the inputs."""

    pick = staticmethod(M.maximum)


class Min(_Extreme):
    """y = elementwise min of the inputs."""

    pick = staticmethod(M.minimum)
