"""Declarations of the tensor-math operators: elementwise, reductions, GEMM, copies, fills.

The unary and binary elementwise ops come from their records in :mod:`._elementwise`, the axis
reductions (Sum, ReduceMean, ReduceMax, ReduceMin) from theirs in :mod:`._reductions`; the
other entries are (name, numpy reference, dtypes) tables or single declarations, with shared
shape/dtype rules.
References compute in the dtype they are given (the conformance kit passes float64 copies of
floating inputs) and never touch devices.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _dtype
from ..errors import ShapeError
from . import _rules as rules
from ._elementwise import BINARY, UNARY
from ._reductions import REDUCTIONS
from ._registry import FHD, NUM, defop

# ---------------------------------------------------------------- unary elementwise

def _unary_sampler(low, high, name, attrs=()):
    def sample(g, dtype):
        x = g.array(g.shape(), dtype, low, high)
        values = {attr: g.floats(lo, hi) for attr, _, lo, hi in attrs}
        if name == "Reciprocal":
            x = x * g.signs(x.shape)
        if name in ("Round", "RoundE", "Ceil", "Floor"):
            # off the .5 ties and integers here; test_special puts them in (exact in float16)
            x = np.round(x * 4) / 4 + np.asarray(0.1, x.dtype)
        return [x], values

    return sample


for _unary in UNARY.values():
    defop(_unary.op, 1, rules.same if _unary.dtypes is NUM else rules.same_float(_unary.op),
          _unary.reference,
          _unary_sampler(*_unary.domain, _unary.op, _unary.attrs), dtypes=_unary.dtypes,
          doc=f"y = {_unary.formula}, elementwise", inplace=(0,), recompute=True)


# ---------------------------------------------------------------- x (op) scalar
SCALAR = {
    "AddScalar": (lambda x, value: x + value, NUM),
    "SubScalar": (lambda x, value: x - value, NUM),
    "RSubScalar": (lambda x, value: value - x, NUM),
    "MulScalar": (lambda x, value: x * value, NUM),
    "DivScalar": (lambda x, value: x / value, FHD),
    "RDivScalar": (lambda x, value: value / x, FHD),
    "PowScalar": (lambda x, value: np.power(x, value), FHD),
    "RPowScalar": (lambda x, value: np.power(value, x), FHD),
    "LTScalar": (lambda x, value: (x < value).astype(x.dtype), NUM),
    "LEScalar": (lambda x, value: (x <= value).astype(x.dtype), NUM),
    "GTScalar": (lambda x, value: (x > value).astype(x.dtype), NUM),
    "GEScalar": (lambda x, value: (x >= value).astype(x.dtype), NUM),
    "EQScalar": (lambda x, value: (x == value).astype(x.dtype), NUM),
    "NEScalar": (lambda x, value: (x != value).astype(x.dtype), NUM),
    "MaxScalar": (lambda x, value: np.maximum(x, value).astype(x.dtype), NUM),
    "MinScalar": (lambda x, value: np.minimum(x, value).astype(x.dtype), NUM),
}


def _scalar_sampler(name):
    def sample(g, dtype):
        integer = dtype == _dtype.kInt
        if name in ("PowScalar",):
            x = g.array(g.shape(), dtype, 0.2, 3)
            return [x], {"value": g.choice([0.5, 2.0, 3.0, -1.0, 1.5])}
        if name == "RPowScalar":
            return [g.array(g.shape(), dtype, -2, 2)], {"value": g.choice([0.5, 2.0, 3.0])}
        if name == "RDivScalar":
            x = g.array(g.shape(), dtype, 0.5, 3) * g.signs(())
            return [x], {"value": g.floats(-3, 3)}
        x = g.array(g.shape(), dtype, -3, 3)
        if integer:
            value = g.integers(-3, 3)
        elif name.endswith(("EQScalar", "NEScalar")):
            value = float(x.reshape(-1)[0]) if x.size else 0.0
        else:
            value = g.floats(-3, 3)
        if name == "DivScalar" and value == 0:
            value = 1.5
        return [x], {"value": value}

    return sample


for _name, (_ref, _dts) in SCALAR.items():
    defop(_name, 1, rules.same, _ref, _scalar_sampler(_name), dtypes=_dts,
          doc=f"y = {_name[:-6].lower()}(x, value), elementwise with a Python scalar",
          inplace=(0,), recompute=True)

# ---------------------------------------------------------------- binary, broadcasting
def _binary_sampler(name):
    def sample(g, dtype):
        sa, sb = g.broadcastable_shapes()
        if name == "Pow":
            return [g.array(sa, dtype, 0.2, 3), g.array(sb, dtype, -2, 2)], {}
        a = g.array(sa, dtype, -3, 3)
        b = g.array(sb, dtype, -3, 3)
        if name == "Div":
            b = np.where(np.abs(b) < 0.5, np.asarray(1, b.dtype), b).astype(b.dtype)
        if name in ("EQ", "NE", "LE", "GE", "And", "Or", "Xor"):
            b = np.where(g.mask(sb), np.round(b), b).astype(b.dtype)  # some ties
            a = np.round(a).astype(a.dtype)
        return [a, b], {}

    return sample


for _binary in BINARY.values():
    defop(_binary.op, 2, rules.binary(_binary.op), _binary.reference,
          _binary_sampler(_binary.op), dtypes=_binary.dtypes,
          doc=f"y = {_binary.formula}, elementwise with numpy broadcasting", inplace=(0, 1),
          recompute=True)


def _relu_backward_ref(dy, x):
    return dy * (x > 0)


defop("ReLUBackward", 2, rules.binary("ReLUBackward"), _relu_backward_ref,
      lambda g, dt: ([g.array(s := g.shape(), dt, -3, 3), g.array(s, dt, -3, 3)], {}),
      dtypes=FHD, doc="dx = dy * (x > 0)", inplace=(0, 1), recompute=True)


def _hard_sigmoid_backward_ref(dy, x, alpha, gamma):
    z = x * alpha + gamma
    return (dy * (alpha * ((z > 0) & (z < 1)))).astype(dy.dtype)


def _hard_swish_backward_ref(dy, x):
    inside = (x > -3) & (x < 3)
    return (dy * np.where(inside, (2 * x + 3) / 6, (x >= 3).astype(x.dtype))).astype(dy.dtype)


defop("HardSigmoidBackward", 2, rules.binary("HardSigmoidBackward"), _hard_sigmoid_backward_ref,
      lambda g, dt: ([g.array(s := g.shape(), dt, -3, 3), g.array(s, dt, -6, 6)],
                     {"alpha": g.floats(0.05, 1.0), "gamma": g.floats(-0.5, 1.5)}),
      dtypes=FHD, doc="dx = alpha dy where 0 < alpha x + gamma < 1, else 0", inplace=(0, 1),
      recompute=True)
defop("HardSwishBackward", 2, rules.binary("HardSwishBackward"), _hard_swish_backward_ref,
      lambda g, dt: ([g.array(s := g.shape(), dt, -3, 3), g.array(s, dt, -5, 5)], {}),
      dtypes=FHD, doc="dx = dy (2 x + 3) / 6 for -3 < x < 3, dy for x >= 3, else 0",
      inplace=(0, 1), recompute=True)


def _clip_ref(x, min=None, max=None):
    return np.clip(x, -np.inf if min is None else min, np.inf if max is None else max)


def _clip_sample(g, dtype):
    x = g.array(g.shape(), dtype, -3, 3)
    lo = g.choice([None, -1.0, -0.5])
    hi = g.choice([None, 1.0, 2.0])
    return [x], {"min": lo, "max": hi}


defop("Clip", 1, rules.same, _clip_ref, _clip_sample, dtypes=FHD, recompute=True,
      doc="y = min(max(x, min), max); either bound may be None")

# ---------------------------------------------------------------- copies, casts, fills


def _copy_sample(g, dtype):
    return [g.array(g.shape(min_dims=1), dtype, -3, 3)], {}


defop("Copy", 1, rules.same, lambda x: np.array(x), _copy_sample, dtypes=NUM + (_dtype.kUChar,),
      recompute=True,
      doc="contiguous copy of a (possibly strided, offset or broadcast) view")


def _astype_infer(ins, attrs):
    return [(ins[0].dims, attrs["dtype"])]


def _astype_ref(x, dtype):
    return x.astype(_dtype.NP_DTYPE[dtype])


def _astype_sample(g, dtype):
    x = g.array(g.shape(), dtype, -3, 3)
    return [x], {"dtype": g.choice([_dtype.kFloat32, _dtype.kInt, _dtype.kFloat16,
                                    _dtype.kDouble])}


defop("AsType", 1, _astype_infer, _astype_ref, _astype_sample, dtypes=NUM,
      doc="cast to attrs['dtype'] (float to int truncates toward zero)")


def _fill_sample(g, dtype):
    return [], {"shape": g.shape(), "dtype": dtype, "value": g.floats(-3, 3)
                if dtype != _dtype.kInt else g.integers(-3, 3)}


defop("SetValue", 0, rules.from_attrs,
      lambda shape, dtype, value: np.full(shape, value, _dtype.NP_DTYPE[dtype]),
      _fill_sample, dtypes=NUM, doc="fill with attrs['value']")


def _rand_sample(kind):
    def sample(g, dtype):
        # ~60k draws: the checks' margins (6 standard errors) then hold the std within 2%
        shape = (g.integers(200, 300), g.integers(200, 300))
        if kind == "Gaussian":
            attrs = {"mean": g.floats(-1, 1), "std": g.floats(0.5, 2)}
        elif kind == "Uniform":
            lo = g.floats(-2, 1)
            attrs = {"low": lo, "high": lo + g.floats(0.5, 3)}
        else:
            attrs = {"p": g.floats(0.1, 0.9)}
        return [], {"shape": shape, "dtype": dtype, **attrs}

    return sample


defop("Gaussian", 0, rules.from_attrs, lambda shape, dtype, mean, std: np.full(shape, mean),
      _rand_sample("Gaussian"), random=True, dtypes=FHD,
      doc="normal draws N(mean, std^2) from the device RNG")
defop("Uniform", 0, rules.from_attrs,
      lambda shape, dtype, low, high: np.full(shape, (low + high) / 2),
      _rand_sample("Uniform"), random=True, dtypes=FHD, doc="uniform draws on [low, high)")
defop("Bernoulli", 0, rules.from_attrs, lambda shape, dtype, p: np.full(shape, p),
      _rand_sample("Bernoulli"), random=True, dtypes=FHD, doc="1 with probability p, else 0")

# ---------------------------------------------------------------- reductions


def _reduce_sample(g, dtype):
    # axes: any subset (leading, trailing and middle runs reach different code paths), often
    # leading and trailing axes around a kept middle run (a bias gradient's (0, 2, 3))
    kind = g.choice(["outer", "subset", "outer", "all", "none"])
    x = g.array(g.shape(min_dims=3 if kind == "outer" else 1), dtype, -3, 3)
    nd = x.ndim
    if kind == "outer":
        lo = g.integers(1, nd - 2)
        hi = g.integers(lo, nd - 2)
        axes = tuple(range(lo)) + tuple(range(hi + 1, nd))
    elif kind == "subset":
        axes = tuple(a for a in range(nd) if g.booleans()) or (g.integers(0, nd - 1),)
    else:
        axes = tuple(range(nd)) if kind == "all" else None
    return [x], {"axes": axes, "keepdims": g.choice([False, True])}


def _reduce_bound(total):
    def bound(x, axes=None, keepdims=False):
        ax = rules.normalize_axes("reduce", axes, x.ndim)
        n = math.prod(x.shape[a] for a in ax)
        return np.sqrt(n) * total(np.abs(x.astype(np.float64)), ax, keepdims=keepdims)

    return bound


for _reduction in REDUCTIONS.values():
    defop(_reduction.op, 1, rules.reduce_rule(_reduction.op), _reduction.reference,
          _reduce_sample, dtypes=_reduction.dtypes,
          acc_bound=None if _reduction.bound is None else _reduce_bound(_reduction.bound),
          doc=f"y = {_reduction.formula} over attrs['axes'] (None: all)")


def _argmax_infer(ins, attrs):
    x = ins[0]
    ax = rules.check_axis("ArgMax", attrs["axis"], len(x.dims))
    return [(rules.reduced_shape(x.dims, (ax,), attrs.get("keepdims", False)), _dtype.kInt)]


def _argmax_sample(g, dtype):
    x = g.array(g.shape(min_dims=1), dtype, -3, 3)
    return [x], {"axis": g.integers(0, x.ndim - 1), "keepdims": g.choice([False, True])}


defop("ArgMax", 1, _argmax_infer,
      lambda x, axis, keepdims=False: np.argmax(x, axis, keepdims=keepdims).astype(np.int32),
      _argmax_sample, dtypes=FHD, doc="index of the first maximum along attrs['axis']")


def _norm_infer(ins, attrs):
    return [((), ins[0].dtype_code)]


def _norm_sample(g, dtype):
    x = g.array(g.shape(), dtype, -3, 3)
    if g.large and dtype == _dtype.kFloat16:  # a million |x| stay below float16's 65504
        x = (x / 64).astype(x.dtype)
    return [x], {}


def _asum_ref(x):
    return np.asarray(np.abs(x).sum(), x.dtype)


def _nrm2_ref(x):
    return np.asarray(np.sqrt(np.square(x).sum()), x.dtype)


defop("Asum", 1, _norm_infer, _asum_ref, _norm_sample, dtypes=FHD,
      acc_bound=lambda x: np.sqrt(x.size) * _asum_ref(x), doc="sum of absolute values")
defop("Nrm2", 1, _norm_infer, _nrm2_ref, _norm_sample, dtypes=FHD,
      acc_bound=lambda x: np.sqrt(x.size) * _nrm2_ref(x), doc="Euclidean norm")


def _softmax_ref(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _log_softmax_ref(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _softmax_infer(name):
    float_rule = rules.same_float(name)

    def infer(ins, attrs):
        ax = rules.check_axis(name, attrs.get("axis", -1), len(ins[0].dims))
        if ins[0].dims[ax] == 0:
            raise ShapeError(f"{name}: axis {ax} of {ins[0].dims} is empty; a softmax over no "
                             "values is undefined")
        return float_rule(ins, attrs)

    return infer


def _softmax_sample(g, dtype):
    x = g.array(g.shape(min_dims=1), dtype, -3, 3)
    return [x], {"axis": g.integers(-x.ndim, x.ndim - 1)}


def _softmax_bwd_ref(y, dy, axis=-1):
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))


def _softmax_bwd_sample(g, dtype):
    s = g.shape(min_dims=1)
    ax = g.integers(-len(s), len(s) - 1)
    y = _softmax_ref(g.array(s, _dtype.kDouble, -2, 2), ax).astype(_dtype.NP_DTYPE[dtype])
    return [y, g.array(s, dtype, -1, 1)], {"axis": ax}


defop("Softmax", 1, _softmax_infer("Softmax"), _softmax_ref, _softmax_sample, dtypes=FHD,
      doc="y = exp(x - max) / sum(exp(x - max)) along attrs['axis']")
defop("LogSoftmax", 1, _softmax_infer("LogSoftmax"), _log_softmax_ref, _softmax_sample,
      dtypes=FHD, doc="y = x - max - log(sum(exp(x - max))) along attrs['axis']")
defop("SoftmaxBackward", 2, _softmax_infer("SoftmaxBackward"), _softmax_bwd_ref,
      _softmax_bwd_sample, dtypes=FHD, doc="dx = y * (dy - sum(dy * y, axis))")

# ---------------------------------------------------------------- matrix products


def _matmul_infer(ins, attrs):
    a, b = ins
    dt = rules.check_dtypes("Matmul", ins)
    sa, sb = a.dims, b.dims
    if not sa or not sb:
        raise ShapeError("Matmul: operands must have at least one dimension")
    ka = sa[-1]
    kb = sb[-2] if len(sb) > 1 else sb[0]
    if ka != kb:
        raise ShapeError(
            f"Matmul: inner dimensions differ: {sa} @ {sb} ({ka} != {kb}); "
            "transpose or reshape an operand"
        )
    if len(sa) == 1 and len(sb) == 1:
        return [((), dt)]
    if len(sa) == 1:
        return [(sb[:-2] + sb[-1:], dt)]
    if len(sb) == 1:
        return [(sa[:-1], dt)]
    batch = rules.broadcast_shapes("Matmul", sa[:-2], sb[:-2])
    return [(batch + (sa[-2], sb[-1]), dt)]


def _mkn(g):
    """(m, k, n) of a matrix product: small, or in large mode past 8M multiply-adds (the
    built-in backends' threshold for threads and tiles)."""
    if g.large:
        return g.integers(150, 260), g.integers(150, 260), g.integers(150, 260)
    return g.integers(1, 6), g.integers(1, 6), g.integers(1, 6)


def _matmul_sample(g, dtype):
    m, k, n = _mkn(g)
    kind = g.choice(["mm", "mv", "vm", "bmm", "bcast"])
    if kind == "mm":
        sa, sb = (m, k), (k, n)
    elif kind == "mv":
        sa, sb = (m, k), (k,)
    elif kind == "vm":
        sa, sb = (k,), (k, n)
    elif kind == "bmm":
        b = g.integers(1, 3)
        sa, sb = (b, m, k), (b, k, n)
    else:
        sa, sb = (2, 1, m, k), (3, k, n)
    return [g.array(sa, dtype, -2, 2), g.array(sb, dtype, -2, 2)], {}


def _matmul_bound(a, b):
    k = a.shape[-1]
    return np.sqrt(k) * np.matmul(np.abs(a), np.abs(b))


defop("Matmul", 2, _matmul_infer, np.matmul, _matmul_sample, dtypes=FHD,
      acc_bound=_matmul_bound, doc="numpy matmul: GEMV, GEMM and batched GEMM")


def _gemm_infer(ins, attrs):
    a, b, c = ins
    dt = rules.check_dtypes("GEMM", ins)
    sa = a.dims[::-1] if attrs.get("transA") else a.dims
    sb = b.dims[::-1] if attrs.get("transB") else b.dims
    if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0]:
        raise ShapeError(f"GEMM: cannot multiply op(A) {sa} by op(B) {sb}")
    out = (sa[0], sb[1])
    rules.broadcast_shapes("GEMM", c.dims, out)
    return [(out, dt)]


