"""Elementwise kernels: numpy ufuncs writing into the output view (``out=``)."""

from __future__ import annotations

import math

import numpy as np

from ._float16 import via_float32
from ._jit import njit, vectorize_float
from ._threads import split_flat

U = np.uint64  # unsigned flat indices in the jitted loops (see conv._im2col)

#: Outputs with at least this many elements are computed in flat slices on the cores. These
#: passes are memory-bound: measured on 2 cores, ReLU over 256k floats takes 86 us on one
#: thread and 102 us split (section start and cache traffic), 1M floats 336 vs 229 us.
PARALLEL_MIN_ITEMS = 1 << 20


def _unary(ufunc):
    def kernel(ins, outs, attrs):
        ufunc(ins[0], out=outs[0])

    kernel.__name__ = f"cpu_{getattr(ufunc, '__name__', 'unary')}"
    return kernel


@njit(nogil=True)
def _relu_loop(x, out):
    """out = max(x, 0) over flat arrays, numpy's maximum per element (NaN stays, -0.0
    becomes +0.0)."""
    zero = x.dtype.type(0)
    for i in range(U(x.size)):
        v = x[i]
        out[i] = v if (v > zero or v != v) else zero


@njit(nogil=True)
def _relu_backward_loop(dy, x, out):
    """out = dy * (x > 0) over flat arrays: numpy's product by the comparison as a number
    (dy * 0.0 keeps dy's sign and its NaN)."""
    zero = x.dtype.type(0)
    one = x.dtype.type(1)
    for i in range(U(x.size)):
        out[i] = dy[i] * (one if x[i] > zero else zero)


@njit(nogil=True)
def _add_relu_loop(a, b, out):
    """out = max(a + b, 0) over flat arrays: the Add kernel's sum, then the ReLU's maximum."""
    zero = a.dtype.type(0)
    for i in range(U(out.size)):
        v = a[i] + b[i]
        out[i] = v if (v > zero or v != v) else zero


@njit(nogil=True)
def _add_relu_rows(a, b, out):
    """out[r, j] = max(a[r, j] + b[j], 0): a sum broadcasting b over the rows (a bias)."""
    zero = a.dtype.type(0)
    for r in range(a.shape[0]):
        for j in range(U(a.shape[1])):
            v = a[r, j] + b[j]
            out[r, j] = v if (v > zero or v != v) else zero


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def _flat(*arrays) -> bool:
    """Whether the arrays are C-contiguous float32/float64 arrays of one shape and dtype,
    which the numba loops read flat (called per kernel call: plain comparisons)."""
    a = arrays[0]
    dt, shape = a.dtype, a.shape
    if dt != _F32 and dt != _F64:
        return False
    for b in arrays:
        if b.shape != shape or b.dtype != dt or not b.flags.c_contiguous:
            return False
    return True


def _relu(x, out):
    """numpy's ``maximum(x, 0)`` runs at ~2.6 G floats/s here (its NaN-propagating loop);
    the numba loop at memory speed: 200704 floats 76 -> 21 us (AMD Zen 4, 1 thread, kernel
    call included; ReLUBackward 62 -> 30 us)."""
    if _flat(x, out):
        _relu_loop(x.reshape(-1), out.reshape(-1))
    else:
        np.maximum(x, 0, out=out)


def _round_half_away(x, out):
    tmp = np.empty(x.shape, x.dtype)  # np.abs of a 0-d view would return a scalar
    np.abs(x, out=tmp)
    tmp += 0.5
    np.floor(tmp, out=tmp)
    np.copysign(tmp, x, out=out)


def _negative(x, out):
    # np.negative (numpy 2.4, AVX-512 loops) misreads a strided input when the output is
    # strided too; the multiply loop is correct.
    np.multiply(x, -1, out=out)


def _sigmoid(x, out):
    _negative(x, out)
    np.exp(out, out=out)
    out += 1
    np.reciprocal(out, out=out)


def _softplus(x, out):
    np.logaddexp(0, x, out=out)


def _softsign(x, out):
    tmp = np.abs(x)
    tmp += 1
    np.divide(x, tmp, out=out)


def _logical_not(x, out):
    np.equal(x, 0, out=out)


@vectorize_float
def _erf_scalar(v):
    return math.erf(v)


def _erf(x, out):
    if x.dtype == np.float16:
        out[...] = _erf_scalar(x.astype(np.float32))
    elif not out.flags.c_contiguous:  # numba's ufunc ignores a 1-D output's stride
        out[...] = _erf_scalar(x)
    else:
        _erf_scalar(x, out=out)


UNARY = {
    "Abs": np.abs, "Neg": _negative, "Sign": np.sign, "Square": np.square,
    "Ceil": np.ceil, "Floor": np.floor, "Round": _round_half_away, "RoundE": np.rint,
    "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Reciprocal": np.reciprocal,
    "Erf": _erf, "ReLU": _relu, "Sigmoid": _sigmoid, "Tanh": np.tanh,
    "SoftPlus": _softplus, "SoftSign": _softsign, "Sin": np.sin, "Cos": np.cos,
    "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan,
    "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh, "Acosh": np.arccosh,
    "Atanh": np.arctanh, "Not": _logical_not,
}


def _scalar(ufunc, reflected=False):
    if reflected:
        def kernel(ins, outs, attrs):
            ufunc(attrs["value"], ins[0], out=outs[0], casting="unsafe")
    else:
        def kernel(ins, outs, attrs):
            ufunc(ins[0], attrs["value"], out=outs[0], casting="unsafe")
    return kernel


