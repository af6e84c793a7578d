"""The rearrangements, each declared once: constructor, shape plan and numpy meaning together.

A rearrangement moves x's cells without computing anything: y = reshape(transpose(reshape(x,
mid), perm), out), where any of the three steps may be absent. Reshape, Flatten, Squeeze and
Unsqueeze only reshape, Transpose only permutes, DepthToSpace and SpaceToDepth do all three.
A :class:`Rearrangement` record holds one such op: its constructor's parameters (name,
default, meaning) and the function that checks them, its plan (``plan(op, x_shape) -> (mid,
perm, out)``, from what the constructor stored on the Operator), numpy's form of the same op
(the tests' oracle and the docstring example), and its ONNX operator. The gradient is the same
rule for every record, the inverse steps in reverse order (dy reshaped to the permuted shape,
permuted back, reshaped to x's shape), so a record has no rule of its own. No record has an
op-table entry: each step is a view (``singa._math.reshape`` of a contiguous tensor,
``transpose``) or a Copy.

:mod:`singa.autograd._rearrangements` builds the Operator classes and ``singa.autograd`` the
functions from :data:`REARRANGEMENTS`, with docstrings rendered from the records, and
singa-onnx the exporters, so adding such an op is one record here. The table maps the
Operator class names to the records.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._shapes import as_int
from ..errors import ShapeError
from ._records import Onnx
from ._rules import normalize_axes
from ._signatures import REQUIRED, Param, compile_def, param_entries
from ._signatures import wrap as _wrap

__all__ = ["Param", "REQUIRED", "Rearrangement", "REARRANGEMENTS", "compile_def"]

# how the docstrings write a parameter's default of None (Transpose's perm and shape)
_NONE = ", default None"


def _tolist(a: np.ndarray) -> str:
    return str(a.tolist())


@dataclass(frozen=True, eq=False)
class Rearrangement:
    """An op that rearranges the cells of one tensor: reshape to mid, permute, reshape to out.

    op: the ``singa.autograd`` Operator class (and the key in :data:`REARRANGEMENTS`).
    autograd: SINGA's function. summary: what y is, one line. params: the constructor's
    parameters, in order. init: ``init(*params) -> dict``, the constructor's check of its
    arguments, giving the attributes the Operator keeps (public: singa-onnx and users read
    them). plan: ``plan(op, x_shape) -> (mid, perm, out)``, each None where that step is
    absent; it raises the ShapeError of an x the op cannot take. numpy: numpy's form of the op,
    ``numpy(x, *params)``. example: ``(x_shape, params)`` of the docstring example (x holds
    0, 1, ... in order). x: what x may be. returns: y's shape and dtype. grad_formula: dx in
    words (the rule itself is the module's). function: the parameters of ``autograd``'s
    function where SINGA's differ from the constructor's (Transpose's function names the
    permutation ``shape``; Unsqueeze's defaults to -1), passed to the constructor by position;
    None: the constructor's. onnx: the ONNX operator computing the same, its ``attrs`` pairing
    ONNX's attribute or input names with the Operator's attributes (an exporter writes each as
    the input or the attribute that onnx's schema has at the export opset, through the form's
    ``convert`` where it names one), and an instance its ``applies`` refuses exported as the
    steps of its plan; None: no ONNX operator does.
    """

    op: str
    autograd: str
    summary: str
    params: tuple[Param, ...]
    init: Callable[..., dict]
    plan: Callable[[Any, tuple], tuple]
    numpy: Callable
    example: tuple
    returns: str
    grad_formula: str
    x: str = "Any shape and dtype."
    function: tuple[Param, ...] | None = None
    onnx: Onnx | None = None

    @property
    def function_params(self) -> tuple[Param, ...]:
        """The parameters of the ``singa.autograd`` function after x."""
        return self.params if self.function is None else self.function

    @functools.cached_property
    def example_text(self) -> tuple[str, str, str]:
        """The example's arguments, y and x as text, y computed by :attr:`numpy` (once: both
        docstrings show it)."""
        shape, args = self.example
        x = np.arange(math.prod(shape)).reshape(shape)
        return ", ".join(repr(a) for a in args), _tolist(self.numpy(x, *args)), _tolist(x)

    def doc(self, layer: str, kind: str = "CTensor") -> str:
        """The docstring of this op's ``singa.autograd`` function (``layer="autograd"``) or of
        its Operator class (``layer="operator"``)."""
        args, y, x = self.example_text
        grad = f"\n\nGradient: dx = {self.grad_formula}."

        if layer == "operator":
            call = f"{self.op}({args})(x)[0]"
            params = param_entries(self.params, none=_NONE)
            return (_wrap(f"Operator of {self.summary}.") + f"{grad}\n\n"
                    + (f"Parameters\n----------\n{params}\n" if params else "")
                    + "Notes\n-----\n"
                    + _wrap(f"Calling an instance on a Tensor x ({self.x[0].lower()}"
                            f"{self.x[1:-1]}) returns the 1-tuple (y,), y {self.returns}; "
                            f"``{self.autograd}(x, ...)`` returns y itself. ``forward(x)`` "
                            f"maps the CTensor x to y, ``backward(dy)`` the CTensor dy to dx, "
                            f"of x's shape.")
                    + f"\n\nExamples\n--------\n{call} = {y}, for x = {x}\n")
        call = f"{self.autograd}(x{', ' if args else ''}{args})"
        params = param_entries(self.function_params, none=_NONE)
        return (_wrap(f"{self.summary} (:class:`{self.op}`).")
                + f"{grad}\n\nParameters\n----------\n"
                f"x : {kind}\n    {self.x}\n{params}\nReturns\n-------\n"
                f"{kind}\n    y, {self.returns}.\n\nExamples\n--------\n{call} = {y}, for x = "
                f"{x}\n")


# ---------------------------------------------------------------- Reshape


def _reshape_init(shape):
    shape = list(shape) if not isinstance(shape, (int, np.integer)) else [shape]
    for i, d in enumerate(shape):
        as_int(d, f"Reshape: dimension {i} of shape {shape}")
    return {"shape": shape}


def _reshape_plan(op, x):
    if any(d == 0 for d in op.shape[len(x):]):
        raise ShapeError(f"Reshape: shape {op.shape} has a 0 at a position the input "
                         f"{x} does not have (0 copies the input's dimension there)")
    return None, None, [x[i] if d == 0 else int(d) for i, d in enumerate(op.shape)]


def _reshape_numpy(x, shape):
    shape = [shape] if np.ndim(shape) == 0 else list(shape)
    return x.reshape([x.shape[i] if d == 0 else d for i, d in enumerate(shape)])


# ---------------------------------------------------------------- Flatten


def _flatten_init(axis=1):
    return {"axis": as_int(axis, "Flatten: axis")}


def _flatten_plan(op, x):
    nd = len(x)
    ax = op.axis + nd if op.axis < 0 else op.axis
    if not 0 <= ax <= nd:
        raise ShapeError(f"Flatten: axis {op.axis} out of range for {x}")
    return None, None, (math.prod(x[:ax]), math.prod(x[ax:]))


# ---------------------------------------------------------------- Unsqueeze and Squeeze


def _unsqueeze_init(axis):
    axes = [axis] if not isinstance(axis, (list, tuple, range)) else list(axis)
    return {"axis": [as_int(a, "Unsqueeze: axis") for a in axes]}


def _unsqueeze_plan(op, x):
    nd = len(x) + len(op.axis)
    if any(not -nd <= a < nd for a in op.axis):
        raise ShapeError(f"Unsqueeze: axes {op.axis} must lie in [-{nd}, {nd}) for a "
                         f"{len(x)}-D input with {len(op.axis)} new axes")
    axes = sorted(a + nd if a < 0 else a for a in op.axis)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"Unsqueeze: axes {op.axis} name one position twice")
    shape = list(x)
    for a in axes:
        shape.insert(a, 1)
    return None, None, shape


def _squeeze_init(axis=()):
    axes = [axis] if not isinstance(axis, (list, tuple, range)) and axis is not None \
        else list(axis or [])
    return {"axis": [as_int(a, "Squeeze: axis") for a in axes]}


def _squeeze_plan(op, x):
    if op.axis:
        if not x:  # normalize_axes lets axis 0 through for a 0-d tensor
            raise ShapeError(f"Squeeze: a 0-d tensor has no axis {op.axis}; "
                             "squeeze it without axes (or not at all)")
        axes = normalize_axes("Squeeze", op.axis, len(x))
        for a in axes:
            if x[a] != 1:
                raise ShapeError(f"Squeeze: axis {a} of {x} is not 1")
    else:
        axes = tuple(i for i, d in enumerate(x) if d == 1)
    return None, None, [d for i, d in enumerate(x) if i not in axes]


def _axes_or_none(axis):
    return None if axis is None or np.ndim(axis) and not len(axis) else \
        tuple(np.ravel(axis).tolist())


# ---------------------------------------------------------------- Transpose


def _transpose_init(perm=None):
    return {"perm": None if perm is None else [as_int(a, "Transpose: axis") for a in perm]}


def _transpose_plan(op, x):
    # singa._math.transpose checks that perm is a permutation of x's axes
    return None, op.perm if op.perm is not None else list(range(len(x)))[::-1], None


# ---------------------------------------------------------------- DepthToSpace, SpaceToDepth


def _perm_from_zero(perm):
    return [int(a) + len(perm) if int(a) < 0 else int(a) for a in perm]


def _blocks_init(blocksize, mode="DCR"):
    return {"b": int(blocksize), "mode": mode.upper()}


def _depth_to_space_plan(op, s):
    n, c, h, w = s
    b = op.b
    if c % (b * b):
        raise ShapeError(f"DepthToSpace: channels {c} not divisible by blocksize^2 {b * b}")
    out = (n, c // (b * b), h * b, w * b)
    if op.mode == "DCR":
        return (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2), out
    return (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3), out


def _space_to_depth_plan(op, s):
    n, c, h, w = s
    b = op.b
    if h % b or w % b:
        raise ShapeError(f"SpaceToDepth: H {h} and W {w} must be divisible by {b}")
    perm = (0, 3, 5, 1, 2, 4) if op.mode == "DCR" else (0, 1, 3, 5, 2, 4)
    return (n, c, h // b, b, w // b, b), perm, (n, c * b * b, h // b, w // b)


def _depth_to_space_numpy(x, blocksize, mode="DCR"):
    # ONNX's definition of DepthToSpace, in numpy
    n, c, h, w = x.shape
    b = blocksize
    if mode.upper() == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def _space_to_depth_numpy(x, blocksize, mode="DCR"):
    # ONNX's definition of SpaceToDepth (DCR); CRD is the inverse of DepthToSpace's CRD
    n, c, h, w = x.shape
    b = blocksize
    t = x.reshape(n, c, h // b, b, w // b, b)
    t = t.transpose(0, 3, 5, 1, 2, 4) if mode.upper() == "DCR" else t.transpose(0, 1, 3, 5, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


_BLOCKSIZE = Param("blocksize", "int", "b, the side of the square blocks moved.")
_ANY = "Any shape and dtype."

REARRANGEMENTS = {decl.op: decl for decl in (
    Rearrangement(
        "Reshape", "reshape",
        "y = x reshaped to ``shape`` (ONNX Reshape: a 0 copies x's dimension, a -1 is "
        "inferred)",
        (Param("shape", "sequence of int", "The new shape, with as many cells as x."),),
        _reshape_init, _reshape_plan, _reshape_numpy, ((2, 3), ([3, -1],)),
        "of the new shape and x's dtype", "dy reshaped to x's shape",
        onnx=Onnx("Reshape", (("shape", "shape"),))),
    Rearrangement(
        "Flatten", "flatten",
        "y = x reshaped to 2-D, (prod(x.shape[:axis]), prod(x.shape[axis:]))",
        (Param("axis", "int", "Where the second dimension starts; negative counts from the "
               "end.", 1),),
        _flatten_init, _flatten_plan,
        lambda x, axis=1: x.reshape(math.prod(x.shape[:axis]), -1), ((2, 1, 3), ()),
        "2-D, of x's dtype", "dy reshaped to x's shape",
        onnx=Onnx("Flatten", (("axis", "axis"),))),
    Rearrangement(
        "Squeeze", "squeeze", "y = x without its size-1 axes ``axis``",
        (Param("axis", "int or sequence of int", "Axes to remove (each of size 1); empty: "
               "every size-1 axis.", ()),),
        _squeeze_init, _squeeze_plan,
        lambda x, axis=(): np.squeeze(x, _axes_or_none(axis)), ((1, 3, 1), ([0],)),
        "of x's shape without those axes, and x's dtype", "dy reshaped to x's shape",
        onnx=Onnx("Squeeze", (("axes", "axis"),))),
    Rearrangement(
        "Unsqueeze", "unsqueeze", "y = x with size-1 axes inserted at ``axis``",
        (Param("axis", "int or sequence of int", "Positions of the new axes in the "
               "output."),),
        _unsqueeze_init, _unsqueeze_plan,
        lambda x, axis: np.expand_dims(x, _axes_or_none(axis)), ((3,), (0,)),
        "with x.ndim + len(axis) axes, of x's dtype", "dy reshaped to x's shape",
        function=(Param("axis", "int or sequence of int", "Positions of the new axes in the "
                        "output.", -1),),
        onnx=Onnx("Unsqueeze", (("axes", "axis"),))),
    Rearrangement(
        "Transpose", "transpose",
        "y = x with its axes permuted, y.shape[i] = x.shape[perm[i]] (a strided view)",
        (Param("perm", "sequence of int or None", "The permutation; None reverses the "
               "axes.", None),),
        _transpose_init, _transpose_plan, lambda x, perm=None: np.transpose(x, perm),
        ((2, 3), ()), "of the permuted shape and x's dtype",
        "dy permuted by the inverse permutation",
        function=(Param("shape", "sequence of int or None", "The permutation (y.shape[i] "
                        "= x.shape[shape[i]]); None reverses the axes.", None),),
        # ONNX's perm counts from 0 (the op ran, so each negative axis is in range)
        onnx=Onnx("Transpose", (("perm", "perm"),), convert=(("perm", _perm_from_zero),))),
    Rearrangement(
        "DepthToSpace", "depth_to_space",
        "y = the (N, C, H, W) x as (N, C / b^2, H b, W b), each b x b block of y from b^2 "
        "channels of x",
        (_BLOCKSIZE, Param("mode", "str", "'DCR' (depth-column-row): cell (i, j) of the "
                           "block at channel c of y comes from channel (i b + j) C / b^2 + c "
                           "of x; 'CRD' (column-row-depth): from channel c b^2 + i b + j.",
                           "DCR")),
        _blocks_init, _depth_to_space_plan, _depth_to_space_numpy, ((1, 4, 1, 2), (2,)),
        "of shape (N, C / b^2, H b, W b) and x's dtype", "dy rearranged by the inverse steps",
        x="Shape (N, C, H, W), C divisible by b^2.",
        onnx=Onnx("DepthToSpace", (("blocksize", "b"), ("mode", "mode")))),
    Rearrangement(
        "SpaceToDepth", "space_to_depth",
        "y = the (N, C, H, W) x as (N, C b^2, H / b, W / b), the inverse of DepthToSpace in "
        "the same mode",
        (_BLOCKSIZE, Param("mode", "str", "'DCR' or 'CRD', as DepthToSpace's.", "DCR")),
        _blocks_init, _space_to_depth_plan, _space_to_depth_numpy, ((1, 1, 2, 4), (2,)),
        "of shape (N, C b^2, H / b, W / b) and x's dtype", "dy rearranged by the inverse steps",
        x="Shape (N, C, H, W), H and W divisible by b.",
        # ONNX's SpaceToDepth has no mode: it is the DCR one; a CRD one is exported as the
        # steps of its plan (Reshape, Transpose, Reshape)
        onnx=Onnx("SpaceToDepth", (("blocksize", "b"),), applies=lambda op: op.mode == "DCR")),
)}