def _gemm_ref(a, b, c, alpha=1.0, beta=0.0, transA=False, transB=False):
    a = a.T if transA else a
    b = b.T if transB else b
    return alpha * (a @ b) + beta * c


def _gemm_sample(g, dtype):
    m, k, n = _mkn(g)
    ta, tb = g.choice([False, True]), g.choice([False, True])
    a = g.array((k, m) if ta else (m, k), dtype, -2, 2)
    b = g.array((n, k) if tb else (k, n), dtype, -2, 2)
    c = g.array(g.choice([(m, n), (n,), (1, n)]), dtype, -2, 2)
    return [a, b, c], {"alpha": g.floats(-2, 2), "beta": g.choice([0.0, 1.0, 0.5]),
                       "transA": ta, "transB": tb}


def _gemm_bound(a, b, c, alpha=1.0, beta=0.0, transA=False, transB=False):
    k = a.shape[0] if transA else a.shape[1]
    return np.sqrt(k + 1) * _gemm_ref(np.abs(a), np.abs(b), np.abs(c), abs(alpha), abs(beta),
                                      transA, transB)


defop("GEMM", 3, _gemm_infer, _gemm_ref, _gemm_sample, dtypes=FHD, acc_bound=_gemm_bound,
      doc="out = alpha * op(A) @ op(B) + beta * C (C broadcast to the output; ONNX Gemm)")