SCALAR = {
    "AddScalar": _scalar(np.add), "SubScalar": _scalar(np.subtract),
    "RSubScalar": _scalar(np.subtract, True), "MulScalar": _scalar(np.multiply),
    "DivScalar": _scalar(np.divide), "RDivScalar": _scalar(np.divide, True),
    "PowScalar": _scalar(np.power), "RPowScalar": _scalar(np.power, True),
    "LTScalar": _scalar(np.less), "LEScalar": _scalar(np.less_equal),
    "GTScalar": _scalar(np.greater), "GEScalar": _scalar(np.greater_equal),
    "EQScalar": _scalar(np.equal), "NEScalar": _scalar(np.not_equal),
    "MaxScalar": _scalar(np.maximum), "MinScalar": _scalar(np.minimum),
}


def _binary(ufunc):
    def kernel(ins, outs, attrs):
        ufunc(ins[0], ins[1], out=outs[0], casting="unsafe")

    return kernel


def _add(ins, outs, attrs):
    np.add(ins[0], ins[1], out=outs[0])


BINARY = {
    "Add": _add, "Sub": _binary(np.subtract), "Mul": _binary(np.multiply),
    "Div": _binary(np.divide), "Pow": _binary(np.power), "LT": _binary(np.less),
    "LE": _binary(np.less_equal), "GT": _binary(np.greater), "GE": _binary(np.greater_equal),
    "EQ": _binary(np.equal), "NE": _binary(np.not_equal), "Maximum": _binary(np.maximum),
    "Minimum": _binary(np.minimum), "And": _binary(np.logical_and),
    "Or": _binary(np.logical_or), "Xor": _binary(np.logical_xor),
}


def _relu_backward(ins, outs, attrs):
    dy, x = ins
    out = outs[0]
    if _flat(dy, x, out):  # one pass instead of numpy's two (a bool temporary)
        _relu_backward_loop(dy.reshape(-1), x.reshape(-1), out.reshape(-1))
    else:
        np.multiply(dy, x > 0, out=out)


def _add_relu_pass(a, b, out):
    """``(loop, args)``: Add+ReLU's one-pass numba loop over these arrays (flat when nothing
    broadcasts, by rows when b is broadcast over a's rows), or None (no one-pass loop)."""
    if _flat(a, b, out):
        return _add_relu_loop.serial(), (a.reshape(-1), b.reshape(-1), out.reshape(-1))
    if (b.ndim < a.ndim and b.shape == a.shape[a.ndim - b.ndim:] and _flat(a, out)
            and b.dtype == a.dtype and b.flags.c_contiguous):
        return _add_relu_rows.serial(), (a.reshape(-1, b.size), b.reshape(-1),
                                         out.reshape(-1, b.size))
    return None


def _add_relu(ins, outs, attrs):
    """The fused Add+ReLU of graph mode (a residual join, a bias and its activation; see
    singa.ops.FUSIONS): one pass when nothing broadcasts or b is a bias over a's rows, else
    numpy's sum and the ReLU loop in place."""
    a, b = ins
    out = outs[0]
    one_pass = _add_relu_pass(a, b, out)
    if one_pass is not None:
        loop, args = one_pass
        loop(*args)
    else:
        np.add(a, b, out=out)
        _relu(out, out)


def _clip(ins, outs, attrs):
    lo, hi = attrs.get("min"), attrs.get("max")
    x, out = ins[0], outs[0]
    if lo is None and hi is None:
        np.copyto(out, x)
    elif lo is None:
        np.minimum(x, hi, out=out, casting="unsafe")
    elif hi is None:
        np.maximum(x, lo, out=out, casting="unsafe")
    else:
        np.clip(x, lo, hi, out=out, casting="unsafe")


KERNELS = {name: _unary(f) for name, f in UNARY.items()}
# several numpy passes: in float16 each would round, so a float16 result is computed in
# float32 and rounded once (the kit compares float16 within one ulp)
for _name in ("Sigmoid", "SoftSign"):
    KERNELS[_name] = via_float32(KERNELS[_name])
KERNELS.update(SCALAR)
KERNELS.update(BINARY)
KERNELS["ReLUBackward"] = _relu_backward
KERNELS["Add+ReLU"] = _add_relu
KERNELS["Clip"] = _clip
#: The memory-bound passes of a training step (activations, residual adds, their gradients)
#: split across the cores; the transcendental ones keep numpy's single loop.
for _name in ("ReLU", "ReLUBackward", "Add", "Add+ReLU", "Sub", "Mul", "AddScalar",
              "MulScalar"):
    KERNELS[_name] = split_flat(KERNELS[_name], lambda: PARALLEL_MIN_ITEMS)


def _bind_add_relu(ins, outs, attrs):
    """Add+ReLU bound to its arrays (see ``bind`` in docs/plugin-authoring.md) when the general
    kernel would run one of its numba loops on one thread: the flat views and the compiled
    loop resolved once."""
    a, b = ins
    out = outs[0]
    one_pass = _add_relu_pass(a, b, out) if out.size < PARALLEL_MIN_ITEMS else None
    if one_pass is None:
        return None
    loop, args = one_pass
    return lambda _ins, _outs, _attrs: loop(*args)


def _bind_relu(ins, outs, attrs):
    """ReLU bound to its arrays when the general kernel would run its numba loop on one
    thread (see :func:`_bind_add_relu`)."""
    x, out = ins[0], outs[0]
    if out.size >= PARALLEL_MIN_ITEMS or not _flat(x, out):
        return None
    loop, args = _relu_loop.serial(), (x.reshape(-1), out.reshape(-1))
    return lambda _ins, _outs, _attrs: loop(*args)


KERNELS["Add+ReLU"].bind = _bind_add_relu
KERNELS["ReLU"].bind = _bind_relu
