"""The axis reductions, each declared once: op-table entry and gradient rule side by side.

A :class:`Reduction` record holds everything about one op that reduces a tensor over a set of
axes: the op-table key and numpy's reduction (what backends implement and the conformance kit
checks), its math as text, the gradient rule, what the rule reads, and the names SINGA gives
it in ``singa._math`` and ``singa.autograd``. :mod:`singa.ops._tensor_ops` enters them in the
op table; ``singa._math`` builds its functions, :mod:`singa.autograd._reductions` its Operator
classes and ``singa.autograd`` its functions from :data:`REDUCTIONS`, and singa-onnx its
import handlers and exporters, so adding such an op is one record here plus its backend
kernels. The table maps op-table keys to records.

Every record has the attributes of numpy's and ONNX's reductions: ``axes`` (distinct ints,
negative ones counted from the end; None: all) and ``keepdims`` (keep the reduced axes as
size 1). A gradient rule is ``grad(ops, dy, x, y, shape, axes) -> dx`` with ``ops`` the
functional module :mod:`singa._math` passed in at call time (the table is loaded before it
exists), dy and y with the reduced axes kept as size 1 whatever the forward's keepdims, shape
x's shape and axes the normalised axes (a sorted tuple). x and y arrive as None unless the
record keeps them (``keep``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._records import Onnx, dtype_names
from ._registry import FHD, NUM
from ._rules import normalize_axes

__all__ = ["Reduction", "REDUCTIONS"]

# the docstring example: a 2x3 matrix reduced over axis 1 (each row to one value)
_EXAMPLE_X = ((1.0, -2.0, 3.0), (4.0, 0.0, 5.0))
_EXAMPLE_TEXT = "[[1, -2, 3], [4, 0, 5]]"


def _sum_grad(ops, dy, x, y, shape, axes):
    return ops.copy(ops.broadcast_to(dy, shape))


def _mean_grad(ops, dy, x, y, shape, axes):
    n = math.prod(shape[a] for a in axes)
    return ops.copy(ops.broadcast_to(ops.mul(dy, 1.0 / max(n, 1)), shape))


def _extreme_grad(ops, dy, x, y, shape, axes):
    mask = ops.as_type(ops.eq(x, ops.broadcast_to(y, shape)), x.dtype_code)
    count = ops.sum(mask, axes, True)
    return ops.mul(mask, ops.broadcast_to(ops.div(dy, count), shape))


@dataclass(frozen=True, eq=False)
class Reduction:
    """An op that reduces one tensor over ``axes``, keeping them as size 1 with ``keepdims``.

    op: op-table key. name: the ``singa._math`` function. numpy: numpy's reduction of the same
    meaning (``np.sum``, ...), from which :attr:`reference` is made. dtypes: the dtype codes
    the op is defined for. formula: y in terms of the cells x_i reduced into it.
    grad: gradient rule ``grad(ops, dy, x, y, shape, axes)`` (module docstring).
    grad_formula: dx_i in terms of dy, x, y. keep: which of x and y the rule reads ("", "x",
    "y" or "xy"), so autograd keeps only those. bound: numpy's reduction whose value on |x|,
    times sqrt(n) for n cells, bounds the rounding of the sum the op accumulates (the op
    table's ``acc_bound``); None: the op is exact (max, min). operator and autograd: the
    ``singa.autograd`` class and function names. note: why the gradient is written as it is.
    onnx: the ONNX operator that computes the same, with ONNX's reduce attributes (``axes``
    as an attribute or, from the opset onnx's schema says, an input; ``keepdims``); None:
    none does.
    """

    op: str
    name: str
    numpy: Callable
    dtypes: tuple
    formula: str
    grad: Callable
    grad_formula: str
    keep: str = ""
    bound: Callable | None = None
    operator: str | None = None
    autograd: str | None = None
    note: str = ""
    onnx: Onnx | None = None

    @functools.cached_property
    def reference(self) -> Callable:
        """The numpy reference ``reference(x, axes=None, keepdims=False)``, in x's dtype (the
        op table's; one function per record)."""
        reduce = self.numpy

        def reference(x, axes=None, keepdims=False):
            return reduce(x, normalize_axes("reduce", axes, x.ndim), keepdims=keepdims
                          ).astype(x.dtype)

        reference.__name__ = reference.__qualname__ = f"{self.name}_reference"
        return reference

    @functools.cached_property
    def example(self) -> str:
        """The reduction of a 2x3 matrix over axis 1, y computed by the reference (once: every
        layer's docstring shows it)."""
        y = self.reference(np.array(_EXAMPLE_X), (1,))
        return "[" + ", ".join(f"{v:.4g}" for v in y.tolist()) + "]"

    def doc(self, layer: str, kind: str = "CTensor") -> str:
        """The docstring of this op's function in ``layer`` ("math", "autograd"), or of its
        ``singa.autograd`` Operator class (``layer="operator"``)."""
        head = (f"y = {self.formula}, over the n cells x_i of x that ``axes`` reduce into each "
                f"element of y (op ``{self.op}``).")
        grad = note = ""
        if layer != "math":
            grad = f"\n\nGradient: {self.grad_formula}."
            note = f"\n\n{self.note}" if self.note else ""
        shape = "x's shape less the reduced axes (kept as size 1 with keepdims), and x's dtype"
        if layer == "operator":
            back = ("``backward(dy)`` maps the CTensor dy (y's shape) to dx (x's shape); it "
                    "reads x and y, which forward keeps while training" if self.keep else
                    "``backward(dy)`` maps the CTensor dy (y's shape) to dx (x's shape)")
            return (f"Operator of {head}{grad}{note}\n\nThe constructor takes ``axes`` "
                    f"(ints, negative from the end; None: all) and ``keepdims`` (1 keeps the "
                    f"reduced axes as size 1). Calling an instance on a Tensor x (dtype "
                    f"{dtype_names(self.dtypes)}) returns the 1-tuple (y,), y of {shape}. "
                    f"``{self.autograd}(x, axes, keepdims)`` returns y itself.\n\nNotes\n-----\n"
                    f"``forward(x)`` maps the CTensor x to y; {back}.\n\nExamples\n--------\n"
                    f"{self.operator}(axes=[1], keepdims=0)(x)[0] = {self.example}, for x = "
                    f"{_EXAMPLE_TEXT}\n")
        if layer == "math":
            keepdims = "keepdims : bool, default False\n    True keeps"
            call = f"{self.name}({_EXAMPLE_TEXT}, axes=(1,))"
        else:
            keepdims = "keepdims : int, default 1\n    1 keeps"
            call = f"{self.autograd}({_EXAMPLE_TEXT}, axes=[1], keepdims=0)"
        return (f"{head}{grad}{note}\n\nParameters\n----------\nx : {kind}\n    Any shape; "
                f"dtype {dtype_names(self.dtypes)}.\naxes : int, sequence of int or None, "
                f"optional\n    The axes reduced, negative ones counted from the end; None: "
                f"all.\n{keepdims} the reduced axes as size 1.\n\n"
                f"Returns\n-------\n{kind}\n    y, of {shape}.\n\nExamples\n--------\n"
                f"{call} = {self.example}\n")


_EXTREME_NOTE = ("The cells that equal the extreme share dy equally (the subgradient "
                 "PyTorch's amax and amin use), so a tie does not double the gradient; the "
                 "rule reads x and y, which autograd keeps while training.")

REDUCTIONS = {decl.op: decl for decl in (
    Reduction("Sum", "sum", np.sum, NUM, "sum_i x_i", _sum_grad,
              "dx_i = dy (dy broadcast back to x's shape)", bound=np.sum,
              operator="ReduceSum", autograd="reduce_sum",
              note="SINGA scaled this gradient like a mean's; d y / d x_i = 1 "
                   "(docs/compatibility.md).",
              onnx=Onnx("ReduceSum")),
    Reduction("ReduceMean", "reduce_mean", np.mean, FHD, "sum_i x_i / n",
              _mean_grad, "dx_i = dy / n", bound=np.mean, operator="ReduceMean",
              autograd="reduce_mean", onnx=Onnx("ReduceMean")),
    Reduction("ReduceMax", "reduce_max", np.max, NUM, "max_i x_i", _extreme_grad,
              "dx_i = dy [x_i == y] / #{j : x_j == y}", keep="xy", operator="ReduceMax",
              autograd="reduce_max", note=_EXTREME_NOTE, onnx=Onnx("ReduceMax")),
    Reduction("ReduceMin", "reduce_min", np.min, NUM, "min_i x_i", _extreme_grad,
              "dx_i = dy [x_i == y] / #{j : x_j == y}", keep="xy", operator="ReduceMin",
              autograd="reduce_min", note=_EXTREME_NOTE, onnx=Onnx("ReduceMin")),
)}
