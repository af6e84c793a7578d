"""The elementwise ops, each declared once: op-table entry and gradient rule side by side.

A :class:`Unary` or :class:`Binary` record holds everything about one op: the op-table key and
numpy reference (what backends implement and the conformance kit checks), its math as text,
the gradient rule, and the names SINGA gives it in ``singa._math``, ``singa.tensor`` and
``singa.autograd``. :mod:`singa.ops._tensor_ops` enters them in the op table; the three wrapper
layers build their functions and Operator classes from :data:`UNARY` and :data:`BINARY`
(:mod:`singa._math`, :mod:`singa.tensor`, :mod:`singa.autograd._elementwise`), so adding such
an op is one record here plus its backend kernels. Both tables map op-table keys to records.

A gradient rule is ``grad(ops, dy, x, y) -> dx`` (unary) or ``grad(ops, dy, a, b, y) -> (da,
db)`` (binary, before the reduction to each input's shape), with ``ops`` the functional module
:mod:`singa._math` passed in at call time: the table is loaded before that module exists.
Inputs the record does not keep (``keep``) arrive as None. A record with attributes (``attrs``,
e.g. HardSigmoid's alpha and gamma) passes them by name to its reference, its op and its rule:
``grad(ops, dy, x, y, **attrs)``. A record whose op is an ONNX operator says so (:class:`Onnx`):
singa-onnx builds its import handler and its exporter from that.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._ctensor import CTensor
from ._records import Onnx, dtype_names
from ._registry import FHD, NUM

__all__ = ["Unary", "Binary", "UNARY", "BINARY", "zero_grad"]


def zero_grad(ops, dy, x, y):
    """The gradient of a piecewise-constant function: zero almost everywhere."""
    return ops.set_value(CTensor._new(dy.dims, dy.dev, dy.dtype_code), 0.0)


def _fmt(values) -> str:
    # tolist: Python floats, formatted without a numpy scalar per value
    return "[" + ", ".join(f"{v:.4g}" for v in np.ravel(values).astype(float).tolist()) + "]"


# the layers whose docstrings give the gradient: autograd's functions and Operator classes
_AUTOGRAD = ("autograd", "operator")

_OUT = "out : CTensor, optional\n    Written with y (in place) instead of a new tensor.\n"


@dataclass(frozen=True, eq=False)
class Unary:
    """An elementwise op of one tensor.

    op: op-table key. name: the ``singa._math`` function. reference: numpy reference.
    domain: ``(low, high)`` of sampled test inputs (and of the docstring example).
    formula: y in terms of x. grad: gradient rule ``grad(ops, dy, x, y)``; None: the op has no
    gradient (backward gives None). grad_formula: dx in terms of dy, x, y. keep: which of x and
    y the gradient reads ("x", "y" or ""), so autograd keeps only those. operator and
    autograd: the ``singa.autograd`` class and function names (None: not in autograd).
    tensor: ``singa.tensor`` exports ``name``. note: why the gradient is written as it is.
    attrs: ``(name, default, low, high)`` of each float attribute, passed by name to the
    reference, the op and the gradient rule (``low``, ``high``: the range the conformance kit
    samples). autograd builds no class for a record with attributes: its Operator keeps SINGA's
    positional signature and is written in :mod:`singa.autograd._elementwise`. onnx: the ONNX
    operator that computes the same (None: none does).
    """

    op: str
    name: str
    reference: Callable
    domain: tuple[float, float]
    dtypes: tuple
    formula: str
    grad: Callable | None
    grad_formula: str
    keep: str = "x"
    operator: str | None = None
    autograd: str | None = None
    tensor: bool = False
    note: str = ""
    attrs: tuple = ()
    onnx: Onnx | None = None

    @property
    def defaults(self) -> dict:
        """Each attribute's default value, by name."""
        return {name: default for name, default, _, _ in self.attrs}

    @functools.cached_property
    def example(self) -> str:
        """``name(x) = y`` on three points of the domain, y computed by the reference (once:
        every layer's docstring shows it)."""
        low, high = self.domain
        # np.linspace(low, high, 3) without its overhead (the same three floats)
        x = np.array([low, (high - low) / 2 + low, high], dtype=float).round(2)
        return f"{self.name}({_fmt(x)}) = {_fmt(self.reference(x))}"

    def doc(self, layer: str, arg: str = "x", kind: str = "CTensor") -> str:
        """The docstring of this op's function in ``layer`` ("math", "tensor", "autograd"), or
        of its ``singa.autograd`` Operator class (``layer="operator"``)."""
        grad = (f"\n\nGradient: dx = {self.grad_formula}." if self.grad is not None else
                "\n\nNo gradient flows through it.") if layer in _AUTOGRAD else ""
        note = f"\n\n{self.note}" if self.note and layer in _AUTOGRAD else ""
        if layer == "operator":
            back = ("``backward(dy)`` maps the CTensor dy (y's shape) to dx" if self.grad
                    is not None else "``backward(dy)`` returns None")
            return (f"Operator of y = {self.formula}, elementwise (op ``{self.op}``).{grad}"
                    f"{note}\n\nThe constructor takes only the optional ``name`` of every "
                    f"Operator. Calling an instance on a Tensor x (any shape; dtype "
                    f"{dtype_names(self.dtypes)}) returns the 1-tuple (y,), y of x's shape and "
                    f"dtype; ``{self.autograd}(x)`` returns y itself.\n\nNotes\n-----\n"
                    f"``forward(x)`` maps the CTensor x to y; {back}.\n\nExamples\n--------\n"
                    f"{self.example}\n")
        formula = self.formula if arg == "x" else f"{self.formula}, for x = {arg}"
        attrs = "".join(f"{name} : float, default {default:g}\n" for name, default, _, _ in
                        self.attrs)
        return (f"y = {formula}, elementwise (op ``{self.op}``).{grad}{note}\n\n"
                f"Parameters\n----------\n{arg} : {kind}\n    Any shape; dtype "
                f"{dtype_names(self.dtypes)}.\n{attrs}{_OUT if layer == 'math' else ''}\n"
                f"Returns\n-------\n{kind}\n    y, of {arg}'s shape and dtype.\n\n"
                f"Examples\n--------\n{self.example}\n")


