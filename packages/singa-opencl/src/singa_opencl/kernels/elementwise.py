"""Elementwise kernels, generated from one table of OpenCL C expressions.

Each entry maps an op to ``(float expression, int expression or None)`` over the input values
``a``, ``b``, ``c`` and the scalar attributes ``v``, ``w`` (see ``cl/elementwise.cl``). One program
per (input dtype, output dtype) holds every op of the table; copies are instantiated on raw bit
types so that they move any dtype.
"""

from __future__ import annotations

import math

import numpy as np
from singa import backend as sb
from singa.backend import OPS

from .._build import BITS_TYPES, CL_TYPES, prelude, read_source
from ._common import EW_LAYOUT, EW_MAXD, bcast_strides, claim, collapse, make_kernel, roundup

EW_SEG = 32  # must match cl/elementwise.cl

_ONE = "(T_C)1"
_ZERO = "(T_C)0"

UNARY = {
    "Abs": ("fabs(a)", "abs(a)"),
    "Neg": ("-a", "-a"),
    # OpenCL's sign(NaN) is 0; numpy's and PyTorch's is NaN
    "Sign": ("(isnan(a) ? a : sign(a))", "(a > 0) - (a < 0)"),
    "Square": ("a * a", "a * a"),
    "Ceil": ("ceil(a)", None),
    "Floor": ("floor(a)", None),
    "Round": ("round(a)", None),
    "RoundE": ("rint(a)", None),
    "Exp": ("exp(a)", None),
    "Log": ("log(a)", None),
    "Sqrt": ("sqrt(a)", None),
    "Reciprocal": (f"{_ONE} / a", None),
    "Erf": ("erf(a)", None),
    "ReLU": (f"a < {_ZERO} ? {_ZERO} : a", "a < 0 ? 0 : a"),
    "Sigmoid": (f"{_ONE} / ({_ONE} + exp(-a))", None),
    "Tanh": ("tanh(a)", None),
    "SoftPlus": (f"fmax(a, {_ZERO}) + log1p(exp(-fabs(a)))", None),
    "SoftSign": (f"a / ({_ONE} + fabs(a))", None),
    "Sin": ("sin(a)", None), "Cos": ("cos(a)", None), "Tan": ("tan(a)", None),
    "Asin": ("asin(a)", None), "Acos": ("acos(a)", None), "Atan": ("atan(a)", None),
    "Sinh": ("sinh(a)", None), "Cosh": ("cosh(a)", None), "Asinh": ("asinh(a)", None),
    "Acosh": ("acosh(a)", None), "Atanh": ("atanh(a)", None),
    "Not": (f"a == {_ZERO}", "a == 0"),
}

SCALAR = {
    "AddScalar": ("a + v", "a + v"),
    "SubScalar": ("a - v", "a - v"),
    "RSubScalar": ("v - a", "v - a"),
    "MulScalar": ("a * v", "a * v"),
    "DivScalar": ("a / v", None),
    "RDivScalar": ("v / a", None),
    "PowScalar": ("pow(a, v)", None),
    "RPowScalar": ("pow(v, a)", None),
    "LTScalar": ("a < v", "a < v"),
    "LEScalar": ("a <= v", "a <= v"),
    "GTScalar": ("a > v", "a > v"),
    "GEScalar": ("a >= v", "a >= v"),
    "EQScalar": ("a == v", "a == v"),
    "NEScalar": ("a != v", "a != v"),
    "MaxScalar": ("EW_MAX(a, v)", "EW_MAX(a, v)"),
    "MinScalar": ("EW_MIN(a, v)", "EW_MIN(a, v)"),
}

BINARY = {
    "Add": ("a + b", "a + b"),
    "Sub": ("a - b", "a - b"),
    "Mul": ("a * b", "a * b"),
    "Div": ("a / b", "EW_DIV(a, b)"),
    "Pow": ("pow(a, b)", None),
    "LT": ("a < b", "a < b"),
    "LE": ("a <= b", "a <= b"),
    "GT": ("a > b", "a > b"),
    "GE": ("a >= b", "a >= b"),
    "EQ": ("a == b", "a == b"),
    "NE": ("a != b", "a != b"),
    "Maximum": ("EW_MAX(a, b)", "EW_MAX(a, b)"),
    "Minimum": ("EW_MIN(a, b)", "EW_MIN(a, b)"),
    "And": ("(a != 0) && (b != 0)", "(a != 0) && (b != 0)"),
    "Or": ("(a != 0) || (b != 0)", "(a != 0) || (b != 0)"),
    "Xor": ("(a != 0) != (b != 0)", "(a != 0) != (b != 0)"),
    "ReLUBackward": (f"a * (T_C)(b > {_ZERO})", "a * (b > 0)"),
}