def _axpy_infer(ins, attrs):
    a, x, y = ins
    rules.check_dtypes("Axpy", ins)
    if x.dims != y.dims or a.size != 1:
        raise ShapeError(f"Axpy: x {x.dims} and y {y.dims} must match and alpha be one element")
    return [(y.dims, y.dtype_code)]


def _axpy_sample(g, dtype):
    s = g.shape()
    return [g.array((1,), dtype, -2, 2), g.array(s, dtype, -2, 2), g.array(s, dtype, -2, 2)], {}


defop("Axpy", 3, _axpy_infer, lambda a, x, y: a.reshape(()) * x + y, _axpy_sample, dtypes=FHD,
      doc="out = alpha * x + y with alpha a one-element tensor (kept on the device)")

# ---------------------------------------------------------------- shape ops with data movement


def _concat_infer(ins, attrs):
    dt = rules.check_dtypes("Concat", ins)
    first = ins[0].dims
    ax = rules.check_axis("Concat", attrs["axis"], len(first))
    total = 0
    for i, x in enumerate(ins):
        s = x.dims
        if len(s) != len(first) or s[:ax] + s[ax + 1:] != first[:ax] + first[ax + 1:]:
            raise ShapeError(
                f"Concat: input {i} has shape {s}, which differs from input 0 {first} "
                f"outside axis {ax}"
            )
        total += s[ax]
    return [(first[:ax] + (total,) + first[ax + 1:], dt)]