@dataclass(frozen=True, eq=False)
class Binary:
    """An elementwise op of two tensors with numpy broadcasting, or a tensor and a number.

    op, name, reference, dtypes, formula, operator, autograd as in :class:`Unary`. scalar: the
    op-table key of the tensor-and-number form (None: the number is broadcast as a 0-d
    tensor). grad: ``grad(ops, dy, a, b, y) -> (da, db)``; None: no gradient (comparisons and
    logic). keep: which of a, b, y the gradient reads ("ab", "aby" or ""). int_as_float:
    autograd computes int32 inputs in float32 and casts the result back (SINGA's Mul).
    tensor: the ``singa.tensor`` function name (None: not exported there). onnx: as in
    :class:`Unary`.
    """

    op: str
    name: str
    reference: Callable
    dtypes: tuple
    formula: str
    scalar: str | None
    grad: Callable | None = None
    grad_formula: str = ""
    keep: str = ""
    operator: str | None = None
    autograd: str | None = None
    int_as_float: bool = False
    tensor: str | None = None
    onnx: Onnx | None = None

    @functools.cached_property
    def example(self) -> str:
        """``name(a, b) = y`` on fixed operands, y computed by the reference (once)."""
        a, b = np.array([1.0, 2.0, 3.0]), np.array([2.0, 2.0, 2.0])
        return f"{self.name}({_fmt(a)}, {_fmt(b)}) = {_fmt(self.reference(a, b))}"

    def doc(self, layer: str, args: tuple = ("a", "b"), kind: str = "CTensor",
            out: str = "") -> str:
        """The docstring of this op's function in ``layer`` ("math", "tensor", "autograd"), or
        of its ``singa.autograd`` Operator class (``layer="operator"``); ``out`` documents the
        parameter that receives y in place, if any."""
        grad = (f"\n\nGradient (each reduced to its input's shape): {self.grad_formula}."
                if self.grad is not None else "\n\nNo gradient flows through it."
                ) if layer in _AUTOGRAD else ""
        if layer == "operator":
            back = ("``backward(dy)`` maps the CTensor dy (y's shape) to (da, db), each of "
                    "its input's shape" if self.grad is not None else
                    "``backward(dy)`` returns None")
            return (f"Operator of y = {self.formula}, elementwise with numpy broadcasting (op "
                    f"``{self.op}``).{grad}\n\nThe constructor takes only the optional ``name`` of "
                    f"every Operator. Calling an instance on Tensors a and b (dtype "
                    f"{dtype_names(self.dtypes)}; b broadcasts with a, another dtype is "
                    f"converted to the common one) returns the 1-tuple (y,), y of the broadcast "
                    f"shape; ``{self.autograd}(a, b)`` "
                    f"returns y itself.\n\nNotes\n-----\n``forward(a, b)`` maps the CTensors a "
                    f"and b to y; {back}.\n\nExamples\n--------\n{self.example}\n")
        a, b = args
        other = kind if layer == "autograd" else f"{kind} or number"
        out = _OUT if layer == "math" else out
        names = "" if args == ("a", "b") else f", for a = {a}, b = {b}"
        return (f"y = {self.formula}, elementwise with numpy broadcasting (op ``{self.op}``)"
                f"{names}.{grad}\n\nParameters\n----------\n{a} : {kind}\n"
                f"    dtype {dtype_names(self.dtypes)}.\n{b} : {other}\n    Broadcasts with "
                f"{a}; a tensor of another dtype is converted to the common dtype.\n{out}\n"
                f"Returns\n-------\n{kind}\n    y, of the broadcast shape.\n\nExamples\n"
                f"--------\n{self.example}\n")


