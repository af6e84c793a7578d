"""Elementwise kernels: numpy ufuncs writing into the output view (``out=``)."""

from __future__ import annotations

import math

import numpy as np
from singa.backend import Kernel

from ._expf import exp_neg_parts32, expm1_neg_parts32, neg_pow2_bits
from ._float16 import via_float32
from ._jit import helper, njit, vectorize_float
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


@helper(inline="always")
def relu_scalar(v, zero):
    """ReLU of the float ``v``, ``zero`` its type's 0: numpy's ``maximum(v, 0)`` (NaN stays,
    -0.0 becomes +0.0). The one place ReLU is written: the ReLU and Add+ReLU kernels, the fused
    convolutions' epilogues (:mod:`.conv`, :mod:`.grouped`) and the generated depthwise loops
    (:mod:`.depthwise`) call it, so they give the same bits."""
    return v if (v > zero or v != v) else zero


@njit(nogil=True)
def _relu_loop(x, out):
    """out = max(x, 0) over flat arrays, numpy's maximum per element (NaN stays, -0.0
    becomes +0.0)."""
    zero = x.dtype.type(0)
    for i in range(U(x.size)):
        out[i] = relu_scalar(x[i], zero)


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
        out[i] = relu_scalar(a[i] + b[i], zero)


@njit(nogil=True)
def _add_relu_rows(a, b, out):
    """out[r, j] = max(a[r, j] + b[j], 0): a sum broadcasting b over the rows (a bias)."""
    zero = a.dtype.type(0)
    for r in range(a.shape[0]):
        for j in range(U(a.shape[1])):
            out[r, j] = relu_scalar(a[r, j] + b[j], zero)


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


_f32 = np.float32
#: Elements per block of the one-pass transcendental loops: each block is computed into a
#: scratch buffer of this size (in L1), then copied to the output. Written straight into an
#: output that is the input (graph mode runs activations in place), LLVM's runtime overlap
#: check sent the loop to its scalar version: Erf over 150528 floats 0.06 ms apart, 0.47 ms
#: in place; through the block, 0.07 ms both (AMD Zen 4).
_BLOCK = 1024


@njit(nogil=True, error_model="numpy")
def _sigmoid_loop(x, out, a, mul):
    """out = 1 / (1 + exp(-x)) over flat float32 arrays in one pass (with ``mul``: out = a *
    that, the product rounded as the Mul kernel rounds it), as e / (1 + e) for x < 0
    with e = exp(-|x|) (no overflow) from :func:`._expf.exp_neg_parts32`, 2^-k written as
    float32 bits: only multiplies, adds, selects and one division, which LLVM vectorises
    (numba's math.exp is a scalar libm call here; ``error_model="numpy"`` drops the
    division's zero check, which kept the loop scalar). Relative error under 2e-7 (numpy's
    four passes, the kernel this replaces: 2.4e-7); x <= -104 gives 0; NaN stays."""
    one, zero = _f32(1.0), _f32(0.0)
    n = U(x.size)
    poly = np.empty(_BLOCK, np.float32)
    bits = np.empty(_BLOCK, np.int32)
    scale = bits.view(np.float32)  # 2^-k
    for b0 in range(U(0), n, U(_BLOCK)):
        m = min(U(_BLOCK), n - b0)
        for j in range(m):
            kf, poly[j] = exp_neg_parts32(abs(x[b0 + j]))
            bits[j] = neg_pow2_bits(kf)
        for j in range(m):
            v = x[b0 + j]
            e = scale[j] * poly[j] if abs(v) < _f32(104.0) else zero
            y = (one if v >= zero else e) / (one + e)
            y = y if v == v else v
            poly[j] = a[b0 + j] * y if mul else y
        for j in range(m):  # not written above: out may be x or a (see _BLOCK)
            out[b0 + j] = poly[j]


def _sigmoid(x, out):
    """One numba pass for C-contiguous float32 (measured on 1 thread, AMD Zen 4: 401408
    floats 0.33 -> 0.21 ms, 1152 floats 4 -> 1 us); numpy's four passes otherwise (float64
    keeps numpy's exp, accurate to the kit's float64 tolerance)."""
    if x.dtype == _F32 and _flat(x, out):
        flat = x.reshape(-1)
        _sigmoid_loop(flat, out.reshape(-1), flat, False)
        return
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


