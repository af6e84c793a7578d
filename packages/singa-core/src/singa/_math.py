"""Functional math on CTensors: the layer every higher API (Tensor, singa_wrap, autograd) uses.

Each function validates its arguments, builds views when no data has to move (reshape of a
contiguous tensor, transpose, broadcast, slicing) and otherwise dispatches one op of the table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Number
from typing import TYPE_CHECKING, Protocol, overload

import numpy as np

from . import _dtype
from ._ctensor import CTensor, contiguous_strides
from ._shapes import as_int, check_shape
from .errors import DtypeMismatchError, ShapeError
from .ops import EMPTY, OPS, run
from .ops._elementwise import BINARY, UNARY
from .ops._reductions import REDUCTIONS
from .ops._rules import broadcast_shapes, check_axis, normalize_axes


def _one(name, ins, attrs=EMPTY):
    return run(OPS[name], ins, attrs)[0]


# ---------------------------------------------------------------- elementwise
def _unary(decl):
    op = OPS[decl.op]

    f: Callable[..., CTensor]
    if decl.attrs:
        defaults = decl.defaults

        def with_attrs(x: CTensor, out: CTensor | None = None, **attrs) -> CTensor:
            if attrs.keys() - defaults.keys():
                raise TypeError(f"{decl.name}: unknown attributes "
                                f"{sorted(attrs.keys() - defaults.keys())}; it takes "
                                f"{sorted(defaults)}")
            values = {name: float(attrs.get(name, d)) for name, d in defaults.items()}
            return run(op, [x], values, None if out is None else [out])[0]

        f = with_attrs
    else:
        def plain(x: CTensor, out: CTensor | None = None) -> CTensor:
            return run(op, [x], EMPTY, None if out is None else [out])[0]

        f = plain

    f.__name__ = f.__qualname__ = decl.name
    f.__doc__ = decl.doc("math")
    return f


def _scalar_value(x: CTensor, value):
    if x.dtype_code == _dtype.kInt:
        return value
    return float(value)


def _promote_pair(op_name: str, a: CTensor, b: CTensor, out: CTensor | None):
    """``a`` and ``b`` in their common dtype (:data:`singa._dtype.PROMOTE`), or in ``out``'s
    when the result is written there and numpy would allow it (a ``same_kind`` cast: a float
    result into an int tensor is refused). The conversion is an AsType op, so it runs on
    every backend and is recorded in graphs like any other op."""
    dt = _dtype.PROMOTE[a.dtype_code, b.dtype_code]
    if out is not None and out.dtype_code != dt:
        if not np.can_cast(_dtype.NP_DTYPE[dt], _dtype.NP_DTYPE[out.dtype_code], "same_kind"):
            raise DtypeMismatchError(
                f"{op_name}: the result of {_dtype.name_of(a.dtype_code)} and "
                f"{_dtype.name_of(b.dtype_code)} "
                f"operands is {_dtype.name_of(dt)}, which cannot be written into a "
                f"{_dtype.name_of(out.dtype_code)} tensor in place (numpy and PyTorch refuse it "
                "too); "
                "write to a new tensor (x = x + y) or convert first with y.as_type(x.dtype)")
        dt = out.dtype_code
    return ((a if a.dtype_code == dt else as_type(a, dt)),
            (b if b.dtype_code == dt else as_type(b, dt)))


def _promote_scalar(a: CTensor, value, out: CTensor | None) -> CTensor:
    """``a`` as an op with a Python or numpy scalar computes on it: the tensor's dtype (a
    scalar does not widen a tensor, as in numpy 2 and PyTorch), except that a float scalar
    with an int tensor gives float32 (PyTorch's default float dtype; SINGA's rule too)."""
    if (out is None and a.dtype_code not in _dtype.FLOATS
            and isinstance(value, (float, np.floating))):
        return as_type(a, _dtype.kFloat32)
    return a


def _binary(decl):
    op_name = decl.op
    op = OPS[op_name]
    sop = OPS[decl.scalar] if decl.scalar else None

    def f(a: CTensor, b, out: CTensor | None = None) -> CTensor:
        outs = None if out is None else [out]
        if isinstance(b, CTensor):
            if a.dtype_code != b.dtype_code:
                a, b = _promote_pair(op_name, a, b, out)
            return run(op, [a, b], EMPTY, outs)[0]
        if isinstance(b, (Number, np.number)):
            a = _promote_scalar(a, b, out)
            if sop is None:  # no scalar kernel: broadcast a one-element tensor
                return run(op, [a, set_value(CTensor._new((), a.dev, a.dtype_code), b)], EMPTY,
                           outs)[0]
            return run(sop, [a], {"value": _scalar_value(a, b)}, outs)[0]
        raise TypeError(f"{op_name}: the second operand must be a tensor or a number, "
                        f"got {type(b).__name__}")

    f.__name__ = f.__qualname__ = decl.name
    f.__doc__ = decl.doc("math")
    return f


# abs, neg, ..., sigmoid, tanh, logical_not; add, sub, mul, div, pow, lt, ..., logical_xor:
# one function per record of the elementwise tables, named by the record
_ELEMENTWISE = {**{decl.name: _unary(decl) for decl in UNARY.values()},
                **{decl.name: _binary(decl) for decl in BINARY.values()}}
globals().update(_ELEMENTWISE)

if TYPE_CHECKING:
    # The functions of the records (abs ... logical_xor above, sum ... reduce_min below) for
    # type checkers, which cannot follow the globals() updates: any other attribute of this
    # module is one of them, so a new record needs no declaration here (PEP 562's module
    # __getattr__, type-only). The first form is an elementwise record's, the second a
    # reduction's.
    class _RecordFunction(Protocol):
        @overload
        def __call__(self, x: CTensor, b: CTensor | float | None = None,
                     out: CTensor | None = None) -> CTensor: ...

        @overload
        def __call__(self, x: CTensor, axes: int | Sequence[int] | None = None,
                     keepdims: bool = False) -> CTensor: ...

    def __getattr__(name: str) -> _RecordFunction: ...


def rsub(a: CTensor, value) -> CTensor:
    """value - a."""
    a = _promote_scalar(a, value, None)
    return _one("RSubScalar", [a], {"value": _scalar_value(a, value)})


def _as_float(a: CTensor) -> CTensor:
    return a if a.dtype_code in _dtype.FLOATS else as_type(a, _dtype.kFloat32)


def rdiv(a: CTensor, value) -> CTensor:
    """value / a (true division: an int tensor is divided in float32)."""
    return _one("RDivScalar", [_as_float(a)], {"value": float(value)})


def rpow(a: CTensor, value) -> CTensor:
    """value ** a (an int exponent tensor is taken as float32)."""
    return _one("RPowScalar", [_as_float(a)], {"value": float(value)})


def _inplace(f):
    def g(x: CTensor, y) -> CTensor:
        if isinstance(y, CTensor) and broadcast_shapes(f.__name__, x.dims, y.dims) != x.dims:
            raise ShapeError(f"in-place {f.__name__}: {y.dims} does not broadcast to {x.dims}")
        return f(x, y, out=x)

    return g


iadd = _inplace(_ELEMENTWISE["add"])
isub = _inplace(_ELEMENTWISE["sub"])
imul = _inplace(_ELEMENTWISE["mul"])
idiv = _inplace(_ELEMENTWISE["div"])


def relu_backward(dy: CTensor, x: CTensor) -> CTensor:
    """dy * (x > 0)."""
    return _one("ReLUBackward", [dy, x])


def hardsigmoid_backward(dy: CTensor, x: CTensor, alpha: float, gamma: float) -> CTensor:
    """alpha dy where 0 < alpha x + gamma < 1, else 0."""
    return _one("HardSigmoidBackward", [dy, x], {"alpha": float(alpha), "gamma": float(gamma)})


def hardswish_backward(dy: CTensor, x: CTensor) -> CTensor:
    """dy (2 x + 3) / 6 for -3 < x < 3, dy for x >= 3, else 0."""
    return _one("HardSwishBackward", [dy, x])


def clip(x: CTensor, min=None, max=None) -> CTensor:  # noqa: A002
    """y = min(max(x, min), max) elementwise; a bound of None leaves that side open."""
    return _one("Clip", [x], {"min": None if min is None else float(min),
                              "max": None if max is None else float(max)})


# ---------------------------------------------------------------- fills and random
def set_value(x: CTensor, value) -> CTensor:
    """Fill x in place with ``value`` (converted to x's dtype); returns x."""
    run(OPS["SetValue"], [],
        {"shape": x.dims, "dtype": x.dtype_code, "value": _scalar_value(x, value)}, [x])
    return x


def gaussian(x: CTensor, mean: float, std: float) -> CTensor:
    """Fill x in place with normal samples N(mean, std^2); returns x."""
    run(OPS["Gaussian"], [], {"shape": x.dims, "dtype": x.dtype_code, "mean": float(mean),
                             "std": float(std)}, [x])
    return x


def uniform(x: CTensor, low: float, high: float) -> CTensor:
    """Fill x in place with uniform samples on [low, high); returns x."""
    run(OPS["Uniform"], [], {"shape": x.dims, "dtype": x.dtype_code, "low": float(low),
                            "high": float(high)}, [x])
    return x


def bernoulli(x: CTensor, p: float) -> CTensor:
    """Fill x in place with Bernoulli(p) samples (1 with probability p, else 0); returns x.

    Raises
    ------
    ValueError
        p is outside [0, 1].
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"bernoulli: probability must be in [0, 1], got {p}")
    run(OPS["Bernoulli"], [], {"shape": x.dims, "dtype": x.dtype_code, "p": float(p)}, [x])
    return x


# ---------------------------------------------------------------- copies and casts
def copy(x: CTensor) -> CTensor:
    """A new contiguous tensor with x's values."""
    return _one("Copy", [x])


def copy_into(dst: CTensor, src: CTensor) -> CTensor:
    """Write src's values into dst (same element count; src is reshaped to dst's shape)."""
    if src.dev is not dst.dev:
        src = to_device(src, dst.dev)
    if src.dtype_code != dst.dtype_code:
        src = as_type(src, dst.dtype_code)
    if src.dims != dst.dims:
        src = reshape(src, dst.dims)
    run(OPS["Copy"], [src], EMPTY, [dst])
    return dst


def contiguous(x: CTensor) -> CTensor:
    """x itself when row-major contiguous, otherwise a contiguous copy."""
    return x if x.contig else copy(x)


def as_type(x: CTensor, dtype: int) -> CTensor:
    """A copy of x converted to ``dtype`` (a SINGA dtype code or a name it accepts)."""
    dtype = _dtype.code_of(dtype)
    return _one("AsType", [x], {"dtype": dtype})


def to_device(x: CTensor, dev) -> CTensor:
    """A copy of x on ``dev`` (staged through host memory)."""
    if x.dev is dev:
        return copy(x)
    out = CTensor._new(x.dims, dev, x.dtype_code)
    out.copy_from_numpy(x.to_numpy())
    return out


# ---------------------------------------------------------------- views
def reshape(x: CTensor, shape) -> CTensor:
    """A tensor of ``shape`` with x's elements (a view when x is contiguous).

    One dimension may be -1 (inferred); 0 is a literal zero-size dimension. Dimensions are
    integers (:func:`singa._shapes.check_shape`: a bool, a float or any other negative value is
    a ShapeError).
    """
    try:
        shape = check_shape(shape, "reshape", infer=True, size=x.size)
    except ShapeError as exc:
        raise ShapeError(f"{exc} (reshaping a tensor of shape {x.dims}, {x.size} "
                         "elements)") from None
    if not x.contig:
        x = copy(x)
    return x._view_as(shape, contiguous_strides(shape))


def transpose(x: CTensor, axes=None) -> CTensor:
    """A strided view with permuted axes (reversed when ``axes`` is None)."""
    nd = len(x.dims)
    if axes is None:
        axes = tuple(range(nd - 1, -1, -1))
    axes = tuple(as_int(a, "transpose: axis") for a in axes)
    if any(not -nd <= a < nd for a in axes):
        raise ShapeError(f"transpose: axes {axes} name an axis outside [-{nd}, {nd}) of the "
                         f"{nd}-D tensor of shape {x.dims}")
    axes = tuple(a % nd for a in axes)
    if sorted(axes) != list(range(nd)):
        raise ShapeError(f"transpose: {axes} is not a permutation of the {nd} axes of {x.dims}")
    return x._view_as(tuple(x.dims[a] for a in axes), tuple(x.strides[a] for a in axes))


def broadcast_to(x: CTensor, shape) -> CTensor:
    """A zero-stride view of x broadcast to ``shape``."""
    shape = tuple(shape)
    if broadcast_shapes("broadcast_to", x.dims, shape) != shape:
        raise ShapeError(f"broadcast_to: {x.dims} cannot be broadcast to {shape}")
    pad = len(shape) - len(x.dims)
    strides = []
    for i, d in enumerate(shape):
        j = i - pad
        if j < 0 or x.dims[j] == 1 and d != 1:
            strides.append(0)
        else:
            strides.append(x.strides[j])
    return x._view_as(shape, tuple(strides))


def slice_view(x: CTensor, starts, stops, steps=None, axes=None) -> CTensor:
    """A strided view of x[start:stop:step] on the given axes (numpy slice semantics)."""
    nd = len(x.dims)
    axes = list(range(len(starts))) if axes is None else [check_axis("slice", a, nd)
                                                          for a in axes]
    steps = [1] * len(axes) if steps is None else list(steps)
    shape, strides, off = list(x.dims), list(x.strides), x.offset
    for ax, st, sp, step in zip(axes, starts, stops, steps):
        step = as_int(step, "slice: step")
        if step == 0:
            raise ShapeError("slice: step cannot be zero")
        start, stop, step = slice(as_int(st, "slice: start"), as_int(sp, "slice: stop"),
                                  step).indices(x.dims[ax])
        n = len(range(start, stop, step))
        off += start * x.strides[ax] if n else 0
        shape[ax] = n
        strides[ax] = x.strides[ax] * step
    return x._view_as(tuple(shape), tuple(strides), off)


def slice_on(x: CTensor, start: int, end: int, axis: int) -> CTensor:
    """SINGA's SliceOn: a copy of x[start:end] along ``axis``."""
    return copy(slice_view(x, [start], [end], None, [axis]))


def squeeze_view(x: CTensor, axes) -> CTensor:
    """A view of x without the size-1 axes ``axes`` (no copy).

    Raises
    ------
    ShapeError
        One of the axes does not have size 1.
    """
    axes = normalize_axes("squeeze", axes, len(x.dims))
    for a in axes:
        if x.dims[a] != 1:
            raise ShapeError(f"squeeze: axis {a} of {x.dims} has size {x.dims[a]}, not 1")
    keep = [i for i in range(len(x.dims)) if i not in axes]
    return x._view_as(tuple(x.dims[i] for i in keep), tuple(x.strides[i] for i in keep))


# ---------------------------------------------------------------- data movement ops
def concat(xs, axis: int) -> CTensor:
    """Join xs (equal shapes but along ``axis``, one dtype) along ``axis``.

    Raises
    ------
    ShapeError
        xs is empty.
    """
    xs = list(xs)
    if not xs:
        raise ShapeError("concat: needs at least one tensor")
    return _one("Concat", xs, {"axis": check_axis("Concat", axis, len(xs[0].dims))})


def repeat(x: CTensor, repeats, axis=None) -> CTensor:
    """numpy.repeat; ``axis=None`` repeats the flattened tensor."""
    if not isinstance(repeats, (list, tuple, range, np.ndarray)):
        repeats = (repeats,)
    repeats = tuple(as_int(r, "repeat: repeat count") for r in repeats)
    if any(r < 0 for r in repeats):
        raise ShapeError(f"repeat: repeat counts must be >= 0, got {repeats}")
    if axis is None:
        x = reshape(x, (x.size,))
        axis = 0
    return _one("Repeat", [x], {"repeats": repeats, "axis": check_axis("Repeat", axis,
                                                                       len(x.dims))})


def take(x: CTensor, idx: CTensor, axis: int = 0) -> CTensor:
    """numpy.take(x, idx, axis): y has x's shape with ``axis`` replaced by idx's shape."""
    return _one("Take", [x, idx], {"axis": check_axis("Take", axis, len(x.dims))})


# ---------------------------------------------------------------- reductions
def _reduction(decl):
    op_name = decl.op
    op = OPS[op_name]

    def f(x: CTensor, axes=None, keepdims: bool = False) -> CTensor:
        if axes is not None:
            axes = normalize_axes(op_name, axes, len(x.dims))
        return run(op, [x], {"axes": axes, "keepdims": bool(keepdims)})[0]

    f.__name__ = f.__qualname__ = decl.name
    f.__doc__ = decl.doc("math")
    return f


# sum, reduce_mean, reduce_max, reduce_min: one function per record of the reduction table
globals().update({decl.name: _reduction(decl) for decl in REDUCTIONS.values()})


def argmax(x: CTensor, axis: int = -1, keepdims: bool = False) -> CTensor:
    """Index of the first maximum along ``axis``, int32; keepdims keeps that axis as size 1."""
    return _one("ArgMax", [x], {"axis": check_axis("ArgMax", axis, len(x.dims)),
                                "keepdims": bool(keepdims)})


def _scalar(x: CTensor) -> float:
    return float(x.to_numpy().reshape(-1)[0])


def l1(x: CTensor) -> float:
    """SINGA's l1(): the mean absolute value (sum |x| / size)."""
    return _scalar(_one("Asum", [x])) / max(x.size, 1)


def l2(x: CTensor) -> float:
    """SINGA's l2(): the Euclidean norm divided by the size."""
    return _scalar(_one("Nrm2", [x])) / max(x.size, 1)


def asum(x: CTensor) -> CTensor:
    """sum(|x|) over all elements, as a 0-d tensor of x's dtype."""
    return _one("Asum", [x])


def nrm2(x: CTensor) -> CTensor:
    """The Euclidean norm sqrt(sum(x^2)), as a 0-d tensor of x's dtype."""
    return _one("Nrm2", [x])


def softmax(x: CTensor, axis: int = -1) -> CTensor:
    """y = exp(x) / sum(exp(x)) along ``axis``; x's shape and dtype."""
    return _one("Softmax", [x], {"axis": axis})


def log_softmax(x: CTensor, axis: int = -1) -> CTensor:
    """y = x - log(sum(exp(x))) along ``axis``; x's shape and dtype."""
    return _one("LogSoftmax", [x], {"axis": axis})


def softmax_backward(y: CTensor, dy: CTensor, axis: int = -1) -> CTensor:
    """dx = y (dy - sum(dy y)) along ``axis``, from softmax's output y."""
    return _one("SoftmaxBackward", [y, dy], {"axis": axis})


# ---------------------------------------------------------------- products
def matmul(a: CTensor, b: CTensor, out: CTensor | None = None) -> CTensor:
    """numpy matmul: GEMV for 1-D, GEMM for 2-D, batched GEMM (broadcast) above."""
    return run(OPS["Matmul"], [a, b], EMPTY, None if out is None else [out])[0]


def gemm(a: CTensor, b: CTensor, c: CTensor, alpha=1.0, beta=0.0, trans_a=False,
         trans_b=False, out: CTensor | None = None) -> CTensor:
    """alpha * op(a) @ op(b) + beta * c (``out=c`` updates c in place)."""
    attrs = {"alpha": float(alpha), "beta": float(beta), "transA": bool(trans_a),
             "transB": bool(trans_b)}
    return run(OPS["GEMM"], [a, b, c], attrs, None if out is None else [out])[0]


def axpy(alpha, x: CTensor, y: CTensor) -> CTensor:
    """y += alpha * x in place; alpha is a number or a one-element tensor on y's device."""
    if not isinstance(alpha, CTensor):
        a = CTensor._new((1,), y.dev, y.dtype_code)
        set_value(a, float(alpha))
        alpha = a
    return run(OPS["Axpy"], [alpha, x, y], EMPTY, [y])[0]


# ---------------------------------------------------------------- rows and columns
def as_column(v: CTensor, m: CTensor) -> CTensor:
    """``v`` as an (rows, 1) column of matrix ``m`` (for broadcasting over its columns)."""
    if v.size != m.dims[0]:
        raise ShapeError(f"column vector of {v.size} elements for a matrix {m.dims}")
    return reshape(v, (m.dims[0], 1))


def as_row(v: CTensor, m: CTensor) -> CTensor:
    """``v`` as a (1, cols) row of matrix ``m``."""
    if v.size != m.dims[-1]:
        raise ShapeError(f"row vector of {v.size} elements for a matrix {m.dims}")
    return reshape(v, (1, m.dims[-1]))


def scale_add(m: CTensor, v: CTensor, alpha: float, beta: float) -> CTensor:
    """m = alpha * v + beta * m in place (v broadcast to m)."""
    imul(m, float(beta))
    iadd(m, _ELEMENTWISE["mul"](v, float(alpha)))
    return m