def _round_half_away(x):
    """Round half away from zero, keeping the sign (C's ``round``: ``round(-0.3) = -0.0``).

    ``floor(|x| + 0.5)`` would be off for the float just below 0.5 (the sum rounds up), so
    the fraction is compared exactly instead."""
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        r = t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0.0)
    return np.copysign(r, x)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


_erf = np.vectorize(math.erf, otypes=[np.float64])
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _hard_sigmoid(x, alpha=0.2, gamma=0.5):
    return np.clip(x * alpha + gamma, 0.0, 1.0).astype(x.dtype)


def _hard_sigmoid_grad(ops, dy, x, y, alpha, gamma):
    return ops.hardsigmoid_backward(dy, x, alpha=alpha, gamma=gamma)


def _hard_swish(x):
    with np.errstate(invalid="ignore"):
        mid = x * (x + 3.0) / 6.0
    return np.where(x <= -3.0, 0.0, np.where(x >= 3.0, x, mid)).astype(x.dtype)


def _div_grad(ops, dy, a, b, y):
    da = ops.div(dy, b)
    return da, ops.neg(ops.div(ops.mul(da, a), b))


def _pow_grad(ops, dy, a, b, y):
    return (ops.mul(dy, ops.mul(b, ops.pow(a, ops.sub(b, 1.0)))),
            ops.mul(dy, ops.mul(ops.log(a), y)))


