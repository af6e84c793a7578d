"""Evaluation of host values: nodes whose operands are all known without running the model.

Constant folding (a node fed only by initializers and Constants) and shape arithmetic
(``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``, position ids gathered from a constant)
run here, once at prepare or on numpy values at run time. The ops such graphs are made of are
numpy functions written to the ONNX spec, exact in int64 and bool (singa's tensors hold ints as
int32 and booleans as floats); any other op runs through its singa handler on the host CPU
device. ``tests/onnx/test_host_eval.py`` checks each against onnxruntime.

Each entry of :data:`HOST_OPS` is ``fn(ctx, attrs, *inputs) -> array | tuple`` and the
attributes it reads; a bad operand raises a plain exception, which the caller reports as a
SingaONNXError naming the node.
"""

from __future__ import annotations

import numpy as np

from .handlers import HANDLERS, Context, onnx_to_np

__all__ = ["HOST_OPS", "evaluate", "supports"]

HOST_OPS: dict = {}


def _op(*names, attrs=()):
    def deco(fn):
        for n in names:
            HOST_OPS[n] = (fn, frozenset(attrs))
        return fn

    return deco


def _axes(ctx, attrs, ins, pos, since):
    """Axes given as an attribute (before opset ``since``) or as input ``pos`` (from it)."""
    if ctx.opset < since:
        return attrs.get("axes")
    return ctx.int_list(ins[pos], "input 'axes'") if len(ins) > pos else None


def _indices(ctx, idx, n):
    """Integer indices in [-n, n) as non-negative int64 (ONNX allows negative ones)."""
    if idx.dtype.kind not in "iu":
        raise ctx.refuse("input 'indices'", f"must hold integers, got {idx.dtype}")
    idx = idx.astype(np.int64)
    if idx.size and (idx.max() >= n or idx.min() < -n):
        raise IndexError(f"{ctx.op_type}: indices out of range [-{n}, {n})")
    return np.where(idx < 0, idx + n, idx)


# ---------------------------------------------------------------- elementwise
_UNARY = {"Neg": np.negative, "Abs": np.abs, "Sqrt": np.sqrt, "Floor": np.floor,
          "Ceil": np.ceil, "Reciprocal": np.reciprocal, "Exp": np.exp, "Log": np.log,
          "Sign": np.sign, "Not": np.logical_not, "Identity": np.array}
_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "And": np.logical_and,
           "Or": np.logical_or, "Xor": np.logical_xor, "Equal": np.equal, "Less": np.less,
           "LessOrEqual": np.less_equal, "Greater": np.greater,
           "GreaterOrEqual": np.greater_equal}
_VARIADIC = {"Max": np.maximum, "Min": np.minimum, "Sum": np.add}


def _unary(fn):
    return lambda ctx, attrs, x: np.asarray(fn(x)).astype(
        np.bool_ if x.dtype == np.bool_ else x.dtype, copy=False)


def _binary(fn):
    def f(ctx, attrs, a, b):
        r = fn(a, b)
        return r if r.dtype == np.bool_ else r.astype(a.dtype, copy=False)

    return f


def _variadic(fn):
    def f(ctx, attrs, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return np.asarray(out).astype(xs[0].dtype, copy=False)

    return f


for _n, _f in _UNARY.items():
    _op(_n)(_unary(_f))
for _n, _f in _BINARY.items():
    _op(_n)(_binary(_f))
for _n, _f in _VARIADIC.items():
    _op(_n)(_variadic(_f))


@_op("Div")
def _div(ctx, attrs, a, b):
    """Integer division truncates toward zero (C's, onnxruntime's); floats divide."""
    if a.dtype.kind in "iu":
        q = np.abs(a) // np.abs(b)
        return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)
    return np.true_divide(a, b).astype(a.dtype, copy=False)


@_op("Mod", attrs=("fmod",))
def _mod(ctx, attrs, a, b):
    """fmod=0: the sign of the divisor (Python's %); fmod=1: the sign of the dividend."""
    fn = np.fmod if attrs.get("fmod", 0) else np.mod
    return fn(a, b).astype(a.dtype, copy=False)


@_op("Pow")
def _pow(ctx, attrs, a, b):
    return np.power(a, b.astype(a.dtype) if a.dtype.kind in "iu" else b).astype(a.dtype)


@_op("Where")
def _where(ctx, attrs, c, x, y):
    return np.where(c.astype(np.bool_), x, y)


@_op("Cast", attrs=("to", "saturate"))
def _cast(ctx, attrs, x):
    dt = onnx_to_np(attrs["to"])
    if dt is None or dt.kind in "USO":
        raise TypeError(f"Cast to ONNX type {attrs['to']} is not supported")
    return x.astype(dt)


# ---------------------------------------------------------------- shapes and indexing
@_op("Shape", attrs=("start", "end"))
def _shape(ctx, attrs, x):
    s = x.shape[attrs.get("start", 0):attrs.get("end", None)]
    return np.array(s, np.int64)


@_op("Size")
def _size(ctx, attrs, x):
    return np.array(x.size, np.int64)


@_op("Gather", attrs=("axis",))
def _gather(ctx, attrs, x, idx):
    axis = attrs.get("axis", 0) % max(x.ndim, 1)
    return np.take(x, _indices(ctx, idx, x.shape[axis]), axis=axis)


