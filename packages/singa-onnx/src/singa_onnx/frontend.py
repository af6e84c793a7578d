"""Export: :func:`to_onnx` turns the autograd graph behind some output Tensors into ONNX.

The graph is recovered from the outputs' creators (each op's ``src`` records); parameters
(``stores_grad``) and other leaf tensors that are not listed as inputs become initializers.
Each op is translated by a function in :data:`EXPORTERS`, keyed by the op's class name; those of
the elementwise ops, the axis reductions and the rearrangements come from their records
(``singa.ops.UNARY``, ``BINARY``, ``REDUCTIONS``, ``REARRANGEMENTS``: each names its ONNX
operator), those of the other Operators from the ONNX forms of the functions declared on them
(``singa.autograd.functions.FUNCTIONS``), except the exports written out here.
The result passes ``onnx.checker`` and runs in onnxruntime with the same numbers.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from singa import autograd, tensor
from singa.autograd.functions import FUNCTIONS
from singa.errors import SingaONNXError
from singa.ops import BINARY, REARRANGEMENTS, REDUCTIONS, UNARY, Binary, Unary

__all__ = ["to_onnx", "SingaFrontend", "EXPORTERS", "EXPORT_OPSET"]

EXPORT_OPSET = 17  # what PyTorch writes by default; every current runtime reads it
EXPORT_IR = 8  # the IR version of opset 17

_ONNX_TYPE = {tensor.float32: TensorProto.FLOAT, tensor.float16: TensorProto.FLOAT16,
              tensor.int32: TensorProto.INT32, 3: TensorProto.INT8, 4: TensorProto.DOUBLE,
              5: TensorProto.UINT8}


class _Builder:
    """Collects nodes and initializers while the graph is walked. ``used`` holds the
    (id(op), output index) pairs that some exported op or graph output reads."""

    def __init__(self):
        self.nodes, self.inits = [], []
        self._names: set = set()
        self.used: set = set()

    def fresh(self, base: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.:/-]", "_", base) or "v"
        name, i = base, 1
        while name in self._names:
            name, i = f"{base}_{i}", i + 1
        self._names.add(name)
        return name

    def const(self, base, value, dtype=None) -> str:
        arr = np.asarray(value, dtype=dtype)
        name = self.fresh(base)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, op_type, inputs, outputs, name, **attrs):
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=self.fresh(name),
                                           **attrs))


def _ints(v):
    return np.asarray(list(v), np.int64)


# ------------------------------------------------------------------ per-op exporters
# each: (builder, op, input names, output names) -> None

def _record(form):
    """The exporter of an elementwise record's Operator: one ``form.op_type`` node, with the
    Operator's attributes under their ONNX names; singa's 1/0 tensors are cast to bool where
    the ONNX operator's are (``form.bools``), and its bool result back to float."""

    def export(b, op, ins, outs):
        attrs = {name: getattr(op, field) for name, field in form.attrs}
        if form.bools == "all":
            bools = []
            for i, x in enumerate(ins):
                t = b.fresh(f"{op.name}_in{i}")
                b.node("Cast", [x], [t], f"{op.name}_in{i}", to=TensorProto.BOOL)
                bools.append(t)
            ins = bools
        if not form.bools:
            b.node(form.op_type, ins, outs, op.name, **attrs)
            return
        t = b.fresh(f"{op.name}_bool")
        b.node(form.op_type, ins, [t], op.name, **attrs)
        b.node("Cast", [t], outs, op.name + "_cast", to=TensorProto.FLOAT)

    return export


def _conv(b, op, ins, outs):
    h = op.handle
    pads = op.attrs.get("pads", h.pads)  # (top, bottom, left, right)
    b.node("Conv", ins, outs, op.name, kernel_shape=list(h.kernel), strides=list(h.stride),
           pads=[pads[0], pads[2], pads[1], pads[3]], dilations=list(h.dilation),
           group=h.group)