UNARY = {decl.op: decl for decl in (
    Unary("Abs", "abs", np.abs, (-3, 3), NUM, "|x|",
          lambda ops, dy, x, y: ops.mul(dy, ops.sign(x)), "dy * sign(x)",
          autograd="abs", tensor=True, onnx=Onnx("Abs")),
    Unary("Neg", "neg", np.negative, (-3, 3), NUM, "-x",
          lambda ops, dy, x, y: ops.neg(dy), "-dy", keep="",
          operator="Negative", autograd="negative", onnx=Onnx("Neg")),
    Unary("Sign", "sign", np.sign, (-3, 3), NUM, "sign(x)", zero_grad, "0", keep="",
          autograd="sign", tensor=True, onnx=Onnx("Sign")),
    # no ONNX operator squares (a Mul or Pow node does)
    Unary("Square", "square", np.square, (-3, 3), NUM, "x^2",
          lambda ops, dy, x, y: ops.mul(ops.mul(dy, x), 2.0), "2 x dy",
          autograd="square", tensor=True),
    Unary("Ceil", "ceil", np.ceil, (-3, 3), FHD, "ceil(x)", zero_grad, "0", keep="",
          autograd="ceil", tensor=True, onnx=Onnx("Ceil")),
    Unary("Floor", "floor", np.floor, (-3, 3), FHD, "floor(x)", zero_grad, "0", keep="",
          autograd="floor", onnx=Onnx("Floor")),
    # ONNX's Round rounds halves to even: RoundE is that op
    Unary("Round", "round", _round_half_away, (-3, 3), FHD,
          "round(x), halves away from zero", zero_grad, "0", keep="", autograd="round"),
    Unary("RoundE", "rounde", np.rint, (-3, 3), FHD, "round(x), halves to even", zero_grad,
          "0", keep="", operator="Rounde", autograd="rounde", onnx=Onnx("Round")),
    Unary("Exp", "exp", np.exp, (-3, 3), FHD, "exp(x)",
          lambda ops, dy, x, y: ops.mul(dy, y), "dy * y", keep="y",
          autograd="exp", tensor=True, onnx=Onnx("Exp")),
    Unary("Log", "log", np.log, (0.1, 5), FHD, "log(x)",
          lambda ops, dy, x, y: ops.div(dy, x), "dy / x", autograd="log", tensor=True,
          onnx=Onnx("Log")),
    Unary("Sqrt", "sqrt", np.sqrt, (0.01, 5), FHD, "sqrt(x)",
          lambda ops, dy, x, y: ops.div(ops.mul(dy, 0.5), y), "dy * 0.5 / y", keep="y",
          autograd="sqrt", tensor=True, onnx=Onnx("Sqrt")),
    Unary("Reciprocal", "reciprocal", np.reciprocal, (0.5, 3), FHD, "1 / x",
          lambda ops, dy, x, y: ops.mul(dy, ops.neg(ops.reciprocal(ops.square(x)))),
          "-dy / x^2", autograd="reciprocal", onnx=Onnx("Reciprocal")),
    Unary("Erf", "erf", _erf, (-2, 2), FHD, "erf(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.mul(ops.exp(ops.neg(ops.square(x))),
                                                    _TWO_OVER_SQRT_PI)),
          "2/sqrt(pi) exp(-x^2) dy", autograd="erf", onnx=Onnx("Erf")),
    Unary("ReLU", "relu", lambda x: np.maximum(x, 0).astype(x.dtype), (-3, 3), NUM,
          "max(x, 0)", lambda ops, dy, x, y: ops.relu_backward(dy, y), "dy * (y > 0)",
          keep="y", autograd="relu", tensor=True,
          note="Keeps y rather than x (y > 0 exactly where x > 0): y is usually kept anyway "
               "by the next op, so x (e.g. a batch-norm output) can be freed after the "
               "forward pass.",
          onnx=Onnx("Relu")),
    Unary("Sigmoid", "sigmoid", _sigmoid, (-4, 4), FHD, "1 / (1 + exp(-x))",
          lambda ops, dy, x, y: ops.mul(dy, ops.mul(y, ops.rsub(y, 1.0))),
          "dy * y * (1 - y)", keep="y", autograd="sigmoid", tensor=True, onnx=Onnx("Sigmoid")),
    Unary("HardSigmoid", "hardsigmoid", _hard_sigmoid, (-4, 4), FHD,
          "clip(alpha x + gamma, 0, 1)", _hard_sigmoid_grad,
          "alpha dy where 0 < alpha x + gamma < 1, else 0",
          attrs=(("alpha", 0.2, 0.05, 1.0), ("gamma", 0.5, -0.5, 1.5)),
          onnx=Onnx("HardSigmoid", attrs=(("alpha", "alpha"), ("beta", "gamma")))),
    Unary("HardSwish", "hardswish", _hard_swish, (-5, 5), FHD,
          "x clip(x / 6 + 1/2, 0, 1): 0 for x <= -3, x (x + 3) / 6 between, x for x >= 3",
          lambda ops, dy, x, y: ops.hardswish_backward(dy, x),
          "dy (2 x + 3) / 6 for -3 < x < 3, dy for x >= 3, else 0", autograd="hardswish",
          operator="HardSwish", onnx=Onnx("HardSwish")),
    Unary("Tanh", "tanh", np.tanh, (-3, 3), FHD, "tanh(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.rsub(ops.square(y), 1.0)),
          "dy * (1 - y^2)", keep="y", autograd="tanh", tensor=True, onnx=Onnx("Tanh")),
    Unary("SoftPlus", "softplus", lambda x: np.log1p(np.exp(x)), (-3, 3), FHD,
          "log(1 + exp(x))", lambda ops, dy, x, y: ops.mul(dy, ops.sigmoid(x)),
          "sigmoid(x) dy", autograd="softplus", onnx=Onnx("Softplus")),
    Unary("SoftSign", "softsign", lambda x: x / (1 + np.abs(x)), (-3, 3), FHD,
          "x / (1 + |x|)",
          lambda ops, dy, x, y: ops.mul(dy, ops.rdiv(ops.square(ops.add(ops.abs(x), 1.0)),
                                                     1.0)),
          "dy / (1 + |x|)^2", autograd="softsign", onnx=Onnx("Softsign")),
    Unary("Sin", "sin", np.sin, (-3, 3), FHD, "sin(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.cos(x)), "cos(x) dy", autograd="sin",
          onnx=Onnx("Sin")),
    Unary("Cos", "cos", np.cos, (-3, 3), FHD, "cos(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.neg(ops.sin(x))), "-sin(x) dy",
          autograd="cos", onnx=Onnx("Cos")),
    Unary("Tan", "tan", np.tan, (-1.2, 1.2), FHD, "tan(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.rdiv(ops.square(ops.cos(x)), 1.0)),
          "dy / cos(x)^2", autograd="tan", onnx=Onnx("Tan")),
    Unary("Asin", "asin", np.arcsin, (-0.95, 0.95), FHD, "asin(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.pow(ops.rsub(ops.square(x), 1.0), -0.5)),
          "dy / sqrt(1 - x^2)", autograd="asin", onnx=Onnx("Asin")),
    Unary("Acos", "acos", np.arccos, (-0.95, 0.95), FHD, "acos(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.neg(ops.pow(ops.rsub(ops.square(x), 1.0),
                                                            -0.5))),
          "-dy / sqrt(1 - x^2)", autograd="acos", onnx=Onnx("Acos")),
    Unary("Atan", "atan", np.arctan, (-3, 3), FHD, "atan(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.rdiv(ops.add(ops.square(x), 1.0), 1.0)),
          "dy / (1 + x^2)", autograd="atan", onnx=Onnx("Atan")),
    Unary("Sinh", "sinh", np.sinh, (-3, 3), FHD, "sinh(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.cosh(x)), "cosh(x) dy", autograd="sinh",
          onnx=Onnx("Sinh")),
    Unary("Cosh", "cosh", np.cosh, (-3, 3), FHD, "cosh(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.sinh(x)), "sinh(x) dy", autograd="cosh",
          onnx=Onnx("Cosh")),
    Unary("Asinh", "asinh", np.arcsinh, (-3, 3), FHD, "asinh(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.pow(ops.add(ops.square(x), 1.0), -0.5)),
          "dy / sqrt(x^2 + 1)", autograd="asinh", onnx=Onnx("Asinh")),
    Unary("Acosh", "acosh", np.arccosh, (1.05, 4), FHD, "acosh(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.pow(ops.sub(ops.square(x), 1.0), -0.5)),
          "dy / sqrt(x^2 - 1)", autograd="acosh", onnx=Onnx("Acosh")),
    Unary("Atanh", "atanh", np.arctanh, (-0.9, 0.9), FHD, "atanh(x)",
          lambda ops, dy, x, y: ops.mul(dy, ops.rdiv(ops.rsub(ops.square(x), 1.0), 1.0)),
          "dy / (1 - x^2)", autograd="atanh", onnx=Onnx("Atanh")),
    Unary("Not", "logical_not", lambda x: (x == 0).astype(x.dtype), (-1, 1), NUM,
          "1 where x == 0, else 0", None, "", keep="", operator="Not", autograd="_not",
          onnx=Onnx("Not", bools="all")),
)}

