"""Compatibility module for code written against SINGA's native (SWIG) layer.

``from singa import singa_wrap as singa`` gives the CTensor class (``singa.Tensor``), the build
flags (``USE_CUDA`` ... true exactly when that backend is installed and usable here) and the
CTensor functions user code calls (``singa.Gaussian``, ``singa.Mult``, ``singa.ReLU`` ...), all
backed by the op table, so they run on every backend.
"""

from __future__ import annotations

import numpy as np

from . import _dtype, _math
from ._ctensor import CTensor
from ._handles import (  # noqa: F401  (SINGA's native module exports the handles)
    BatchNormHandle,
    ConvHandle,
    CudnnBatchNormHandle,
    CudnnConvHandle,
    CudnnPoolingHandle,
    PoolingHandle,
)

Tensor = CTensor
kFloat32, kFloat16, kInt, kChar, kDouble, kUChar = (
    _dtype.kFloat32, _dtype.kFloat16, _dtype.kInt, _dtype.kChar, _dtype.kDouble, _dtype.kUChar)
SINGA_MAJOR_VERSION, SINGA_MINOR_VERSION, SINGA_PATCH_VERSION = 5, 1, 0
SINGA_VERSION = 5100
CUDNN_VERSION = 0
USE_PYTHON = 1
USE_JAVA = 0

_FLAG_BACKENDS = {"USE_CUDA": "cuda", "USE_CUDNN": "cuda", "USE_OPENCL": "opencl"}


def _backend_usable(name: str) -> int:
    from ._plugins import registry

    try:
        registry().backend(name)
        return 1
    except Exception:
        return 0


def _communicator_usable() -> int:
    from ._plugins import registry

    reg = registry()
    for name in reg.communicators:
        try:
            reg.communicator(name)
            return 1
        except Exception:
            pass
    return 0


def __getattr__(name: str):
    if name in _FLAG_BACKENDS:
        return _backend_usable(_FLAG_BACKENDS[name])
    if name == "USE_DIST":
        return _communicator_usable()
    if name == "USE_DNNL":
        return 0  # the CPU backend uses numpy/numba, not oneDNN
    raise AttributeError(f"module 'singa.singa_wrap' has no attribute {name!r}")


def InitLogging(arg: str = "") -> None:
    """No-op (SINGA initialises glog here)."""


def VecTensor(tensors=()):
    """SWIG's std::vector<Tensor>: a list."""
    return list(tensors)


def SizeOf(dtype) -> int:
    """Bytes of one element of ``dtype`` (a SINGA dtype code, numpy dtype or name)."""
    return _dtype.ITEMSIZE[_dtype.code_of(dtype)]


def Product(shape) -> int:
    """Number of elements of a tensor of ``shape``: the product of its dimensions (1 for ``()``)."""
    p = 1
    for d in shape:
        p *= d
    return p


# ---------------------------------------------------------------- elementwise
Abs, Ceil, Floor, Round, RoundE = _math.abs, _math.ceil, _math.floor, _math.round, _math.rounde
Exp, Erf, Log = _math.exp, _math.erf, _math.log
ReLU, Sigmoid, Sign = _math.relu, _math.sigmoid, _math.sign
Sqrt, Square, Tanh = _math.sqrt, _math.square, _math.tanh
Cos, Cosh, Acos, Acosh = _math.cos, _math.cosh, _math.acos, _math.acosh
Sin, Sinh, Asin, Asinh = _math.sin, _math.sinh, _math.asin, _math.asinh
Tan, Atan, Atanh = _math.tan, _math.atan, _math.atanh
SoftPlus, SoftSign, Reciprocal = _math.softplus, _math.softsign, _math.reciprocal


def ReLUBackward(dy: CTensor, x: CTensor) -> CTensor:
    """ReLU's input gradient, ``dx = dy * (x > 0)``, from the output gradient and the input."""
    return _math.relu_backward(dy, x)


# ---------------------------------------------------------------- reductions and softmax
def Sum(t: CTensor, axis: int) -> CTensor:
    """Sum of ``t`` along ``axis``; the result has that axis removed."""
    return _math.sum(t, axis)