def _pool(b, op, ins, outs):
    h = op.handle
    pads = op.attrs.get("pads", h.pads)
    kw = dict(kernel_shape=list(h.kernel), strides=list(h.stride),
              pads=[pads[0], pads[2], pads[1], pads[3]])
    if h.is_max_pooling:
        b.node("MaxPool", ins, outs, op.name, **kw)
    else:
        b.node("AveragePool", ins, outs, op.name,
               count_include_pad=int(h.count_include_pad), **kw)


def _batchnorm(b, op, ins, outs):
    mean = b.const(op.name + "_running_mean", op.running_mean.to_numpy())
    var = b.const(op.name + "_running_var", op.running_var.to_numpy())
    b.node("BatchNormalization", ins + [mean, var], outs, op.name,
           epsilon=op.handle.eps, momentum=op.handle.factor)


def _add_bias(b, op, ins, outs):
    x, bias = ins
    if op.axis == 0:
        b.node("Add", [x, bias], outs, op.name)
        return
    col = b.fresh(op.name + "_col")
    b.node("Unsqueeze", [bias, b.const(op.name + "_axes", _ints([1]))], [col], op.name + "_u")
    b.node("Add", [x, col], outs, op.name)


def _slice(b, op, ins, outs):
    st, en, steps, axes = op.args
    extra = [b.const(op.name + "_starts", _ints(st)), b.const(op.name + "_ends", _ints(en)),
             b.const(op.name + "_axes", _ints(axes)), b.const(op.name + "_steps", _ints(steps))]
    b.node("Slice", ins + extra, outs, op.name)


def _reduce(onnx_type):
    """The exporter of a reduction record's Operator: one ``onnx_type`` node with the op's
    axes, as an input or an attribute, whichever the operator takes at EXPORT_OPSET (an input
    from opset 13 for ReduceSum, from 18 for the others)."""
    axes_as_input = any(i.name == "axes"
                        for i in onnx.defs.get_schema(onnx_type, EXPORT_OPSET).inputs)

    def export(b, op, ins, outs):
        axes = list(op.norm_axes)
        if axes_as_input:
            b.node(onnx_type, ins + [b.const(op.name + "_axes", _ints(axes))], outs, op.name,
                   keepdims=int(op.keepdims))
        else:
            b.node(onnx_type, ins, outs, op.name, axes=axes, keepdims=int(op.keepdims))

    return export


#: How an attribute's value is written, by the type onnx's schema gives the attribute
_ATTR_TYPES = {onnx.AttributeProto.INT: int, onnx.AttributeProto.FLOAT: float,
               onnx.AttributeProto.INTS: lambda v: [int(i) for i in v],
               onnx.AttributeProto.FLOATS: lambda v: [float(f) for f in v]}


def _form(form, fallback=None):
    """The exporter of an Operator from its ONNX form (``singa.ops.Onnx``: a rearrangement
    record's, or a function's declared on its Operator class): one ``form.op_type`` node on
    the Operator's inputs. Each Operator attribute that ``form.attrs`` pairs with an ONNX name
    (through ``form.convert``'s function where it names one) is written as a constant int64
    input where onnx's schema has an input of that name at EXPORT_OPSET (Reshape's shape,
    Tile's repeats), else as an attribute of the schema's type (Flatten's axis, Gemm's
    transA). A value of None, or an empty one where ONNX's operand is optional, is left out:
    ONNX's default is what the Operator did (Squeeze's every size-1 axis, Transpose's reversed
    axes). ``form.int64_out``: ONNX's int64 output is cast to singa's int32. An instance that
    ``form.applies`` refuses is written by ``fallback`` (a rearrangement's steps), or refused
    where there is none."""
    schema = onnx.defs.get_schema(form.op_type, EXPORT_OPSET)
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    inputs = {i.name: (pos, i.option == optional) for pos, i in enumerate(schema.inputs)}
    attributes = {name: (_ATTR_TYPES.get(a.type), not a.required)
                  for name, a in schema.attributes.items()}
    convert = dict(form.convert)

    def export(b, op, ins, outs):
        if form.applies is not None and not form.applies(op):
            if fallback is None:
                raise SingaONNXError(f"to_onnx: ONNX's {form.op_type} cannot express this "
                                     f"{type(op).__name__} ({op.name})")
            fallback(b, op, ins, outs)
            return
        extra, attrs = {}, {}
        for name, field in form.attrs:
            value = getattr(op, field)
            optional_operand = inputs[name][1] if name in inputs else attributes[name][1]
            if value is None or isinstance(value, list) and not value and optional_operand:
                continue
            if name in convert:
                value = convert[name](value)
            if name in inputs:
                extra[inputs[name][0]] = b.const(f"{op.name}_{name}",
                                                 np.asarray(value, np.int64))
            else:
                kind = attributes[name][0]
                attrs[name] = value if kind is None else kind(value)
        operands = list(ins)
        for pos in sorted(extra):
            operands += [""] * (pos - len(operands)) + [extra[pos]]
        if not form.int64_out:
            b.node(form.op_type, operands, outs, op.name, **attrs)
            return
        t = b.fresh(op.name + "_i64")
        b.node(form.op_type, operands, [t], op.name, **attrs)
        b.node("Cast", [t], outs, op.name + "_cast", to=TensorProto.INT32)

    return export


