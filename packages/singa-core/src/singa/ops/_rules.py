"""Shared shape/dtype rules for op declarations."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .. import _dtype
from .._ctensor import CTensor
from .._shapes import as_int
from ..errors import DtypeMismatchError, ShapeError

#: What a rule returns: ``(shape, dtype code)`` of each output, in order.
OutputSpecs = list[tuple[tuple[int, ...], int]]
#: A shape/dtype rule (``OpDef.infer``): ``rule(ins, attrs)``.
ShapeRule = Callable[[Sequence[CTensor], Mapping[str, Any]], OutputSpecs]


def same(ins, attrs):
    """Output has the first input's shape and dtype."""
    x = ins[0]
    return [(x.dims, x.dtype_code)]


def same_float(name: str):
    """``same`` for ops defined on floating-point inputs only (exp, tanh, sqrt, ...): an
    integer input is a DtypeMismatchError naming the op, not a backend's casting error."""

    def rule(ins, attrs):
        x = ins[0]
        if x.dtype_code not in _dtype.FLOATS:
            raise DtypeMismatchError(
                f"{name}: input is {_dtype.name_of(x.dtype_code)}, but {name} is defined on "
                "float32, "
                "float16 and float64; convert first with x.as_type(tensor.float32)"
            )
        return [(x.dims, x.dtype_code)]

    return rule


def broadcast_shapes(op: str, a: tuple, b: tuple) -> tuple:
    """numpy broadcasting of two shapes, or a ShapeError naming both."""
    if a == b:
        return a
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + a
    pb = (1,) * (n - len(b)) + b
    out = []
    for da, db in zip(pa, pb):
        if da == db or db == 1:
            out.append(da)
        elif da == 1:
            out.append(db)
        else:
            raise ShapeError(
                f"{op}: shapes {a} and {b} do not broadcast (dimension {da} vs {db}); "
                "reshape one operand so that trailing dimensions match or are 1"
            )
    return tuple(out)


def check_dtypes(op: str, ins: Sequence[CTensor]) -> int:
    """The dtype code that all of ``ins`` share.

    Parameters
    ----------
    op : str
        The op's name, for the message.
    ins : sequence of CTensor
        The inputs (at least one).

    Returns
    -------
    int
        The first input's dtype code.

    Raises
    ------
    DtypeMismatchError
        An input whose dtype differs from the first's, naming both.
    """
    dt = ins[0].dtype_code
    for i, x in enumerate(ins[1:], 1):
        if x.dtype_code != dt:
            raise DtypeMismatchError(
                f"{op}: input 0 is {_dtype.name_of(dt)} but input {i} is "
                f"{_dtype.name_of(x.dtype_code)}; convert one first, e.g. x.as_type(tensor.float32)"
            )
    return dt


def binary(name: str) -> ShapeRule:
    """The rule of binary elementwise op ``name``.

    Parameters
    ----------
    name : str
        The op's name, for messages.

    Returns
    -------
    callable
        ``rule(ins, attrs)``: one output of the two inputs' broadcast shape
        (:func:`broadcast_shapes`) and their common dtype (:func:`check_dtypes`).
    """

    def infer(ins: Sequence[CTensor], attrs: Mapping[str, Any]) -> OutputSpecs:
        dt = check_dtypes(name, ins)
        return [(broadcast_shapes(name, ins[0].dims, ins[1].dims), dt)]

    return infer


def normalize_axes(op: str, axes, ndim: int) -> tuple:
    """Axes as a sorted tuple of non-negative ints (None: all axes). A 0-d tensor accepts
    axis 0 (or -1) and has no axis to name: its axes are () (a reduction over them is the
    value itself). An axis named twice is a ShapeError, as in numpy."""
    if axes is None:
        return tuple(range(ndim))
    if not isinstance(axes, (list, tuple, range)):
        axes = (axes,)
    out = []
    for a in axes:
        a = as_int(a, f"{op}: axis")
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise ShapeError(f"{op}: axis {a} is out of range for a {ndim}-D tensor")
        if ndim:
            out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}: axes {tuple(axes)} name an axis twice (of a {ndim}-D tensor)")
    return tuple(sorted(out))


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...],
                  keepdims: bool) -> tuple[int, ...]:
    """The shape left by reducing ``shape`` over ``axes``.

    Parameters
    ----------
    shape : tuple of int
        The input's shape.
    axes : tuple of int
        The reduced axes, non-negative (as :func:`normalize_axes` returns them).
    keepdims : bool
        Keep each reduced axis with size 1 (True) or drop it (False).

    Returns
    -------
    tuple of int
        The output's shape.
    """
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def reduce_rule(name: str, out_dtype: int | None = None) -> ShapeRule:
    """The rule of reduction ``name`` (Sum, ReduceMean, ...).

    Parameters
    ----------
    name : str
        The op's name, for messages.
    out_dtype : int, optional
        The output's dtype code; None: the input's.

    Returns
    -------
    callable
        ``rule(ins, attrs)``: one output, the input's shape reduced over ``attrs["axes"]``
        (None: every axis) with ``attrs["keepdims"]`` (default False), see
        :func:`reduced_shape`.
    """

    def infer(ins: Sequence[CTensor], attrs: Mapping[str, Any]) -> OutputSpecs:
        x = ins[0]
        axes = normalize_axes(name, attrs.get("axes"), len(x.dims))
        shape = reduced_shape(x.dims, axes, attrs.get("keepdims", False))
        return [(shape, x.dtype_code if out_dtype is None else out_dtype)]

    return infer


def check_axis(op: str, axis: int, ndim: int) -> int:
    """``axis`` in ``[0, ndim)``: an integer in ``[-ndim, ndim)``, else a ShapeError."""
    axis = as_int(axis, f"{op}: axis")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for a {ndim}-D tensor")
    return axis % ndim


def from_attrs(ins, attrs):
    """Rule for ops without inputs (fills): shape and dtype come from attrs."""
    return [(tuple(attrs["shape"]), attrs.get("dtype", _dtype.kFloat32))]