def SumAll(t: CTensor) -> CTensor:
    """Sum of all elements of ``t``, as a one-element tensor of shape ``(1,)``."""
    return _math.reshape(_math.sum(t), (1,))


def SumAsFloat(t: CTensor) -> float:
    """Sum of all elements of ``t``, as a Python float (read back to the host)."""
    return float(_math.sum(t).to_numpy())


def Average(t: CTensor, axis: int = 0) -> CTensor:
    """Mean of ``t`` along ``axis``; the result has that axis removed."""
    return _math.reduce_mean(t, axis)


def SoftMax(t: CTensor, axis: int = -1) -> CTensor:
    """``exp(t) / sum(exp(t))`` along ``axis``; ``t``'s shape and dtype."""
    return _math.softmax(t, axis)


def SoftMaxBackward(dy: CTensor, axis: int, y: CTensor) -> CTensor:
    """Softmax's input gradient, ``dx = y (dy - sum(dy y))`` along ``axis``.

    ``y`` is the softmax's output and ``dy`` the gradient of its output; the argument order
    is SINGA's.
    """
    return _math.softmax_backward(y, dy, axis)


# ---------------------------------------------------------------- power and comparisons
def Pow(base: CTensor, exp: CTensor) -> CTensor:
    """``base ** exp`` elementwise, ``exp`` a tensor broadcast against ``base``."""
    return _math.pow(base, exp)


def PowFloat(t: CTensor, x: float) -> CTensor:
    """``t ** x`` elementwise for a number ``x``."""
    return _math.pow(t, float(x))


def PowWithRet(base: CTensor, exp, ret: CTensor) -> None:
    """``base ** exp`` written into ``ret``; ``exp`` is a tensor or a number."""
    _math.pow(base, exp, out=ret)


__lt__, __le__, __gt__, __ge__, __eq__ = _math.lt, _math.le, _math.gt, _math.ge, _math.eq
LTFloat, LEFloat, GTFloat, GEFloat, EQFloat = _math.lt, _math.le, _math.gt, _math.ge, _math.eq

# ---------------------------------------------------------------- arithmetic
__add__, __sub__, __mul__, __div__ = _math.add, _math.sub, _math.mul, _math.div
AddFloat, SubFloat, MultFloat, DivFloat = _math.add, _math.sub, _math.mul, _math.div


def Add(a: CTensor, b, ret: CTensor | None = None):
    """``a + b`` elementwise; ``b`` is a tensor (broadcast) or a number.

    Returns a new tensor, or writes into ``ret`` and returns it when ``ret`` is given.
    """
    return _math.add(a, b) if ret is None else _math.add(a, b, out=ret)


def Sub(a: CTensor, b, ret: CTensor | None = None):
    """``a - b`` elementwise; ``b`` is a tensor (broadcast) or a number.

    Returns a new tensor, or writes into ``ret`` and returns it when ``ret`` is given.
    """
    return _math.sub(a, b) if ret is None else _math.sub(a, b, out=ret)


def EltwiseMult(a: CTensor, b, ret: CTensor | None = None):
    """``a * b`` elementwise; ``b`` is a tensor (broadcast) or a number.

    Returns a new tensor, or writes into ``ret`` and returns it when ``ret`` is given.
    """
    return _math.mul(a, b) if ret is None else _math.mul(a, b, out=ret)


def Div(a, b, ret: CTensor | None = None):
    """``a / b`` elementwise; either operand may be a number (``Div(1.0, t)`` is ``1 / t``).

    Returns a new tensor, or writes into ``ret`` and returns it when ``ret`` is given.
    """
    if not isinstance(a, CTensor):  # Div(float, tensor): value / b
        r = _math.rdiv(b, a)
        return r if ret is None else _math.copy_into(ret, r)
    return _math.div(a, b) if ret is None else _math.div(a, b, out=ret)


def AddFloatWithRet(t, x, ret):
    """``ret = t + x`` for a number ``x``."""
    _math.add(t, x, out=ret)


def SubFloatWithRet(t, x, ret):
    """``ret = t - x`` for a number ``x``."""
    _math.sub(t, x, out=ret)


def MultFloatWithRet(t, x, ret):
    """``ret = t * x`` for a number ``x``."""
    _math.mul(t, x, out=ret)