def _export_steps(b, op, ins, outs):
    """A rearrangement as the steps its forward ran (``op.layout``: reshape to mid, permute,
    reshape to out), as Reshape, Transpose and Reshape nodes with the shapes of that run."""
    mid, perm, out = op.layout
    x = ins[0]
    steps = [("Reshape", mid), ("Transpose", perm), ("Reshape", out)]
    steps = [(kind, value) for kind, value in steps if value is not None]
    for i, (kind, value) in enumerate(steps):
        y = outs[0] if i == len(steps) - 1 else b.fresh(f"{op.name}:{kind.lower()}")
        if kind == "Reshape":
            b.node(kind, [x, b.const(f"{op.name}_shape", _ints(value))], [y], op.name)
        else:
            b.node(kind, [x], [y], op.name, perm=[int(a) for a in value])
        x = y


def _clip(b, op, ins, outs):
    extra = ["" if op.min is None else b.const(op.name + "_min", np.float32(op.min)),
             "" if op.max is None else b.const(op.name + "_max", np.float32(op.max))]
    while extra and not extra[-1]:
        extra.pop()
    b.node("Clip", ins + extra, outs, op.name)


def _cast(b, op, ins, outs):
    b.node("Cast", ins, outs, op.name, to=_ONNX_TYPE[op.to])


def _embedding(b, op, ins, outs):
    b.node("Gather", [ins[1], ins[0]], outs, op.name, axis=0)


def _dropout(b, op, ins, outs):
    b.node("Dropout", [ins[0], b.const(op.name + "_ratio", np.float32(op.ratio))], outs,
           op.name)


def _pad(b, op, ins, outs):
    b.node("Pad", [ins[0], b.const(op.name + "_pads", _ints(op.pads)),
                   b.const(op.name + "_value", np.float32(op.constant))], outs, op.name,
           mode=op.mode)


def _upsample(b, op, ins, outs):
    b.node("Resize", [ins[0], "", b.const(op.name + "_scales",
                                          np.asarray(op.scales, np.float32))],
           outs, op.name, mode="nearest", coordinate_transformation_mode="asymmetric",
           nearest_mode="floor")


def _where(b, op, ins, outs):
    cond = b.const(op.name + "_cond", op.cond.to_numpy() != 0)
    b.node("Where", [cond] + ins, outs, op.name)


def _unsqueeze(b, op, name, what, axis=0):
    """``name`` with a new axis at ``axis`` (ONNX's recurrent nodes want a direction axis)."""
    out = b.fresh(f"{op.name}_{what}")
    b.node("Unsqueeze", [name, b.const(f"{op.name}_{what}_axes", _ints([axis]))], [out],
           f"{op.name}_{what}")
    return out