def _concat_sample(g, dtype):
    s = g.shape(min_dims=1)
    ax = g.integers(0, len(s) - 1)
    xs = []
    for _ in range(g.integers(1, 4)):
        si = list(s)
        si[ax] = g.integers(1, 4)
        xs.append(g.array(tuple(si), dtype, -3, 3))
    return xs, {"axis": ax}


defop("Concat", -1, _concat_infer, lambda *xs, axis: np.concatenate(xs, axis), _concat_sample,
      dtypes=NUM, doc="concatenate inputs along attrs['axis']")


def _repeat_infer(ins, attrs):
    x = ins[0]
    ax = rules.check_axis("Repeat", attrs["axis"], len(x.dims))
    reps = attrs["repeats"]
    if len(reps) == 1:
        n = x.dims[ax] * reps[0]
    elif len(reps) == x.dims[ax]:
        n = sum(reps)
    else:
        raise ShapeError(
            f"Repeat: {len(reps)} repeat counts for axis {ax} of length {x.dims[ax]}; give one "
            "count or one per element"
        )
    return [(x.dims[:ax] + (n,) + x.dims[ax + 1:], x.dtype_code)]


def _repeat_sample(g, dtype):
    x = g.array(g.shape(min_dims=1), dtype, -3, 3)
    ax = g.integers(0, x.ndim - 1)
    if x.shape[ax] > 32:  # one count per element of a long axis: from a seeded generator
        per = tuple(int(r) for r in g._rng().integers(0, 3, x.shape[ax]))
    else:
        per = tuple(g.integers(0, 3) for _ in range(x.shape[ax]))
    reps = g.choice([(g.integers(1, 3),), per])
    return [x], {"axis": ax, "repeats": reps}


