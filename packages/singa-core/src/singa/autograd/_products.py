"""Products, softmax and pooling over all cells: Matmul, AddBias, Gemm, SoftMax, LogSoftMax,
GlobalAveragePool and CosSim. Each class carries the declaration of its ``singa.autograd``
function (:mod:`._functions`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _math
from .._ctensor import CTensor
from ..errors import ShapeError
from ..ops._records import Onnx
from ..ops._signatures import Param
from ._engine import Operator, back_broadcast, is_training
from ._functions import Function, X, declares
from ._reductions import OPERATORS as _REDUCTIONS


def _swap_last(x: CTensor) -> CTensor:
    """x with its last two axes swapped (a strided view)."""
    d, s = x.dims, x.strides
    return x._view_as(d[:-2] + (d[-1], d[-2]), s[:-2] + (s[-1], s[-2]))


def _reshaped(x: CTensor, shape) -> CTensor:
    """x itself when it has ``shape`` already, else :func:`singa._math.reshape`."""
    return x if x.dims == shape else _math.reshape(x, shape)


def _softmax(x, axis=1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


_AXIS1 = Param("axis", "int", "The axis normalised.", 1)


@declares(Function(
    "matmul", "y = x @ w with numpy's matmul semantics, batched with broadcasting",
    (Param("x", "Tensor", "Shape (..., M, K); a floating dtype."),
     Param("w", "Tensor", "Shape (..., K, N), same dtype.")), ("x", "w"),
    "y, shape (..., M, N).", grad="dx = dy w^T, dw = x^T dy", numpy=lambda x, w: x @ w,
    example={"x": [[1.0, 2.0], [3.0, 4.0]], "w": [[1.0], [0.5]]},
    onnx=Onnx("MatMul")))
class Matmul(Operator):
    """y = a @ b (numpy semantics, batched with broadcasting); da = dy b^T, db = a^T dy."""

    def forward(self, a, b):
        """y = a @ b (numpy matmul, batched with broadcasting) of two CTensors."""
        if not a.dims or not b.dims:
            raise ShapeError(f"matmul: operands must have at least one axis, got {a.dims} and "
                             f"{b.dims} (numpy's rule; use mul for scalars)")
        a2 = a if len(a.dims) > 1 else _math.reshape(a, (1, a.dims[0]))
        b2 = b if len(b.dims) > 1 else _math.reshape(b, (b.dims[0], 1))
        y2 = _math.matmul(a2, b2)
        if is_training():
            self.a2, self.b2, self.shapes = a2, b2, (a.dims, b.dims)
        self.y2_shape = y2.dims
        if len(a.dims) == 1 or len(b.dims) == 1:
            shape = y2.dims
            if len(a.dims) == 1:
                shape = shape[:-2] + shape[-1:]
            if len(b.dims) == 1:
                shape = shape[:-1]
            return _math.reshape(y2, shape)
        return y2

    def backward(self, dy):
        """(da, db) = (dy b^T, a^T dy), each reduced to its input's shape."""
        if not hasattr(self, "a2"):
            self._need_cache()
        dy2 = _reshaped(dy, self.y2_shape)
        sa, sb = self.shapes
        da = db = None
        if self.needs_grad(0):
            da = _reshaped(back_broadcast(dy2.dims[:-2] + self.a2.dims[-2:], self.a2.dims,
                                          _math.matmul(dy2, _swap_last(self.b2))), sa)
        if self.needs_grad(1):
            db = _reshaped(back_broadcast(dy2.dims[:-2] + self.b2.dims[-2:], self.b2.dims,
                                          _math.matmul(_swap_last(self.a2), dy2)), sb)
        return da, db


@declares(Function(
    "add_bias", "y = x + b for a 2-D x; x is not modified",
    (Param("x", "Tensor", "Shape (M, N)."), Param("b", "Tensor", "Shape (N,) for axis 0, "
                                                  "(M,) for axis 1."),
     Param("axis", "int", "0 adds b to every row, 1 to every column.", 0)), ("x", "b"),
    "y, shape (M, N).", grad="dx = dy, db = dy summed over the other axis",
    numpy=lambda x, b, axis=0: x + (b[None, :] if axis == 0 else b[:, None]),
    example={"x": [[1.0, 2.0], [3.0, 4.0]], "b": [10.0, 20.0], "axis": 0}))