def _recurrent_node(b, op, onnx_type, x, r, extra, outs, gates):
    """One ONNX LSTM/GRU node, one direction, over ``x`` (T, B, gates*H), the input already
    projected (the whole-sequence ops take ``xw = x W^T + b``): its W is the identity, which
    hands each column of ``x``, in ONNX's gate order, to its gate. ``r``: R (1, gates*H, H);
    ``extra``: B, sequence_lens, initial_h (and initial_c), each with the direction axis."""
    h = op.hidden_size
    eye = b.const(op.name + "_W", np.eye(gates * h, dtype=np.float32)[None])
    kw = {"linear_before_reset": int(op.attrs["linear_before_reset"])} \
        if onnx_type == "GRU" else {}
    b.node(onnx_type, [x, eye, r] + extra, outs, op.name, hidden_size=h,
           direction="reverse" if op.attrs["reverse"] else "forward", **kw)


def _squeeze1(b, op, y4, out):
    """(T, 1, B, H) -> (T, B, H): ONNX's Y has a direction axis."""
    b.node("Squeeze", [y4, b.const(op.name + "_dir_axis", _ints([1]))], [out],
           op.name + "_squeeze")


def _lstm_seq(b, op, ins, outs):
    """``LSTMSeq`` (gates i, o, f, c, as ONNX's LSTM) as one ONNX LSTM node. ONNX's LSTM gives
    only the last cell state, so when the model reads the cell-state sequence (output 1) the
    steps become a chain of one-step LSTM nodes, whose Y_h and Y_c are joined over time."""
    xw, r, h0, c0 = ins
    r3 = _unsqueeze(b, op, r, "R")
    h, c = _unsqueeze(b, op, h0, "h0"), _unsqueeze(b, op, c0, "c0")
    if (id(op), 1) not in b.used:
        y4 = b.fresh(op.name + "_Y")
        _recurrent_node(b, op, "LSTM", xw, r3, ["", "", h, c], [y4], 4)
        _squeeze1(b, op, y4, outs[0])
        return
    steps = op.seq_len
    hs, cs = [None] * steps, [None] * steps
    for t in range(steps - 1, -1, -1) if op.attrs["reverse"] else range(steps):
        xt = b.fresh(f"{op.name}_x{t}")
        b.node("Slice", [xw, b.const(f"{op.name}_start{t}", _ints([t])),
                         b.const(f"{op.name}_end{t}", _ints([t + 1])),
                         b.const(f"{op.name}_axis{t}", _ints([0]))], [xt], f"{op.name}_x{t}")
        hs[t], cs[t] = b.fresh(f"{op.name}_h{t}"), b.fresh(f"{op.name}_c{t}")
        _recurrent_node(b, op, "LSTM", xt, r3, ["", "", h, c], ["", hs[t], cs[t]], 4)
        h, c = hs[t], cs[t]
    b.node("Concat", hs, [outs[0]], op.name + "_y", axis=0)
    b.node("Concat", cs, [outs[1]], op.name + "_c", axis=0)


def _gru_seq(b, op, ins, outs):
    """``GRUSeq`` (gates z, r, h, as ONNX's GRU) as one ONNX GRU node; its recurrent bias
    ``rb`` is the second half of ONNX's B (the input bias is already in ``xw``)."""
    xw, rw, rb, h0 = ins
    h = op.hidden_size
    bias = b.fresh(op.name + "_B1")
    b.node("Concat", [b.const(op.name + "_Wb", np.zeros(3 * h, np.float32)), rb], [bias],
           op.name + "_B", axis=0)
    extra = [_unsqueeze(b, op, bias, "B"), "", _unsqueeze(b, op, h0, "h0")]
    y4 = b.fresh(op.name + "_Y")
    _recurrent_node(b, op, "GRU", xw, _unsqueeze(b, op, rw, "R"), extra, [y4], 3)
    _squeeze1(b, op, y4, outs[0])