@_op("GatherElements", attrs=("axis",))
def _gather_elements(ctx, attrs, x, idx):
    axis = attrs.get("axis", 0) % x.ndim
    return np.take_along_axis(x, _indices(ctx, idx, x.shape[axis]), axis=axis)


@_op("Unsqueeze", attrs=("axes",))
def _unsqueeze(ctx, attrs, x, *rest):
    axes = _axes(ctx, attrs, (x, *rest), 1, 13)
    return np.expand_dims(x, tuple(axes))


@_op("Squeeze", attrs=("axes",))
def _squeeze(ctx, attrs, x, *rest):
    axes = _axes(ctx, attrs, (x, *rest), 1, 13)
    return np.squeeze(x, axis=None if axes is None else tuple(axes))


@_op("Concat", attrs=("axis",))
def _concat(ctx, attrs, *xs):
    return np.concatenate(xs, axis=attrs["axis"])


@_op("Reshape", attrs=("allowzero",))
def _reshape(ctx, attrs, x, shape):
    dims = ctx.int_list(shape, "input 'shape'")
    if not attrs.get("allowzero", 0):
        dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


@_op("Flatten", attrs=("axis",))
def _flatten(ctx, attrs, x):
    axis = attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis  # in [-r, r]
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)),
                     int(np.prod(x.shape[axis:], dtype=np.int64)))


@_op("Transpose", attrs=("perm",))
def _transpose(ctx, attrs, x):
    return np.transpose(x, attrs.get("perm"))


@_op("Slice", attrs=("starts", "ends", "axes"))
def _slice(ctx, attrs, x, *rest):
    if ctx.opset < 10:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    else:
        rest = list(rest) + [None] * (4 - len(rest))
        starts, ends, axes, steps = (ctx.int_list(v, f"input '{name}'") for v, name in
                                     zip(rest, ("starts", "ends", "axes", "steps")))
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    key = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        key[a % x.ndim] = slice(s, e, st)  # Python's clamping is ONNX's
    return x[tuple(key)]


@_op("Range")
def _range(ctx, attrs, start, limit, delta):
    s, lim, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    return np.arange(s, lim, d, dtype=start.dtype)


@_op("ConstantOfShape", attrs=("value",))
def _constant_of_shape(ctx, attrs, shape):
    v = np.asarray(attrs.get("value", np.zeros(1, np.float32)))
    return np.full(ctx.int_list(shape, "input 'shape'"), v.reshape(-1)[0], dtype=v.dtype)


@_op("Expand")
def _expand(ctx, attrs, x, shape):
    dims = tuple(ctx.int_list(shape, "input 'shape'"))
    return np.broadcast_to(x, np.broadcast_shapes(x.shape, dims)).copy()


@_op("Tile")
def _tile(ctx, attrs, x, repeats):
    return np.tile(x, ctx.int_list(repeats, "input 'repeats'"))


@_op("NonZero")
def _nonzero(ctx, attrs, x):
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


# ---------------------------------------------------------------- reductions
_REDUCE = {"ReduceSum": (np.sum, 13), "ReduceProd": (np.prod, 18), "ReduceMax": (np.max, 18),
           "ReduceMin": (np.min, 18), "ReduceMean": (np.mean, 18)}


def _reduce(fn, since):
    def f(ctx, attrs, x, *rest):
        axes = _axes(ctx, attrs, (x, *rest), 1, since)
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return x.copy()
            axes = None
        return np.asarray(fn(x, axis=None if axes is None else tuple(axes),
                             keepdims=bool(attrs.get("keepdims", 1)))).astype(x.dtype)

    return f


for _n, (_f, _since) in _REDUCE.items():
    _op(_n, attrs=("axes", "keepdims", "noop_with_empty_axes"))(_reduce(_f, _since))


# ---------------------------------------------------------------- entry points
def supports(op_type: str, attrs) -> list[str]:
    """What about a node of ``op_type`` with ``attrs`` (names) cannot be evaluated on the
    host (empty when it can): the numpy table's attributes, else the handler's."""
    entry = HOST_OPS.get(op_type)
    if entry is not None:
        return [f"{op_type} attribute {k!r}" for k in attrs if k not in entry[1]]
    h = HANDLERS.get(op_type)
    if h is None:
        return [f"op {op_type}"]
    return [f"{op_type} attribute {k!r}" for k in attrs if k not in h.attrs]


def evaluate(node, ins: list, opset: int, host_device, max_elements: int) -> list:
    """Outputs of ``node`` (a planned node: op_type, attrs, outputs, name, state) on the
    numpy values ``ins`` (None for an omitted optional input)."""
    ctx = Context(host_device, opset, node.name, node.op_type, node.state, max_elements)
    entry = HOST_OPS.get(node.op_type)
    if entry is not None:
        outs = entry[0](ctx, node.attrs, *ins)
        outs = outs if isinstance(outs, tuple) else (outs,)
        return [np.asarray(o) for o in outs]
    attrs = {**node.attrs, "__noutputs__": len([o for o in node.outputs if o])}
    # eagerly, also while a graph-mode model records on this device (the host device is the
    # CPU a graph may be recording on): a constant is computed once, at import
    with host_device.record(None):
        outs = HANDLERS[node.op_type].fn(ctx, attrs, *ins)
        outs = outs if isinstance(outs, (tuple, list)) else (outs,)
        return [None if o is None else ctx.host(o) for o in outs]