defop("Repeat", 1, _repeat_infer,
      lambda x, repeats, axis: np.repeat(x, repeats if len(repeats) > 1 else repeats[0], axis),
      _repeat_sample, dtypes=NUM, doc="numpy.repeat along attrs['axis']")


def _take_infer(ins, attrs):
    x, idx = ins
    if idx.dtype_code != _dtype.kInt:
        raise ShapeError("Take: indices must be an int32 tensor")
    ax = rules.check_axis("Take", attrs["axis"], len(x.dims))
    return [(x.dims[:ax] + idx.dims + x.dims[ax + 1:], x.dtype_code)]


def _take_sample(g, dtype):
    x = g.array(g.shape(min_dims=1), dtype, -3, 3)
    ax = g.integers(0, x.ndim - 1)
    # large: a few indices (the output is x's size times the number of indices)
    idx_shape = (g.integers(1, 3),) if g.large else g.shape(max_dims=2)
    idx = g.index_array(idx_shape, x.shape[ax])
    return [x, idx], {"axis": ax}


defop("Take", 2, _take_infer, lambda x, idx, axis: np.take(x, idx, axis), _take_sample,
      dtypes=NUM, doc="gather slices of x at int32 indices along attrs['axis'] (numpy.take)")

__all__ = ["UNARY", "SCALAR", "BINARY"]