# Relu, Sigmoid, ..., HardSigmoid, Add, ..., Less, ..., And, Not: one exporter per elementwise
# record that names an ONNX operator defined at EXPORT_OPSET, keyed by its Operator's class
_RECORDS: tuple[Unary | Binary, ...] = (*UNARY.values(), *BINARY.values())
_RECORD_EXPORTERS = {(decl.operator or decl.op): _record(decl.onnx)
                     for decl in _RECORDS
                     if decl.onnx is not None
                     and onnx.defs.has(decl.onnx.op_type, EXPORT_OPSET)}
# ReduceSum, ReduceMean, ReduceMax, ReduceMin: one exporter per reduction record that names an
# ONNX operator, keyed by its Operator's class
_REDUCTION_EXPORTERS = {decl.operator: _reduce(decl.onnx.op_type)
                        for decl in REDUCTIONS.values()
                        if decl.onnx is not None and decl.operator}
# Reshape, Flatten, Squeeze, Unsqueeze, Transpose, DepthToSpace, SpaceToDepth: one exporter
# per rearrangement record that names an ONNX operator, keyed by its Operator's class; an
# instance the ONNX operator cannot express is written as the steps of its plan
_REARRANGEMENT_EXPORTERS = {decl.op: _form(decl.onnx, _export_steps)
                            for decl in REARRANGEMENTS.values() if decl.onnx is not None}
# Identity, Elu, ..., Matmul, Gemm, SoftMax, ..., Split, Gather, Tile, Expand, Shape, ArgMax:
# one exporter per function declared on its Operator class with an ONNX form
# (singa.autograd.functions), keyed by the Operator's class
_DECLARED_EXPORTERS = {cls.__name__: _form(decl.onnx) for decl, cls in FUNCTIONS.values()
                       if decl.onnx is not None}

# Written out: each export does more than one node mapped from the Operator's attributes
_WRITTEN_OUT = {
    # the handle's geometry, pads reordered to ONNX's; BN's running statistics as inputs
    "_Conv2d": _conv, "_Pooling2d": _pool, "_BatchNorm2d": _batchnorm,
    # Clip: absent bounds are empty inputs; Cast: singa's dtype code to ONNX's type
    "Clip": _clip, "Cast": _cast,
    # axis 1 adds an Unsqueeze of the bias
    "AddBias": _add_bias,
    # no Function declaration to carry a form: autograd.cat is written out
    "Concat": lambda b, op, i, o: b.node("Concat", i, o, op.name, axis=int(op.ax)),
    # the normalised (starts, ends, steps, axes) tuple, as four inputs in ONNX's order
    "Slice": _slice,
    # Gather with the table and the ids swapped
    "Embedding": _embedding,
    # float32 constant inputs (ratio; pad value), Resize's empty roi and fixed attributes
    "Dropout": _dropout, "Pad": _pad, "UpSample": _upsample,
    # the condition is the op's state, a bool constant before the Operator's inputs
    "Where": _where,
    # several ONNX nodes: the identity W, direction axes, a chain of steps for the cell states
    "LSTMSeq": _lstm_seq, "GRUSeq": _gru_seq,
}

EXPORTERS = {**_RECORD_EXPORTERS, **_REDUCTION_EXPORTERS, **_REARRANGEMENT_EXPORTERS,
             **_DECLARED_EXPORTERS, **_WRITTEN_OUT}


def _value_info(name, t):
    return helper.make_tensor_value_info(name, _ONNX_TYPE.get(t.dtype, TensorProto.FLOAT),
                                         list(t.shape))


class SingaFrontend:
    """SINGA's exporter class; :meth:`singa_to_onnx_model` is :func:`to_onnx`."""

    @staticmethod
    def singa_to_onnx_model(inputs, y, model_name="sonnx"):
        """SINGA's name for [`to_onnx`][singa_onnx.to_onnx]: the ONNX model computing ``y`` from
        ``inputs``.
        """
        return to_onnx(inputs, y, model_name)