class AddBias(Operator):
    """y = x + b for 2-D x: axis 0 adds b (length cols) to every row, axis 1 to every column.

    Unlike SINGA, x is not modified in place.
    """

    def __init__(self, axis=0):
        super().__init__()
        self.axis = axis

    def forward(self, x, b):
        """y = x + b, b added to every row (axis 0) or column (axis 1) of the 2-D x."""
        if self.axis not in (0, 1):
            raise ShapeError(f"AddBias: axis must be 0 (add b to every row) or 1 (to every "
                             f"column), got {self.axis!r}")
        if len(x.dims) != 2:
            raise ShapeError(f"AddBias: x must be 2-D, got {x.dims}")
        n = x.dims[1] if self.axis == 0 else x.dims[0]
        if b.size != n:
            raise ShapeError(f"AddBias(axis={self.axis}): bias has {b.size} elements, "
                             f"expected {n} for x {x.dims}")
        self.b_shape = b.dims
        bb = _math.reshape(b, (1, n) if self.axis == 0 else (n, 1))
        return _math.add(x, bb)

    def backward(self, dy):
        """(dx, db) = (dy, dy summed over the other axis)."""
        db = _math.sum(dy, 0 if self.axis == 0 else 1)
        return dy, _reshaped(db, self.b_shape)


@declares(Function(
    "gemm", "y = alpha op(A) op(B) + beta C, op(M) = M^T when its flag is set (ONNX Gemm)",
    (Param("A", "Tensor", "Shape (M, K), or (K, M) with transA."),
     Param("B", "Tensor", "Shape (K, N), or (N, K) with transB."),
     Param("C", "Tensor", "Broadcasts to (M, N); omitted: no bias term.", None),
     Param("alpha", "float", "Scale of the product.", 1.0),
     Param("beta", "float", "Scale of C.", 1.0),
     Param("transA", "int", "1 transposes A first.", 0),
     Param("transB", "int", "1 transposes B first.", 0)), ("A", "B", "C"),
    "y, shape (M, N).", grad="dA = alpha dy op(B)^T, dB = alpha op(A)^T dy (transposed back "
    "where flagged), dC = beta dy summed to C's shape",
    numpy=lambda A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0: alpha * (  # noqa: N803
        (A.T if transA else A) @ (B.T if transB else B)) + (0 if C is None else beta * C),
    example={"A": [[1.0, 2.0]], "B": [[3.0], [4.0]], "C": [1.0], "beta": 2.0},
    onnx=Onnx("Gemm", (("alpha", "alpha"), ("beta", "beta"), ("transA", "transA"),
                        ("transB", "transB")))))
class Gemm(Operator):
    """y = alpha op(A) op(B) + beta C (ONNX Gemm; C optional and broadcast)."""

    def __init__(self, alpha=1.0, beta=1.0, transA=0, transB=0):
        super().__init__()
        self.alpha, self.beta = float(alpha), float(beta)
        self.transA, self.transB = bool(transA), bool(transB)

    def forward(self, A, B, C=None):
        """y = alpha op(A) op(B) + beta C of the CTensors (C optional); y (M, N)."""
        a = _math.transpose(A) if self.transA else A
        b = _math.transpose(B) if self.transB else B
        y = _math.matmul(a, b)
        if self.alpha != 1.0:
            y = _math.mul(y, self.alpha)
        self.c_shape = None
        if C is not None:
            self.c_shape = C.dims
            y = _math.add(y, _math.mul(C, self.beta) if self.beta != 1.0 else C)
        if is_training():
            self.a, self.b = a, b
        return y

    def backward(self, dy):
        """(dA, dB) or (dA, dB, dC): dA, dB of alpha dy op(B)^T and alpha op(A)^T dy transposed
        back as needed, dC = beta dy summed to C's shape.
        """
        if not hasattr(self, "a"):
            self._need_cache()
        g = _math.mul(dy, self.alpha) if self.alpha != 1.0 else dy
        da = _math.matmul(g, _math.transpose(self.b))
        db = _math.matmul(_math.transpose(self.a), g)
        dA = _math.contiguous(_math.transpose(da)) if self.transA else da
        dB = _math.contiguous(_math.transpose(db)) if self.transB else db
        if self.c_shape is None:
            return dA, dB
        dC = back_broadcast(dy.dims, self.c_shape, _math.mul(dy, self.beta)
                            if self.beta != 1.0 else dy)
        return dA, dB, dC