@njit(nogil=True, error_model="numpy")
def _erf_loop(x, out):
    """out = erf(x) over flat float32 arrays: the rational approximation of Eigen's float
    erf (odd numerator of degree 13 over even denominator of degree 8, x clamped to [-4, 4],
    where erf rounds to +-1 in float32). Absolute error under 4.5e-7 (measured against
    math.erf on a grid of 2M points of [-6, 6]); -0.0 and NaN stay. Vectorised by LLVM, where
    numba's math.erf is a scalar libm call: 301056 floats 4.6 -> 0.12 ms (AMD Zen 4)."""
    n = U(x.size)
    buf = np.empty(_BLOCK, np.float32)
    for b0 in range(U(0), n, U(_BLOCK)):
        m = min(U(_BLOCK), n - b0)
        for j in range(m):
            v = x[b0 + j]
            c = v if v < _f32(4.0) else _f32(4.0)
            c = c if c > _f32(-4.0) else _f32(-4.0)
            x2 = c * c
            p = x2 * _f32(-2.72614225801306e-10) + _f32(2.77068142495902e-08)
            p = x2 * p + _f32(-2.10102402082508e-06)
            p = x2 * p + _f32(-5.69250639462346e-05)
            p = x2 * p + _f32(-7.34990630326855e-04)
            p = x2 * p + _f32(-2.95459980854025e-03)
            p = x2 * p + _f32(-1.60960333262415e-02)
            q = x2 * _f32(-1.45660718464996e-05) + _f32(-2.13374055278905e-04)
            q = x2 * q + _f32(-1.68282697438203e-03)
            q = x2 * q + _f32(-7.37332916720468e-03)
            q = x2 * q + _f32(-1.42647390514189e-02)
            y = c * p / q
            buf[j] = y if v == v else v
        for j in range(m):
            out[b0 + j] = buf[j]


@njit(nogil=True, error_model="numpy")
def _tanh_loop(x, out):
    """out = tanh(x) over flat float32 arrays in one pass, as ``-sign(x) e / (2 + e)`` with
    e = expm1(-2|x|) from :func:`._expf.expm1_neg_parts32` (``2^-k q + (2^-k - 1)``: for
    |x| < ln2/4 the polynomial's q itself, so small arguments keep their relative accuracy;
    |x| past 43.5 clamps to exp(-87), which rounds tanh to +-1), the sign put back with
    copysign (-0.0 stays -0.0); NaN stays. Only multiplies, adds, selects and one division,
    which LLVM vectorises; numpy's tanh is one libm-speed loop here. Relative error under
    4 ulp (against float64 tanh on 2M points of [-20, 20] and small arguments down to 1e-38:
    tests/backend/test_tanh_cpu.py). Through an L1 block as the Sigmoid loop (see _BLOCK)."""
    one, two = _f32(1.0), _f32(2.0)
    n = U(x.size)
    poly = np.empty(_BLOCK, np.float32)
    bits = np.empty(_BLOCK, np.int32)
    scale = bits.view(np.float32)  # 2^-k
    for b0 in range(U(0), n, U(_BLOCK)):
        m = min(U(_BLOCK), n - b0)
        for j in range(m):
            kf, poly[j] = expm1_neg_parts32(two * abs(x[b0 + j]))
            bits[j] = neg_pow2_bits(kf)
        for j in range(m):
            v = x[b0 + j]
            s = scale[j]
            e = s * poly[j] + (s - one)  # expm1(-2|v|), in (-1, 0]
            y = math.copysign(e / (two + e), v)
            poly[j] = y if v == v else v
        for j in range(m):  # not written above: out may be x (see _BLOCK)
            out[b0 + j] = poly[j]


def _tanh(x, out):
    """The one-pass loop for C-contiguous float32 (and float16, computed in float32 and
    rounded once); numpy's tanh otherwise (float64, strided)."""
    if x.dtype == _F32 and _flat(x, out):
        _tanh_loop(x.reshape(-1), out.reshape(-1))
    elif x.dtype == np.float16:
        tmp = np.ascontiguousarray(x, dtype=np.float32)
        _tanh_loop(tmp.reshape(-1), tmp.reshape(-1))
        out[...] = tmp
    else:
        np.tanh(x, out=out)