def to_onnx(inputs, y, model_name="sonnx") -> onnx.ModelProto:
    """The ONNX model computing ``y`` (a Tensor or list of Tensors) from ``inputs``.

    Run the forward pass on placeholder ``inputs`` first (any values; with
    ``autograd.training`` off batch norm uses its running statistics), then export.
    Parameters and constants behind ``y`` become initializers; the model's inputs are
    ``inputs`` in order, its outputs ``y`` in order. Raises :class:`SingaONNXError` listing
    every op that has no ONNX form (losses, for example).
    """
    ins = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    ys = list(y) if isinstance(y, (list, tuple)) else [y]
    for t in ins + ys:
        if not isinstance(t, tensor.Tensor):
            raise SingaONNXError(f"to_onnx takes singa Tensors, got {type(t).__name__}")
    b = _Builder()
    input_names = {}
    graph_inputs = []
    for i, t in enumerate(ins):
        name = b.fresh(t.name if not t.is_dummy() else f"input_{i}")
        input_names[id(t)] = name
        graph_inputs.append(_value_info(name, t))

    # post-order walk over creators; values are keyed by (id(creator), output index)
    value_name: dict = {}
    order, seen, stack = [], set(), [yy.creator for yy in ys]
    while stack:
        op = stack[-1]
        if id(op) in seen:
            stack.pop()
            continue
        pending = [s for s, _, _, _ in op.src if id(s) not in seen]
        if pending:
            stack.extend(pending)
            continue
        seen.add(id(op))
        stack.pop()
        order.append(op)

    missing = sorted({type(op).__name__ for op in order
                      if not isinstance(op, autograd.Dummy)
                      and type(op).__name__ not in EXPORTERS})
    if missing:
        raise SingaONNXError(f"to_onnx: no ONNX form for autograd op(s) {missing}; export the "
                             "model's forward output, not a loss")

    def name_of(src_op, xid):
        if isinstance(src_op, autograd.Dummy):
            t = src_op.tensor
            key = (id(src_op), 0)
            if key not in value_name:
                if id(t) in input_names:
                    value_name[key] = input_names[id(t)]
                else:
                    arr = tensor.to_numpy(t)
                    value_name[key] = b.const(t.name, arr)
            return value_name[key]
        return value_name[(id(src_op), src_op.y_id2idx[xid])]

    b.used = {(id(s), s.y_id2idx[xid]) for op in order if not isinstance(op, autograd.Dummy)
              for s, xid, _, _ in op.src}
    b.used |= {(id(yy.creator), yy.creator.y_id2idx.get(id(yy), 0)) for yy in ys}
    for yy in ys:  # outputs that are graph inputs or leaves directly
        if isinstance(yy.creator, autograd.Dummy) and id(yy) in input_names:
            value_name[(id(yy.creator), 0)] = input_names[id(yy)]
    for op in order:
        if isinstance(op, autograd.Dummy):
            continue
        in_names = [name_of(s, xid) for s, xid, _, _ in op.src]
        outs = []
        for idx in range(len(op.y_id2idx)):
            n = b.fresh(f"{op.name}:{idx}")
            value_name[(id(op), idx)] = n
            outs.append(n)
        EXPORTERS[type(op).__name__](b, op, in_names, outs)

    graph_outputs: list = []
    for i, yy in enumerate(ys):
        src = yy.creator
        n = name_of(src, id(yy))
        out = b.fresh(f"output_{i}") if n in [o.name for o in graph_outputs] else n
        if out != n:
            b.node("Identity", [n], [out], f"output_{i}")
        graph_outputs.append(_value_info(out, yy))
    graph = helper.make_graph(b.nodes, model_name, graph_inputs, graph_outputs, b.inits)
    model = helper.make_model(graph, producer_name="sonnx",
                              opset_imports=[helper.make_opsetid("", EXPORT_OPSET)])
    model.ir_version = EXPORT_IR
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:
        raise SingaONNXError(f"to_onnx produced a model that fails onnx.checker: {exc}") \
            from None
    return model