#: Ops with their own scalar handling or three inputs, and internal helpers.
OTHER = {
    "Clip": ("a < v ? v : (a > w ? w : a)", None),  # v, w = min, max (+-inf when None)
    # v, w = alpha, gamma; comparisons false for NaN, which passes through
    "HardSigmoid": (f"(a * v + w <= {_ZERO} ? {_ZERO} : (a * v + w >= {_ONE} ? {_ONE} : "
                    "a * v + w))", None),
    "HardSwish": (f"(a <= (T_C)-3 ? {_ZERO} : (a >= (T_C)3 ? a : a * (a + (T_C)3) / (T_C)6))",
                  None),
    "HardSigmoidBackward": (f"a * ((b * v + w > {_ZERO} && b * v + w < {_ONE}) ? v : {_ZERO})",
                            None),  # a = dy, b = x
    "HardSwishBackward": (f"a * (b >= (T_C)3 ? {_ONE} : (b > (T_C)-3 ? (b + b + (T_C)3) / "
                          f"(T_C)6 : {_ZERO}))", None),
    "Axpy": ("a * b + c", "a * b + c"),  # a = alpha (broadcast), b = x, c = y
    "Where": ("a != 0 ? b : c", "a != 0 ? b : c"),
    "Fill": ("v", "v"),
    "Copy": ("a", "a"),
}

TABLE = {**UNARY, **SCALAR, **BINARY, **OTHER}


def _source(in_t, out_t, names) -> str:
    lines = [prelude(T=in_t, O=out_t), read_source("elementwise.cl")]
    for name in names:
        f_expr, i_expr = TABLE[name]
        expr = i_expr if in_t.is_int else f_expr
        if expr is not None:
            lines.append(f"EW_KERNEL({name}, {expr})")
    return "\n".join(lines) + "\n"


def _program(device, op: str, in_t, out_t, names=None):
    names = tuple(TABLE) if names is None else names
    return device.programs.program(_source(in_t, out_t, names), op,
                                   f"elementwise[{in_t.name}->{out_t.name}]")


_HEADS = {"contig": [], "flat": [np.int32] * 4, "nd": [np.int32, np.int32, None]}


def _scalar_types(kind: str, sc):
    return _HEADS[kind] + [None, np.int32] * 4 + [sc, sc]


def launch_ew(device, op: str, name: str, in_t, out_t, y, a=None, b=None, c=None,
              v=0, w=0, names=None) -> None:
    """Run elementwise kernel ``name`` writing view ``y`` from views ``a``, ``b``, ``c``.

    Inputs broadcast (numpy rules) to ``y.shape``; every view may be strided or offset.
    """
    n = math.prod(y.shape)
    if n == 0:
        return
    shape = y.shape
    operands = [x if x is not None else y for x in (a, b, c)]
    strides = [y.strides] + [bcast_strides(x, shape) if x is not None else (0,) * len(shape)
                             for x in (a, b, c)]
    cshape, cst = collapse(shape, strides)
    prg = _program(device, op, in_t, out_t, names)
    sc = in_t.scalar
    ls = device.local_size
    bufs = []
    for x in operands:
        bufs += [x.buf, x.offset]
    if len(cshape) <= 1:
        st = [s[0] if s else 0 for s in cst]
        if st[0] == 1 and all(s == 1 or x is None for s, x in zip(st[1:], (a, b, c))):
            k = device.programs.kernel(prg, name + "_contig", _scalar_types("contig", sc))
            device.launch_exact(k, n, y.buf, y.offset, *bufs, v, w)
            return
        k = device.programs.kernel(prg, name + "_flat", _scalar_types("flat", sc))
        device.launch_exact(k, n, st[0], st[1], st[2], st[3], y.buf, y.offset, *bufs, v, w)
        return
    nd = len(cshape)
    if nd > EW_MAXD:
        from singa.backend import KernelError

        raise KernelError(f"{op}: a {nd}-D strided layout exceeds the OpenCL kernels' "
                          f"{EW_MAXD} dims; make the tensor contiguous first")
    lay = np.zeros((), EW_LAYOUT)
    lay["shape"][:nd] = cshape
    for field, s in zip(("sy", "sa", "sb", "sc"), cst):
        lay[field][:nd] = s
    k = device.programs.kernel(prg, name + "_nd", _scalar_types("nd", sc))
    items = n // cshape[-1] * -(-cshape[-1] // EW_SEG)
    device.launch(k, (roundup(items, ls),), (ls,), n, nd, lay, y.buf, y.offset, *bufs, v, w)


def copy_view(device, src, dst) -> None:
    """dst[...] = src (same shape, or src broadcast), moving raw bits of any dtype."""
    if _copy_tiles(device, src, dst):
        return
    t = BITS_TYPES[sb.ITEMSIZE[dst.dtype_code]]
    launch_ew(device, "Copy", "Copy", t, t, dst, src, names=("Copy",))


_TILE = 16  # TP_TILE in cl/movement.cl