def _erf(x, out):
    if x.dtype == _F32 and _flat(x, out):
        _erf_loop(x.reshape(-1), out.reshape(-1))
    elif x.dtype == np.float16:  # rounded once from float32
        tmp = np.ascontiguousarray(x, dtype=np.float32)
        _erf_loop(tmp.reshape(-1), tmp.reshape(-1))
        out[...] = tmp
    elif not out.flags.c_contiguous:  # numba's ufunc ignores a 1-D output's stride
        out[...] = _erf_scalar(x)
    else:
        _erf_scalar(x, out=out)


UNARY = {
    "Abs": np.abs, "Neg": _negative, "Sign": np.sign, "Square": np.square,
    "Ceil": np.ceil, "Floor": np.floor, "Round": _round_half_away, "RoundE": np.rint,
    "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt, "Reciprocal": np.reciprocal,
    "Erf": _erf, "ReLU": _relu, "Sigmoid": _sigmoid, "Tanh": _tanh,
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


@njit(nogil=True)
def _scale_rows_loop(a, s, out):
    """out[r, k] = a[r, k] * s[r] over C-contiguous 2-D arrays: one multiply per element,
    rounded as numpy's broadcast product rounds it."""
    hw = U(a.shape[1])
    fa, fo = a.reshape(-1), out.reshape(-1)
    for r in range(a.shape[0]):
        v = s[r]
        b = U(r) * hw
        for k in range(hw):
            fo[b + k] = fa[b + k] * v


@njit(nogil=True)
def _scale_rows_in_place(a, s):
    """a[r, k] *= s[r]: the loop above when the output is the map itself (graph mode runs
    the gate in place), with one array argument, so that LLVM's overlap check does not send
    it to its scalar loop (8 x 1152 x 7x7 floats: 130 us through the two-array loop in
    place, 45 us out of place or like this)."""
    hw = U(a.shape[1])
    fa = a.reshape(-1)
    for r in range(a.shape[0]):
        v = s[r]
        b = U(r) * hw
        for k in range(hw):
            fa[b + k] *= v


def _gate_rows(a, s, out) -> int:
    """How many rows ``s`` scales when it broadcasts over ``a`` as a gate (s's shape is a's
    first axes, then sides of 1: a (N, C, 1, 1) gate over its (N, C, H, W) map), with a and
    out C-contiguous float arrays of one shape and s contiguous of their dtype; 0 when not."""
    if (s.ndim != a.ndim or s.size >= a.size or s.dtype != a.dtype
            or not s.flags.c_contiguous or not _flat(a, out)):
        return 0
    k = s.ndim
    while k and s.shape[k - 1] == 1:
        k -= 1
    return s.size if s.shape[:k] == a.shape[:k] else 0


def _mul(ins, outs, attrs):
    """a * b; a gate times its map (squeeze-excitation: a (N, C, 1, 1) gate over an
    (N, C, H, W) map, in either order) as one numba pass over the rows: numpy's broadcast
    loop runs one short inner loop per row (1152 x 7x7 at batch 8: 126 -> 51 us; 240 x
    14x14: 84 -> 39 us, AMD Zen 4, 1 thread)."""
    a, b = ins
    out = outs[0]
    for x, gate in ((a, b), (b, a)):
        rows = _gate_rows(x, gate, out)
        if rows:
            if x.ctypes.data == out.ctypes.data:  # in place (one shape: the same elements)
                _scale_rows_in_place(out.reshape(rows, -1), gate.reshape(-1))
            else:
                _scale_rows_loop(x.reshape(rows, -1), gate.reshape(-1), out.reshape(rows, -1))
            return
    np.multiply(a, b, out=out, casting="unsafe")


def _bind_mul(ins, outs, attrs):
    """A gate times its map bound to its arrays (see ``bind`` in docs/plugin-authoring.md):
    :func:`_mul`'s row loop with the views resolved once, None for other products. The
    checks cost ~4 us of a squeeze-excitation gate's 5-15 us at batch 1."""
    a, b = ins
    out = outs[0]
    for x, gate in ((a, b), (b, a)):
        rows = _gate_rows(x, gate, out)
        if rows:
            if x.ctypes.data == out.ctypes.data:
                loop, args = _scale_rows_in_place, (out.reshape(rows, -1), gate.reshape(-1))
            else:
                loop, args = _scale_rows_loop, (x.reshape(rows, -1), gate.reshape(-1),
                                                out.reshape(rows, -1))
            return lambda _ins, _outs, _attrs: loop(*args)
    return None


_mul.bind = _bind_mul


def _pow(ins, outs, attrs):
    """x ** e; an exponent of one element equal to 2 or 3 (GELU's tanh form, exported as
    ``Pow(x, 3.0)``) as products, as onnxruntime computes them: numpy's power with an array
    exponent calls powf per element (GPT-2's GELU: 8 ms against 0.03 ms for two products)."""
    x, e = ins
    out = outs[0]
    if (e.size == 1 and x.dtype == out.dtype == e.dtype and x.dtype.kind == "f"
            and x.size == out.size and not np.shares_memory(x, out)):
        k = float(e.reshape(-1)[0])
        if k in (2.0, 3.0):
            np.multiply(x, x, out=out)
            if k == 3.0:
                np.multiply(out, x, out=out)
            return
    np.power(x, e, out=out, casting="unsafe")


BINARY = {
    "Add": _add, "Sub": _binary(np.subtract), "Mul": _mul,
    "Div": _binary(np.divide), "Pow": _pow, "LT": _binary(np.less),
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


# The hard activations go through an L1 block as the Sigmoid loop does (see _BLOCK): graph
# mode runs them in place, and written straight into their input they ran LLVM's scalar
# loop. HardSwish over 200704 float32 in place: 586 us straight, 25 us through the block
# (out of place 18 and 29 us; AMD Zen 4, 1 thread, kernel call included, 2026-11-26).


@helper(inline="always")
def _map_blocks(value, dy, x, out, alpha, gamma):
    """out[i] = value(dy, x, i, alpha, gamma) over flat arrays, computed a block at a time
    into a scratch block, then copied to out (see the note above: out may be x)."""
    n = U(x.size)
    tmp = np.empty(_BLOCK, out.dtype)
    for b0 in range(U(0), n, U(_BLOCK)):
        m = min(U(_BLOCK), n - b0)
        for j in range(m):
            tmp[j] = value(dy, x, b0 + j, alpha, gamma)
        for j in range(m):
            out[b0 + j] = tmp[j]


@helper(inline="always")
def _hard_sigmoid_at(dy, x, i, a, g):
    """clip(a x + g, 0, 1) at i (NaN stays)."""
    zero, one = x.dtype.type(0), x.dtype.type(1)
    z = x[i] * a + g
    return zero if z <= zero else (one if z >= one else z)


@helper(inline="always")
def hard_swish_scalar(v, ftype):
    """HardSwish of the float ``v`` of type ``ftype`` (``x.dtype.type``): 0 for v <= -3,
    v (v + 3) / 6 between, v for v >= 3 (NaN stays; -inf gives 0, its limit, not -inf * 0),
    rounded as ``v * (v + 3) * (1/6)`` in ``ftype``. The one place HardSwish is written: the
    HardSwish kernel, the fused convolutions' epilogues (:mod:`.conv`, :mod:`.grouped`) and
    the generated depthwise loops (:mod:`.depthwise`) call it, so they give the same bits."""
    zero, three, sixth = ftype(0), ftype(3), ftype(1.0 / 6.0)
    return zero if v <= -three else (v if v >= three else v * (v + three) * sixth)


@helper(inline="always")
def _hard_swish_at(dy, x, i, a, g):
    """:func:`hard_swish_scalar` of x at i."""
    return hard_swish_scalar(x[i], x.dtype.type)


@helper(inline="always")
def _hard_sigmoid_backward_at(dy, x, i, a, g):
    """a dy where 0 < a x + g < 1, else 0 * dy (its sign and NaN kept), at i."""
    zero, one = x.dtype.type(0), x.dtype.type(1)
    z = x[i] * a + g
    return dy[i] * (a if (z > zero and z < one) else zero)


@helper(inline="always")
def _hard_swish_backward_at(dy, x, i, a, g):
    """dy (2 x + 3) / 6 for -3 < x < 3, dy for x >= 3, else 0 * dy, at i."""
    zero, one, three = x.dtype.type(0), x.dtype.type(1), x.dtype.type(3)
    sixth = x.dtype.type(1.0 / 6.0)
    v = x[i]
    return dy[i] * (one if v >= three else ((v + v + three) * sixth if v > -three else zero))


@njit(nogil=True)
def _hard_sigmoid_loop(x, out, alpha, gamma):
    """out = clip(alpha x + gamma, 0, 1) over flat arrays in one pass."""
    _map_blocks(_hard_sigmoid_at, x, x, out, x.dtype.type(alpha), x.dtype.type(gamma))


@njit(nogil=True)
def _hard_swish_loop(x, out):
    """out = HardSwish(x) over flat arrays in one pass."""
    _map_blocks(_hard_swish_at, x, x, out, x.dtype.type(0), x.dtype.type(0))


@njit(nogil=True)
def _hard_sigmoid_backward_loop(dy, x, out, alpha, gamma):
    """out = the gradient of HardSigmoid for dy, over flat arrays in one pass."""
    _map_blocks(_hard_sigmoid_backward_at, dy, x, out, x.dtype.type(alpha),
                x.dtype.type(gamma))


@njit(nogil=True)
def _hard_swish_backward_loop(dy, x, out):
    """out = the gradient of HardSwish for dy, over flat arrays in one pass."""
    _map_blocks(_hard_swish_backward_at, dy, x, out, x.dtype.type(0), x.dtype.type(0))


def _flat_or_copy(kernel):
    """``kernel(ins, outs, attrs)`` running a flat loop: on the arrays themselves when they are
    C-contiguous and of one shape, else on contiguous broadcast copies of the inputs into a
    scratch output (the loops index flat)."""
    def run(ins, outs, attrs):
        out = outs[0]
        if _flat(*ins, out):
            kernel([a.reshape(-1) for a in ins], out.reshape(-1), attrs)
            return
        tmp = np.empty(out.shape, out.dtype)
        flat = [np.ascontiguousarray(np.broadcast_to(a, out.shape), out.dtype).reshape(-1)
                for a in ins]
        kernel(flat, tmp.reshape(-1), attrs)
        out[...] = tmp

    run.__name__ = f"cpu_{kernel.__name__}"
    return run


@_flat_or_copy
def _hard_sigmoid(ins, out, attrs):
    _hard_sigmoid_loop(ins[0], out, attrs["alpha"], attrs["gamma"])


@_flat_or_copy
def _hard_swish(ins, out, attrs):
    _hard_swish_loop(ins[0], out)


@_flat_or_copy
def _hard_sigmoid_backward(ins, out, attrs):
    _hard_sigmoid_backward_loop(ins[0], ins[1], out, attrs["alpha"], attrs["gamma"])


@_flat_or_copy
def _hard_swish_backward(ins, out, attrs):
    _hard_swish_backward_loop(ins[0], ins[1], out)


def _sigmoid_mul(ins, outs, attrs):
    """The fused Sigmoid+Mul of graph mode, a * sigmoid(x) (SiLU, x * sigmoid(x), when a is
    x; a squeeze-excitation gate, sigmoid(x) * a, x of shape (N, C, 1, 1)): one pass for flat
    float32 operands of one shape, else the Sigmoid kernel into a scratch array and the Mul
    kernel (a gate over its map, other broadcasts, other dtypes): either way bitwise what
    the two kernels give, in either order (the product of two numbers commutes)."""
    x, a = ins
    out = outs[0]
    if x.dtype == _F32 and _flat(x, a, out):
        _sigmoid_loop(x.reshape(-1), out.reshape(-1), a.reshape(-1), True)
        return
    s = np.empty(x.shape, x.dtype)
    _SIGMOID([x], [s], attrs)
    _mul([a, s], outs, attrs)


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
_SIGMOID = KERNELS["Sigmoid"]
KERNELS.update(SCALAR)
KERNELS.update(BINARY)
KERNELS["ReLUBackward"] = _relu_backward
KERNELS["Add+ReLU"] = _add_relu
KERNELS["Clip"] = _clip
KERNELS["Sigmoid+Mul"] = _sigmoid_mul
# one numba pass each instead of HardSigmoid's mul, add, clip (and HardSwish's mul after it):
# float16 is computed in float32 and rounded once
for _name, _kernel in (("HardSigmoid", _hard_sigmoid), ("HardSwish", _hard_swish),
                       ("HardSigmoidBackward", _hard_sigmoid_backward),
                       ("HardSwishBackward", _hard_swish_backward)):
    KERNELS[_name] = via_float32(_kernel)
#: The memory-bound passes of a training step (activations, residual adds, their gradients)
#: and the one-pass Sigmoid (also in Sigmoid+Mul), Erf and Tanh loops split across the cores;
#: the other transcendental ones keep numpy's single loop.
for _name in ("ReLU", "ReLUBackward", "Add", "Add+ReLU", "Sub", "Mul", "AddScalar",
              "MulScalar", "Sigmoid", "Sigmoid+Mul", "Erf", "Tanh"):
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


def _bind_hard(loop, *names):
    """The bind of a hard activation's kernel (HardSigmoid, HardSwish): its numba loop on the
    flat views, with the attributes ``names`` resolved once, when the arrays are flat
    float32/float64 (float16 and broadcasts keep the general kernel). A squeeze-excitation
    gate's HardSigmoid, 16 to 576 floats, cost ~6 us per call through the general kernel's
    wrappers (9 calls per MobileNetV3-small inference)."""
    def bind(ins, outs, attrs):
        if not _flat(*ins, outs[0]):
            return None
        args = (*(a.reshape(-1) for a in ins), outs[0].reshape(-1),
                *(attrs[n] for n in names))
        return lambda _ins, _outs, _attrs: loop(*args)

    return bind


def _bind_sigmoid_mul(ins, outs, attrs):
    """Sigmoid+Mul bound to its arrays (see :func:`_bind_add_relu`), float32 below
    PARALLEL_MIN_ITEMS: SiLU (flat operands of one shape) as the one-pass loop on the flat
    views; a squeeze-excitation gate (the sigmoid of an (N, C, 1, 1) x times its (N, C, H, W)
    map, or the other way round) as :func:`_sigmoid_mul`'s two steps, the sigmoid loop into a
    scratch array of x's shape held by the bound kernel and the Mul's row loop bound
    (:func:`_bind_mul`). The same loops on the same values: the general kernel's bits. Its
    checks, views, wrappers and scratch allocation cost ~1.5-5 us of a 10-50 us gate at
    batch 1 (EfficientNet-B0 runs 16 gates and 49 SiLUs per inference)."""
    x, a = ins
    out = outs[0]
    if x.dtype != _F32 or out.size >= PARALLEL_MIN_ITEMS:
        return None
    loop = _sigmoid_loop.serial()
    if _flat(x, a, out):
        args = (x.reshape(-1), out.reshape(-1), a.reshape(-1), True)
        return lambda _ins, _outs, _attrs: loop(*args)
    if not x.flags.c_contiguous:
        return None
    s = np.empty(x.shape, x.dtype)
    mul = _bind_mul([a, s], outs, attrs)
    if mul is None:
        return None
    flat = x.reshape(-1)
    sig_args = (flat, s.reshape(-1), flat, False)

    def gate(_ins, _outs, _attrs):
        loop(*sig_args)
        mul(None, None, None)

    return gate


KERNELS["Add+ReLU"].bind = _bind_add_relu
KERNELS["ReLU"].bind = _bind_relu
KERNELS["Sigmoid+Mul"].bind = _bind_sigmoid_mul
KERNELS["HardSigmoid"] = Kernel(KERNELS["HardSigmoid"],
                                bind=_bind_hard(_hard_sigmoid_loop, "alpha", "gamma"))
KERNELS["HardSwish"] = Kernel(KERNELS["HardSwish"], bind=_bind_hard(_hard_swish_loop))
