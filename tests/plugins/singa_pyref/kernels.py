"""pyref kernels: element-by-element Python over PyView (a table keyed by op name).

Each kernel reads all inputs before writing, so outputs may alias inputs. Results are computed
in Python floats/ints and rounded once when stored.
"""

from __future__ import annotations

import math

from singa import backend as sb
from singa.backend import kernel_attrs

from .view import convert


def _exp(v):
    try:
        return math.exp(v)
    except OverflowError:
        return math.inf


UNARY = {
    "Neg": lambda v: -v,
    "Abs": abs,
    "ReLU": lambda v: v if v > 0 or v != v else 0,  # NaN propagates (numpy's maximum)
    "Exp": _exp,
    "Square": lambda v: v * v,
}


def _unary(fn):
    def kernel(ins, outs, attrs):
        outs[0].write([fn(v) for v in ins[0].read()])

    return kernel


def _div(a, b, code):
    if sb.NP_DTYPE[code].kind in "iu":
        return math.trunc(a / b)
    try:
        return a / b
    except ZeroDivisionError:  # IEEE 754: +-inf, or NaN for 0/0 and NaN/0
        if a != a or a == 0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


SCALAR = {
    "AddScalar": lambda v, s, code: v + s,
    "SubScalar": lambda v, s, code: v - s,
    "MulScalar": lambda v, s, code: v * s,
    "DivScalar": lambda v, s, code: v / s,
}


def _scalar(fn):
    def kernel(ins, outs, attrs):
        x, out = ins[0], outs[0]
        # like numpy and SINGA, the scalar is first converted to the tensor's dtype
        s = _round_to(x.code, attrs["value"])
        out.write([fn(v, s, x.code) for v in x.read()])

    return kernel


def _round_to(code, value):
    import struct

    from .view import FORMATS

    value = convert(code, value)
    return struct.unpack(FORMATS[code], struct.pack(FORMATS[code], value))[0]


BINARY = {
    "Add": lambda a, b, code: a + b,
    "Sub": lambda a, b, code: a - b,
    "Mul": lambda a, b, code: a * b,
    "Div": _div,
    "Maximum": lambda a, b, code: a if a >= b or a != a else b,  # NaN propagates
}


def _binary(fn):
    def kernel(ins, outs, attrs):
        a, b = ins
        out = outs[0]
        code = out.code
        av = a.read(out.shape)
        bv = b.read(out.shape)
        out.write([fn(x, y, code) for x, y in zip(av, bv)])

    return kernel


def _copy(ins, outs, attrs):
    outs[0].write(ins[0].read())


def _astype(ins, outs, attrs):
    outs[0].write(ins[0].read())  # PyView.write converts (floats round, ints truncate)


def _set_value(ins, outs, attrs):
    out = outs[0]
    out.write([attrs["value"]] * out.size)


@kernel_attrs(contiguous_inputs=True)
def _sum(ins, outs, attrs):
    """Sum over ``axes``; declared contiguous_inputs so the dispatcher's copy path is used."""
    x, out = ins[0], outs[0]
    axes = attrs.get("axes")
    axes = set(range(x.ndim)) if axes is None else set(axes)
    keep = [i for i in range(x.ndim) if i not in axes]
    kept_shape = [x.shape[i] for i in keep]
    acc = [0] * math.prod(kept_shape)
    vals = x.read()
    # walk the row-major index of x and accumulate into the kept coordinates
    idx = [0] * x.ndim
    for v in vals:
        flat = 0
        for i in keep:
            flat = flat * x.shape[i] + idx[i]
        acc[flat] += v
        for d in range(x.ndim - 1, -1, -1):
            idx[d] += 1
            if idx[d] < x.shape[d]:
                break
            idx[d] = 0
    out.write(acc)


@kernel_attrs(dtypes=(sb.kFloat32, sb.kDouble))
def _matmul(ins, outs, attrs):
    """numpy.matmul semantics: 1-D operands are promoted, batch dimensions broadcast."""
    a, b = ins
    out = outs[0]
    sa, sb = a.shape, b.shape
    av, bv = a.read(), b.read()
    if len(sa) == 1:
        sa = (1,) + sa
    if len(sb) == 1:
        sb = sb + (1,)
    m, k = sa[-2], sa[-1]
    n = sb[-1]
    batch_a, batch_b = sa[:-2], sb[:-2]
    nb = max(len(batch_a), len(batch_b))
    batch_a = (1,) * (nb - len(batch_a)) + batch_a
    batch_b = (1,) * (nb - len(batch_b)) + batch_b
    batch = tuple(max(x, y) for x, y in zip(batch_a, batch_b))
    res = []
    for bi in range(math.prod(batch)):
        coords, rem = [], bi
        for d in reversed(batch):
            coords.append(rem % d)
            rem //= d
        coords.reverse()
        oa = ob = 0
        for c, da, db in zip(coords, batch_a, batch_b):
            oa = oa * da + (c if da > 1 else 0)
            ob = ob * db + (c if db > 1 else 0)
        oa *= m * k
        ob *= k * n
        for i in range(m):
            for j in range(n):
                res.append(sum(av[oa + i * k + t] * bv[ob + t * n + j] for t in range(k)))
    out.write(res)


def kernel_table(device) -> dict:
    """``{op_name: kernel}`` for one pyref device."""

    def gaussian(ins, outs, attrs):
        out = outs[0]
        mean, std = attrs["mean"], attrs["std"]
        out.write([device.rng.gauss(mean, std) for _ in range(out.size)])

    def uniform(ins, outs, attrs):
        out = outs[0]
        low, high = attrs["low"], attrs["high"]
        # rounding to float16/float32 may reach `high`; clamp to the largest value below it
        out.write([min(device.rng.uniform(low, high), high) for _ in range(out.size)])

    table = {name: _unary(fn) for name, fn in UNARY.items()}
    table.update({name: _scalar(fn) for name, fn in SCALAR.items()})
    table.update({name: _binary(fn) for name, fn in BINARY.items()})
    table.update(
        {
            "Copy": _copy,
            "AsType": _astype,
            "SetValue": _set_value,
            "Sum": _sum,
            "Matmul": _matmul,
            "Gaussian": gaussian,
            "Uniform": uniform,
        }
    )
    return table