BINARY = {decl.op: decl for decl in (
    Binary("Add", "add", np.add, NUM, "a + b", "AddScalar",
           lambda ops, dy, a, b, y: (dy, dy), "da = dy, db = dy", autograd="add",
           tensor="add", onnx=Onnx("Add")),
    Binary("Sub", "sub", np.subtract, NUM, "a - b", "SubScalar",
           lambda ops, dy, a, b, y: (dy, ops.neg(dy)), "da = dy, db = -dy", autograd="sub",
           tensor="sub", onnx=Onnx("Sub")),
    Binary("Mul", "mul", np.multiply, NUM, "a * b", "MulScalar",
           lambda ops, dy, a, b, y: (ops.mul(dy, b), ops.mul(dy, a)), "da = dy b, db = dy a",
           keep="ab", autograd="mul", int_as_float=True, tensor="eltwise_mult", onnx=Onnx("Mul")),
    Binary("Div", "div", lambda a, b: (a / b).astype(a.dtype) if a.dtype.kind == "i" else a / b,
           NUM, "a / b", "DivScalar", _div_grad, "da = dy / b, db = -dy a / b^2", keep="ab",
           autograd="div", tensor="div", onnx=Onnx("Div")),
    Binary("Pow", "pow", np.power, FHD, "a ** b", "PowScalar", _pow_grad,
           "da = dy b a^(b-1), db = dy log(a) a^b", keep="aby", autograd="pow", onnx=Onnx("Pow")),
    Binary("LT", "lt", lambda a, b: (a < b).astype(a.dtype), NUM, "(a < b) as 1/0",
           "LTScalar", operator="Less", autograd="less", tensor="lt",
           onnx=Onnx("Less", bools="out")),
    # LE, GE: ONNX's LessOrEqual and GreaterOrEqual have no autograd Operator here to import
    # into; singa-onnx writes them as not(a > b) and not(a < b)
    Binary("LE", "le", lambda a, b: (a <= b).astype(a.dtype), NUM, "(a <= b) as 1/0",
           "LEScalar", tensor="le"),
    Binary("GT", "gt", lambda a, b: (a > b).astype(a.dtype), NUM, "(a > b) as 1/0",
           "GTScalar", operator="Greater", autograd="greater", tensor="gt",
           onnx=Onnx("Greater", bools="out")),
    Binary("GE", "ge", lambda a, b: (a >= b).astype(a.dtype), NUM, "(a >= b) as 1/0",
           "GEScalar", tensor="ge"),
    Binary("EQ", "eq", lambda a, b: (a == b).astype(a.dtype), NUM, "(a == b) as 1/0",
           "EQScalar", operator="Equal", autograd="equal", tensor="eq",
           onnx=Onnx("Equal", bools="out")),
    # NE: ONNX has no NotEqual; Maximum, Minimum: ONNX's Max and Min take any number of
    # inputs (autograd's Max and Min, not these records)
    Binary("NE", "ne", lambda a, b: (a != b).astype(a.dtype), NUM, "(a != b) as 1/0",
           "NEScalar"),
    Binary("Maximum", "maximum", np.maximum, NUM, "max(a, b)", "MaxScalar"),
    Binary("Minimum", "minimum", np.minimum, NUM, "min(a, b)", "MinScalar"),
    Binary("And", "logical_and", lambda a, b: np.logical_and(a, b).astype(a.dtype), NUM,
           "a and b (nonzero is true) as 1/0", None, operator="And", autograd="_and",
           onnx=Onnx("And", bools="all")),
    Binary("Or", "logical_or", lambda a, b: np.logical_or(a, b).astype(a.dtype), NUM,
           "a or b as 1/0", None, operator="Or", autograd="_or", onnx=Onnx("Or", bools="all")),
    Binary("Xor", "logical_xor", lambda a, b: np.logical_xor(a, b).astype(a.dtype), NUM,
           "a xor b as 1/0", None, operator="Xor", autograd="_xor", onnx=Onnx("Xor", bools="all")),
)}