class _SoftmaxFamily(Operator):
    """Ops along ``axis`` whose backward needs only their output y."""

    fn: Any = None  # the op along the axis, a staticmethod set by each subclass

    def __init__(self, axis=1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        y = type(self).fn(x, self.axis)
        if is_training():
            self.y = y
        return y

    def _output(self):
        if not hasattr(self, "y"):
            self._need_cache("output")
        return self.y


@declares(Function(
    "softmax", "y = exp(x) / sum(exp(x)) along ``axis``", (X, _AXIS1), ("x",),
    "y, of x's shape and dtype.", grad="dx = y (dy - sum(dy y)) along ``axis``",
    numpy=_softmax, example={"x": [[1.0, 2.0, 3.0]]},
    onnx=Onnx("Softmax", (("axis", "axis"),))))
class SoftMax(_SoftmaxFamily):
    """y = softmax(x) along ``axis``; dx = y (dy - sum(dy y))."""

    fn = staticmethod(_math.softmax)

    def backward(self, dy):
        """dx = y (dy - sum(dy y)) along ``axis``, y the forward output."""
        return _math.softmax_backward(self._output(), dy, self.axis)


@declares(Function(
    "log_softmax", "y = x - log(sum(exp(x))) along ``axis``", (X, _AXIS1), ("x",),
    "y, of x's shape and dtype.", grad="dx = dy - exp(y) sum(dy) along ``axis``",
    numpy=lambda x, axis=1: np.log(_softmax(x, axis)), example={"x": [[1.0, 2.0, 3.0]]},
    onnx=Onnx("LogSoftmax", (("axis", "axis"),))))
class LogSoftMax(_SoftmaxFamily):
    """y = log softmax(x) along ``axis``; dx = dy - exp(y) sum(dy)."""

    fn = staticmethod(_math.log_softmax)

    def backward(self, dy):
        """dx = dy - exp(y) sum(dy) along ``axis``, y the forward output."""
        s = _math.sum(dy, self.axis, keepdims=True)
        return _math.sub(dy, _math.mul(_math.exp(self._output()), s))


# ---------------------------------------------------------------- pooling over all cells


@declares(Function(
    "globalaveragepool", "Mean over the spatial axes, kept as size 1",
    (Param("x", "Tensor", "Shape (N, C, *spatial) (channels_first) or (N, *spatial, C) "
           "(channels_last)."),
     Param("data_format", "str", "Where the channel axis is.", "channels_first")), ("x",),
    "y, x's shape with every spatial axis 1.",
    grad="dx = dy / (number of spatial cells), broadcast back to x's shape",
    numpy=lambda x, data_format="channels_first": x.mean(
        tuple(range(2, x.ndim)) if data_format == "channels_first" else
        tuple(range(1, x.ndim - 1)), keepdims=True),
    example={"x": [[[[1.0, 2.0], [3.0, 4.0]]]]},
    # ONNX's GlobalAveragePool takes the channels first: a channels_last one has no ONNX form
    onnx=Onnx("GlobalAveragePool",
              applies=lambda op: op.data_format == "channels_first")))
class GlobalAveragePool(Operator):
    """Mean over the spatial axes, keeping them as size 1."""

    def __init__(self, data_format="channels_first"):
        super().__init__()
        self.data_format = data_format

    def forward(self, x):
        """y = the mean of x over its spatial axes, kept as size 1."""
        nd = len(x.dims)
        axes = tuple(range(2, nd)) if self.data_format == "channels_first" else \
            tuple(range(1, nd - 1))
        self.inner = _REDUCTIONS["ReduceMean"](axes, 1)
        return self.inner.forward(x)

    def backward(self, dy):
        """dx = dy / (number of spatial cells), broadcast back to x's shape."""
        return self.inner.backward(dy)


@declares(Function(
    "cossim", "Row-wise cosine similarity: y_i = a_i . b_i / (|a_i| |b_i|)",
    (Param("a", "Tensor", "Shape (N, D), a floating dtype."),
     Param("b", "Tensor", "Shape (N, D), a's dtype.")), ("a", "b"), "y, shape (N,).",
    grad="da_i = dy_i (b_i / (|a_i| |b_i|) - y_i a_i / |a_i|^2), db symmetrically",
    numpy=lambda a, b: (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)),
    example={"a": [[1.0, 0.0], [1.0, 1.0]], "b": [[1.0, 1.0], [2.0, 2.0]]}))
class CosSim(Operator):
    """Row-wise cosine similarity of 2-D a and b: y_i = a_i.b_i / (|a_i| |b_i|)."""

    def forward(self, a, b):
        """y_i = a_i . b_i / (|a_i| |b_i|) for the rows of the (N, D) a and b; y (N,)."""
        if len(a.dims) != 2 or a.dims != b.dims:
            raise ShapeError(f"CosSim: a and b must be equal 2-D shapes, got {a.dims}, {b.dims}")
        dot = _math.sum(_math.mul(a, b), 1)
        na = _math.sqrt(_math.sum(_math.square(a), 1))
        nb = _math.sqrt(_math.sum(_math.square(b), 1))
        y = _math.div(dot, _math.mul(na, nb))
        if is_training():
            self.cache = (a, b, na, nb, y)
        return y

    def backward(self, dy):
        """(da, db): da_i = dy_i (b_i / (|a_i| |b_i|) - y_i a_i / |a_i|^2), db symmetrically."""
        if not hasattr(self, "cache"):
            self._need_cache()
        a, b, na, nb, y = self.cache
        n = a.dims[0]

        def col(v):
            return _math.reshape(v, (n, 1))

        inv = col(_math.reciprocal(_math.mul(na, nb)))
        da = _math.sub(_math.mul(b, inv), _math.mul(a, col(_math.div(y, _math.square(na)))))
        db = _math.sub(_math.mul(a, inv), _math.mul(b, col(_math.div(y, _math.square(nb)))))
        g = col(dy)
        return _math.mul(da, g), _math.mul(db, g)