def DivFloatWithRet(t, x, ret):
    """``ret = t / x`` for a number ``x``."""
    _math.div(t, x, out=ret)


# ---------------------------------------------------------------- shape
def ConcatOn(tensors, axis: int) -> CTensor:
    """Join ``tensors`` (equal shapes except along ``axis``, one dtype) along ``axis``."""
    return _math.concat(list(tensors), axis)


def SliceOn(t: CTensor, start: int, end: int, axis: int) -> CTensor:
    """A copy of ``t[start:end]`` along ``axis``."""
    return _math.slice_on(t, start, end, axis)


def Reshape(t: CTensor, shape) -> CTensor:
    """``t``'s elements in ``shape`` (one dimension may be -1); a view when ``t`` is contiguous."""
    return _math.reshape(t, shape)


def Contiguous(t: CTensor) -> CTensor:
    """``t`` itself when its strides are row-major, otherwise a contiguous copy."""
    return _math.contiguous(t)


def Transpose(t: CTensor, axes=None) -> CTensor:
    """A view of ``t`` with its axes permuted by ``axes`` (reversed when None)."""
    return _math.transpose(t, axes)


def DefaultTranspose(t: CTensor) -> CTensor:
    """A view of ``t`` with its axes reversed (the matrix transpose for 2-D)."""
    return _math.transpose(t)


# ---------------------------------------------------------------- random
def Bernoulli(p: float, t: CTensor) -> None:
    """Fill ``t`` in place with Bernoulli(``p``) samples: 1 with probability ``p``, else 0."""
    _math.bernoulli(t, p)


def Gaussian(mean: float, std: float, t: CTensor) -> None:
    """Fill ``t`` in place with normal samples N(``mean``, ``std**2``)."""
    _math.gaussian(t, mean, std)


def Uniform(low: float, high: float, t: CTensor) -> None:
    """Fill ``t`` in place with uniform samples on [``low``, ``high``)."""
    _math.uniform(t, low, high)


# ---------------------------------------------------------------- BLAS-like
def Axpy(alpha, x: CTensor, y: CTensor) -> None:
    """y += alpha * x (alpha a float or a one-element CTensor)."""
    _math.axpy(alpha, x, y)


def Mult(a: CTensor, b: CTensor) -> CTensor:
    """Matrix product ``a @ b`` (numpy matmul: 1-D vectors, 2-D matrices, batched above)."""
    return _math.matmul(a, b)


def MultWithRet(a: CTensor, b: CTensor, ret: CTensor) -> None:
    """Matrix product ``a @ b`` written into ``ret``."""
    _math.matmul(a, b, out=ret)


def MultWithScale(alpha: float, a: CTensor, b: CTensor, beta: float, c: CTensor) -> None:
    """c = alpha * a @ b + beta * c."""
    if len(a.dims) == 2 and len(b.dims) == 2:
        _math.gemm(a, b, c, alpha, beta, out=c)
        return
    prod = _math.matmul(a, b)
    _math.imul(c, float(beta))
    _math.axpy(float(alpha), prod, c)


# ---------------------------------------------------------------- rows and columns
_col, _row = _math.as_column, _math.as_row


def AddColumn(v, m):
    """``m += v`` column-wise, in place: ``v`` (one value per row of ``m``) added to each column."""
    _math.iadd(m, _col(v, m))


def SubColumn(v, m):
    """``m -= v`` column-wise, in place: ``v`` (one value per row of ``m``) from each column."""
    _math.isub(m, _col(v, m))


def MultColumn(v, m):
    """``m *= v`` column-wise, in place: each column is multiplied by ``v`` (one value per row)."""
    _math.imul(m, _col(v, m))


def DivColumn(v, m):
    """``m /= v`` column-wise, in place: each column is divided by ``v`` (one value per row)."""
    _math.idiv(m, _col(v, m))


def AddRow(v, m):
    """``m += v`` row-wise, in place: ``v`` (one value per column of ``m``) is added to each row."""
    _math.iadd(m, _row(v, m))


def SubRow(v, m):
    """``m -= v`` row-wise, in place: ``v`` (one value per column of ``m``) from each row."""
    _math.isub(m, _row(v, m))