def _copy_tiles(device, src, dst) -> bool:
    """Blocked copy for transposes: (batch,) rows x cols where input and output have their
    unit stride on different dims. Returns False when the layout is not such a case."""
    shape = dst.shape
    cshape, (yst, xst) = collapse(shape, [dst.strides, bcast_strides(src, shape)])
    if len(cshape) not in (2, 3) or min(cshape[-2:]) < _TILE:
        return False
    if abs(yst[-1]) == 1 and abs(xst[-1]) == 1 or 0 in xst:
        return False  # rows already contiguous on both sides, or a broadcast
    if len(cshape) == 2:
        cshape, yst, xst = (1,) + cshape, (0,) + yst, (0,) + xst
    from .movement import _program as movement_program

    prg = movement_program(device, "Copy", sb.ITEMSIZE[dst.dtype_code])
    k = device.programs.kernel(prg, "copy_tiles", [np.int32] * 9 + [None, np.int32,
                                                                    None, np.int32])
    b, r, c = cshape
    items = b * -(-r // _TILE) * -(-c // _TILE)
    ls = min(device.local_size, 64)
    device.launch(k, (roundup(items, ls),), (ls,), b, r, c, yst[0], yst[1], yst[2], xst[0],
                  xst[1], xst[2], dst.buf, dst.offset, src.buf, src.offset)
    return True


def fill_view(device, dst, value) -> None:
    t = CL_TYPES[dst.dtype_code]
    launch_ew(device, "SetValue", "Fill", t, t, dst, v=t.scalar(value), names=("Fill",))


def kernels(device) -> dict:
    table = {}

    def ew(name, f_expr_only: bool, scalar_attr=None):
        def body(ins, outs, attrs):
            y = outs[0]
            t = CL_TYPES[y.dtype_code]
            v = attrs["value"] if scalar_attr else 0
            launch_ew(device, name, name, t, t, y, *ins, v=t.scalar(v))

        only = None if not f_expr_only else tuple(d for d in CL_TYPES if d != sb.kInt)
        return make_kernel(device, name, body, claim(device, name, only))

    for name, (_f, i_expr) in {**UNARY, **BINARY}.items():
        table[name] = ew(name, i_expr is None)
    for name, (_f, i_expr) in SCALAR.items():
        table[name] = ew(name, i_expr is None, scalar_attr=True)

    def clip(ins, outs, attrs):
        y = outs[0]
        t = CL_TYPES[y.dtype_code]
        lo, hi = attrs.get("min"), attrs.get("max")
        launch_ew(device, "Clip", "Clip", t, t, y, ins[0],
                  v=t.scalar(-np.inf if lo is None else lo),
                  w=t.scalar(np.inf if hi is None else hi))

    def axpy(ins, outs, attrs):
        alpha, x, yin = ins
        y = outs[0]
        t = CL_TYPES[y.dtype_code]
        launch_ew(device, "Axpy", "Axpy", t, t, y, alpha.with_layout((), ()), x, yin)

    def copy(ins, outs, attrs):
        copy_view(device, ins[0], outs[0])

    def astype(ins, outs, attrs):
        x, y = ins[0], outs[0]
        if x.dtype_code == y.dtype_code:
            copy_view(device, x, y)
            return
        out_dt = y.dtype_code
        if out_dt not in CL_TYPES or (out_dt == sb.kDouble and not device.has_fp64):
            from singa.backend import KernelError

            raise KernelError(f"AsType: cannot cast to {sb.dtype_name(out_dt)} on "
                              f"{device.name}")
        launch_ew(device, "AsType", "Copy", CL_TYPES[x.dtype_code], CL_TYPES[out_dt], y, x,
                  names=("Copy",))

    def set_value(ins, outs, attrs):
        fill_view(device, outs[0], attrs["value"])

    def attributed(name, v_attr, w_attr=None):
        """An op of the OTHER table whose scalars v, w are the attributes of these names."""
        def body(ins, outs, attrs):
            y = outs[0]
            t = CL_TYPES[y.dtype_code]
            launch_ew(device, name, name, t, t, y, *ins,
                      v=t.scalar(attrs[v_attr] if v_attr else 0),
                      w=t.scalar(attrs[w_attr] if w_attr else 0))

        return make_kernel(device, name, body)

    table["Clip"] = make_kernel(device, "Clip", clip)
    table["HardSigmoid"] = attributed("HardSigmoid", "alpha", "gamma")
    table["HardSigmoidBackward"] = attributed("HardSigmoidBackward", "alpha", "gamma")
    table["HardSwish"] = attributed("HardSwish", None)
    table["HardSwishBackward"] = attributed("HardSwishBackward", None)
    table["Axpy"] = make_kernel(device, "Axpy", axpy)
    # copies move raw bits, so every dtype works on every device (float64 without cl_khr_fp64)
    table["Copy"] = make_kernel(device, "Copy", copy, OPS["Copy"].dtypes)
    table["AsType"] = make_kernel(device, "AsType", astype)
    table["SetValue"] = make_kernel(device, "SetValue", set_value)
    return table