def MultRow(v, m):
    """``m *= v`` row-wise, in place: each row is multiplied by ``v`` (one value per column)."""
    _math.imul(m, _row(v, m))


def DivRow(v, m):
    """``m /= v`` row-wise, in place: each row is divided by ``v`` (one value per column)."""
    _math.idiv(m, _row(v, m))


def AddColumnWithScale(alpha: float, beta: float, v: CTensor, m: CTensor) -> None:
    """m = alpha * v (column) + beta * m."""
    _math.scale_add(m, _col(v, m), alpha, beta)


def AddRowWithScale(alpha: float, beta: float, v: CTensor, m: CTensor) -> None:
    """m = alpha * v (row) + beta * m."""
    _math.scale_add(m, _row(v, m), alpha, beta)


def _into(out: CTensor | None, value: CTensor) -> CTensor:
    if out is None:
        return value
    _math.copy_into(out, value)
    return out


def SumColumns(m: CTensor, out: CTensor | None = None) -> CTensor:
    """Sum of the columns of a matrix: a vector of length rows (written into ``out`` if
    given, as SINGA's ``SumColumns(M, &out)``)."""
    return _into(out, _math.sum(m, 1))


def SumRows(m: CTensor, out: CTensor | None = None) -> CTensor:
    """Sum of the rows of a matrix: a vector of length cols (into ``out`` if given)."""
    return _into(out, _math.sum(m, 0))


# ---------------------------------------------------------------- cross-entropy
def _dense_target(t: CTensor, p: CTensor) -> CTensor:
    """t as a (N, C) distribution of p's dtype: one-hot rows for int32 class ids."""
    from .ops import OPS, run

    if len(t.dims) == 2 and t.dims == p.dims:
        return t if t.dtype_code == p.dtype_code else _math.as_type(t, p.dtype_code)
    ids = _math.reshape(t, (t.size,))
    ids = ids if ids.dtype_code == kInt else _math.as_type(ids, kInt)
    return run(OPS["OneHot"], [ids], {"depth": p.dims[1], "axis": -1, "on_value": 1.0,
                                      "off_value": 0.0, "dtype": p.dtype_code})[0]


def CrossEntropyFwd(p: CTensor, t: CTensor) -> CTensor:
    """Per-sample cross-entropy ``-log p[n, t[n]]`` (or ``-sum t log p`` for a dense target)
    of probabilities ``p`` (N, C); returns a (N,) tensor."""
    from .ops import OPS, run

    if t.dtype_code != kInt and t.dims != p.dims:
        t = _math.as_type(_math.reshape(t, (t.size,)), kInt)
    return run(OPS["CrossEntropyFwd"], [p, t])[0]


def SoftmaxCrossEntropyBwd(p: CTensor, t: CTensor) -> CTensor:
    """``p - t``: the gradient of the summed softmax cross-entropy w.r.t. the logits, given
    the softmax output ``p`` (SINGA's autograd divides it by the batch size itself)."""
    return _math.sub(p, _dense_target(t, p))


# ---------------------------------------------------------------- copies
def CopyDataToFrom(dst: CTensor, src: CTensor, num: int, dst_offset: int = 0,
                   src_offset: int = 0) -> None:
    """Copy ``num`` elements of ``src`` from ``src_offset`` into ``dst`` at ``dst_offset``.

    Offsets count elements of the flattened tensors; the two may be on different devices
    (:func:`singa.tensor.copy_data_to_from` on the Tensors wrapping them).
    """
    from .tensor import Tensor, copy_data_to_from

    copy_data_to_from(Tensor._wrap(dst), Tensor._wrap(src), num, dst_offset, src_offset)


def RepeatDataToFrom(broadcast_flag: bool, repeats, axis: int, dst: CTensor, src: CTensor,
                     num: int) -> None:
    """dst = repeat(src, repeats, axis) (``axis`` None/-1 with broadcast_flag: flattened)."""
    r = _math.repeat(src, list(repeats), None if broadcast_flag else axis)
    _math.copy_into(dst, r)


def CopyFloatDataFromHostPtr(t: CTensor, arr) -> None:
    """Copy the host array ``arr``, converted to float32, into ``t`` (same element count)."""
    t.copy_from_numpy(np.asarray(arr, np.float32))
