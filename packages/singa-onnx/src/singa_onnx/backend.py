"""Import: :class:`SingaBackend` (an ``onnx.backend.base.Backend``) and :class:`SingaRep`.

``prepare`` validates the model (see :mod:`singa_onnx.validate`), evaluates constant
sub-graphs once on the host (:mod:`singa_onnx.host_eval`), checks that every remaining node has a
handler that understands all its attributes (one error lists every gap), and turns float
initializers into parameter Tensors. ``SingaRep.run`` then executes the nodes through singa's
autograd ops on the chosen device, freeing each intermediate after its last use.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep
from singa import autograd, tensor
from singa import device as device_mod
from singa.errors import DeviceUnavailableError, GraphError, SingaError, SingaONNXError

from . import host_eval, validate
from .handlers import HANDLERS, Context, Fused, onnx_to_np
from .replay import GraphCache, recording_error

__all__ = ["SingaBackend", "SingaRep", "prepare", "run_node", "supports_device"]

DEFAULT_MAX_ELEMENTS = 1 << 28  # 1 GiB of float32 per tensor unless prepare allows more

_RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
               "Bernoulli", "Multinomial", "Dropout"}
# ops whose outputs are host values even when their inputs live on the device
_HOST_RESULT = {"Shape", "Size", "NonZero", "ConstantOfShape", "Range"}

# ops that grow their output from small operands; guarded before the host evaluates them
_GROWING = {"Expand", "Tile", "ConstantOfShape", "Range", "Pad", "OneHot", "Resize",
            "Upsample", "EyeLike", "Concat", "MatMul", "Gemm", "Einsum", "CastLike", "Cast"}

#: A node evaluated on the host (shape arithmetic: the Gather, Unsqueeze, Concat and Div of a
#: channel shuffle's target shape) keeps its last inputs and outputs when both are at most
#: this many bytes, and an eager run that gives it the same inputs again (same input shapes)
#: takes copies of those outputs instead of evaluating it: ShuffleNetV2's export has 337 such
#: nodes, ~10 ms of an eager batch-1 run. ``0`` evaluates every time.
HOST_MEMO_BYTES = 4096


def _resolve_device(dev):
    if dev is None:
        return device_mod.get_default_device()
    if isinstance(dev, str):
        name = dev.lower()
        name = {"cpu": "cpu", "cuda": "cuda:0", "gpu": "cuda:0"}.get(name, name)
        return device_mod.get_device(name)
    return dev


def _attrs_of(node) -> dict:
    out = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            out[a.name] = a  # reported as unsupported by the checks below
            continue
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [s.decode("utf-8", "replace") for s in v]
        elif isinstance(v, onnx.TensorProto):
            v = onnx.numpy_helper.to_array(v)
        out[a.name] = v
    return out


def _np_of_tensor(t: onnx.TensorProto) -> np.ndarray:
    try:
        return onnx.numpy_helper.to_array(t)
    except Exception as exc:
        raise SingaONNXError(f"tensor {t.name!r} cannot be read: {exc}") from None


class _Node:
    """One node of the plan: where its handler, attributes and state live."""

    __slots__ = ("proto", "name", "op_type", "inputs", "outputs", "attrs", "handler",
                 "state", "index", "run_attrs")

    def __init__(self, proto, index):
        self.proto = proto
        self.index = index
        self.name = proto.name or f"{proto.op_type}#{index}"
        self.op_type = proto.op_type
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.attrs = _attrs_of(proto)
        self.handler = HANDLERS.get(proto.op_type)
        self.state = {}
        #: what the handler is called with: the attributes and the number of outputs asked for
        self.run_attrs = {**self.attrs, "__noutputs__": len([o for o in self.outputs if o])}


def _problems(node: _Node) -> list[str]:
    """What about ``node`` singa-onnx cannot run (empty when it can)."""
    p = node.proto
    if p.domain not in ("", "ai.onnx"):
        return [f"{p.op_type} (domain {p.domain!r})"]
    h = node.handler
    if h is None:
        return [f"op {p.op_type}"]
    bad = [f"{p.op_type} attribute {k!r}" for k in node.attrs if k not in h.attrs]
    if h.check is not None and not bad:
        # checks see what the handler will see at run time, the number of outputs included
        bad += [f"{p.op_type} {why}" for why in h.check(dict(node.run_attrs))]
    return bad


def _host_problems(node: _Node) -> list[str]:
    """What about ``node`` cannot be evaluated on the host (empty when it can)."""
    p = node.proto
    if p.domain not in ("", "ai.onnx"):
        return [f"{p.op_type} (domain {p.domain!r})"]
    if p.op_type == "Constant":  # read by _constant_value
        return []
    return host_eval.supports(p.op_type, node.attrs)


def _guard_static(node: _Node, ins: list, max_elements: int) -> None:
    """Refuse constant folding that would create more elements than allowed."""
    def over(n):
        if n > max_elements:
            raise SingaONNXError(f"node {node.name!r}: {node.op_type} would create {n} "
                                 f"elements, over the limit of {max_elements}")

    def prod(s):
        out = 1
        for d in s:
            out *= max(int(d), 0)
        return out

    op = node.op_type
    try:
        if op == "ConstantOfShape":
            over(prod(ins[0].reshape(-1)))
        elif op == "Expand":
            over(max(prod(ins[1].reshape(-1)), 1) * max(ins[0].size, 1))
        elif op == "Tile":
            over(ins[0].size * prod(ins[1].reshape(-1)))
        elif op == "Range":
            s, lim, d = (float(np.asarray(v).reshape(-1)[0]) for v in ins[:3])
            over(int(abs((lim - s) / d)) + 1 if d else 0)
        elif op == "Pad":
            over(ins[0].size + 2 * int(np.abs(ins[1]).sum()) * max(ins[0].size, 1))
        elif op == "OneHot":
            over(ins[0].size * abs(int(np.asarray(ins[1]).reshape(-1)[0])))
        elif op in ("Resize", "Upsample"):
            for v in ins[1:]:
                if v is not None and v.size and v.dtype.kind == "f":
                    over(int(ins[0].size * float(np.prod(np.abs(v)))))
                elif v is not None and v.size:
                    over(prod(v.reshape(-1)))
        elif op == "EyeLike":
            over(ins[0].size)
    except (ValueError, TypeError, IndexError, ZeroDivisionError, OverflowError):
        raise SingaONNXError(f"node {node.name!r}: {op} has malformed operands") from None


class SingaRep(BackendRep):
    """A prepared model: ``run(inputs, last_layers=None, aux_output=())``.

    Attributes: ``dev`` (the device), ``params`` ({initializer name: Tensor}, the trainable
    ones), ``states`` (batch-norm running statistics), ``input_names``, ``output_names``,
    ``is_graph`` (return Tensors instead of numpy arrays; SONNXModel sets it).
    """

    #: {initializer name: Tensor} of the trainable parameters (set by ``prepare``)
    trainable: dict

    def __init__(self, model, dev, nodes, consts, params, input_info, output_info, opset,
                 max_elements):
        super().__init__()
        self.model = model
        self.dev = dev
        self.nodes = nodes
        self.consts = consts
        self.params = params
        self.input_info = input_info
        self.output_info = output_info
        self.input_names = [n for n, _ in input_info]
        self.output_names = [n for n, _ in output_info]
        self.opset = opset
        self.max_elements = max_elements
        self.is_graph = False
        self.scalar_outputs = set()
        self._contexts: dict = {}  # node -> its handler Context (see _context)
        self.types = {}
        self.use_graph = False
        self.recording = False  # a graph is being recorded (see singa_onnx.replay)
        self._graphs = GraphCache(self)
        self._last_use = self._compute_last_use()
        self._fusions = _eager_fusions(nodes, self.output_names)
        self._host_memo: dict = {}  # id(node) -> (inputs' key, outputs), see HOST_MEMO_BYTES

    @property
    def types(self) -> dict:
        """{value name: declared ONNX element type} (set by ``prepare``); handlers see their
        inputs' types as ``ctx.in_types``."""
        return self._types

    @types.setter
    def types(self, value: dict) -> None:
        self._types = value
        self._contexts.clear()  # their in_types came from the old table

    def _context(self, node) -> Context:
        """``node``'s handler context, made on its first run: the device, opset, element limit,
        the node's name, op, state and input types do not change between runs (handlers read
        it; the only thing they change is the state dict, which is the node's anyway)."""
        ctx = self._contexts.get(node)
        if ctx is None:
            ctx = Context(self.dev, self.opset, node.name, node.op_type, node.state,
                          self.max_elements)
            ctx.in_types = [self._types.get(x) for x in node.inputs]
            self._contexts[node] = ctx
        return ctx

    def _compute_last_use(self):
        last = {}
        for i, n in enumerate(self.nodes):
            for x in n.inputs:
                if x:
                    last[x] = i
        return last

    @property
    def states(self) -> dict:
        """Batch-norm running statistics, ``{node name + '/mean' or '/var': Tensor}``."""
        out = {}
        for n in self.nodes:
            for k in ("mean", "var"):
                if k in n.state:
                    out[f"{n.name}/{k}"] = n.state[k]
        return out

    def graph(self, mode: bool = True) -> None:
        """Turn graph mode on or off for :meth:`run` (drops the recorded graphs either way).

        In graph mode the first run with a given input signature (shapes, dtypes,
        ``last_layers``, ``aux_output``, ``singa.autograd.training``) records every device
        operation of the model; later runs with that signature replay them (see
        :mod:`singa_onnx.replay`).
        """
        self._graphs.clear()
        self.use_graph = bool(mode)

    def input_context(self) -> Context:
        """The handler context (device, opset, element limit) in which the inputs are checked and
        converted.
        """
        return Context(self.dev, self.opset, "<inputs>", max_elements=self.max_elements)

    @staticmethod
    def check_input_array(name, v) -> np.ndarray:
        """Input ``name``'s value ``v`` as a numpy array (refusing what singa cannot hold)."""
        arr = np.asarray(v)
        if arr.dtype == object or arr.dtype.kind in "USc":
            raise SingaONNXError(f"input {name!r}: dtype {arr.dtype} is not supported")
        return arr

    def _items(self, inputs) -> list:
        if isinstance(inputs, dict):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise SingaONNXError(f"missing inputs {missing}; the model takes "
                                     f"{self.input_names}")
            return [(n, inputs[n]) for n in self.input_names]
        if isinstance(inputs, (np.ndarray, tensor.Tensor)):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.input_names):
            raise SingaONNXError(f"the model takes {len(self.input_names)} inputs "
                                 f"{self.input_names}, got {len(inputs)}")
        return list(zip(self.input_names, inputs))

    def run(self, inputs, last_layers=None, aux_output=(), **kwargs):
        """Run the model on ``inputs`` (a list in graph-input order, or a dict by name).

        ``last_layers``: run only ``nodes[:last_layers]`` (negative counts from the end) and
        return the outputs of the last node run; ``aux_output``: names of intermediate values
        to return after the outputs. Returns numpy arrays in the declared ONNX types, or
        Tensors when ``is_graph`` is set. With ``use_graph`` (``prepare(..., use_graph=True)``)
        the model is recorded once per input signature and replayed afterwards.
        """
        items = self._items(inputs)
        aux_output = tuple(aux_output)
        if self.use_graph and not self.is_graph:
            names, raw = self._graphs.run_numpy(items, last_layers, aux_output)
        else:
            names, raw = self.run_eager(items, last_layers, aux_output)
        declared = dict(self.output_info)
        n_out = len(names) - len(aux_output)
        outs = []
        for i, (n, v) in enumerate(zip(names, raw)):
            o = self._export(v, declared.get(n) if i < n_out else None)
            if (i < n_out and n in self.scalar_outputs and isinstance(o, np.ndarray)
                    and o.size == 1):
                o = o.reshape(())
            outs.append(o)
        return outs

    def run_eager(self, items, last_layers=None, aux_output=()):
        """Execute the nodes once on ``items`` ([(input name, value)]); returns the names of
        the values asked for (outputs, then ``aux_output``) and the values (Tensors or host
        arrays)."""
        ctx = self.input_context()
        values = dict(self.consts)
        values.update(self.params)
        for name, v in items:
            values[name] = v if isinstance(v, tensor.Tensor) else \
                ctx.tensor(self.check_input_array(name, v))
        nodes = self.nodes if last_layers is None else self.nodes[:last_layers]
        if not nodes and last_layers is not None:
            raise SingaONNXError(f"last_layers={last_layers} leaves no node to run")
        keep = set(self.output_names) | set(aux_output)
        returned = keep if last_layers is None else keep | set(nodes[-1].outputs)
        # inference outside a recording: a node and the activation after it as one fused
        # kernel where the device has it (graph mode fuses them in the recorded graph)
        fusions = {} if autograd.training or self.recording else self._fusions
        skip = -1
        for i, node in enumerate(nodes):
            fuse = fusions.get(i)
            if i == skip:  # the fused kernel of the node before wrote its output
                pass
            elif _aliases(node, returned):
                values[node.outputs[0]] = values[node.inputs[0]]
            elif (fuse is not None and i + 1 < len(nodes) and fuse in self.dev.kernels
                  and node.outputs[0] not in returned
                  and self._run_pair(node, nodes[i + 1], values, fuse)):
                skip = i + 1
            else:
                self._run_node(node, values)
            for x in node.inputs:
                if x and self._last_use.get(x) == i and x not in keep and x not in \
                        self.params and x not in self.consts:
                    values.pop(x, None)
        if last_layers is None:
            names = list(self.output_names)
        else:
            names = [o for o in nodes[-1].outputs if o]
        names += list(aux_output)
        missing = [n for n in names if n not in values]
        if missing:
            raise SingaONNXError(f"values {missing} were not computed (unknown names?)")
        return names, [values[n] for n in names]

    def _export(self, v, elem_type):
        if self.is_graph:
            if isinstance(v, tensor.Tensor):
                return v
            return Context(self.dev, self.opset).tensor(v)
        arr = tensor.to_numpy(v) if isinstance(v, tensor.Tensor) else np.asarray(v)
        dt = onnx_to_np(elem_type) if elem_type else None
        if dt is not None and arr.dtype != dt:
            arr = arr.astype(dt)
        return arr

    def _run_pair(self, node, nxt, values, fuse: str) -> bool:
        """Run ``node`` and ``nxt`` (the only reader of its output) as the fused kernel
        ``fuse``; False (nothing run) when the operands do not fit it. A pair whose second
        op reads only the first's output goes through the first's handler (``__fuse__``:
        the Conv handler); the others (:data:`DIRECT_FUSIONS`) are run here on Tensors of one
        dtype on this device."""
        link = node.outputs[0]
        if (node.op_type, nxt.op_type) not in DIRECT_FUSIONS:
            self._run_node(node, values, fuse)
            values[nxt.outputs[0]] = values.pop(link)
            return True
        k = len(node.inputs)
        ins = [values[x] for x in node.inputs] + [values[x] for x in nxt.inputs if x != link]
        first = ins[0]
        if not all(isinstance(v, tensor.Tensor) and v.device is self.dev
                   and v.dtype == first.dtype for v in ins):
            return False  # host constants, mixed dtypes: the handlers convert them
        # the fused kernels' contract (and the conformance kit's cases): the second op's other
        # operands are as large as the output, the first op's output broadcasts over them
        shape = np.broadcast_shapes(*(tuple(v.shape) for v in ins))
        if any(tuple(v.shape) != shape for v in ins[k:]):
            return False
        try:
            values[nxt.outputs[0]] = Fused(fuse, {})(*ins)[0]
        except (SingaError, ValueError):
            return False  # shapes the ops refuse: their handlers raise the model's error
        return True

    def _run_node(self, node, values, fuse: str | None = None):
        ins = [values[x] if x else None for x in node.inputs]
        while ins and ins[-1] is None:
            ins.pop()
        host = node.op_type not in _RANDOM_OPS
        if host:
            for v in ins:
                if v is not None and not isinstance(v, np.ndarray):
                    host = False
                    break
        if host and node.op_type not in _HOST_RESULT:
            key = _host_key(ins)
            kept = self._host_memo.get(id(node)) if key is not None else None
            if kept is not None and kept[0] == key:
                outs = _copies(kept[1])
            else:
                outs = _evaluate_on_host(node, ins, self.opset, self.max_elements, self.dev)
                if key is not None and all(o is None or o.nbytes <= HOST_MEMO_BYTES
                                           for o in outs):
                    self._host_memo[id(node)] = (key, _copies(outs))
        else:
            ctx = self._context(node)
            attrs = dict(node.run_attrs)  # the handler's own copy
            if fuse is not None:
                attrs["__fuse__"] = fuse
            try:
                outs = node.handler.fn(ctx, attrs, *ins)
            except SingaONNXError:
                raise
            except GraphError as exc:
                if self.recording:
                    raise recording_error(node, exc) from None
                raise SingaONNXError(f"node {node.name!r} ({node.op_type}): {exc}") from None
            except (SingaError, ValueError, TypeError, IndexError, KeyError,
                    ZeroDivisionError, OverflowError, AttributeError) as exc:
                raise SingaONNXError(f"node {node.name!r} ({node.op_type}): {exc}") from None
        if not isinstance(outs, (tuple, list)):
            outs = (outs,)
        for name, v in zip(node.outputs, outs):
            if name:
                values[name] = v


def _host_key(ins) -> tuple | None:
    """What a host node's outputs depend on besides the node: each input's dtype, shape and
    bytes (None: no input); None when they are more than ``HOST_MEMO_BYTES`` in all or hold
    Python objects (then the node is evaluated every time)."""
    key: list = []
    size = 0
    for v in ins:
        if v is None:
            key.append(None)
            continue
        size += v.nbytes
        dt = v.dtype
        if size > HOST_MEMO_BYTES or dt.hasobject:
            return None
        key.append((dt, v.shape, v.tobytes()))  # dtypes compare by what their bytes mean
    return tuple(key)


def _copies(outs) -> list:
    """Copies of a host node's outputs (None stays None): what the memo keeps and what it
    hands on are never the arrays a consumer holds."""
    return [None if o is None else o.copy() for o in outs]


#: (node, the node after it) -> the fused kernel an eager inference run uses for the two (a
#: convolution and its activation: one pass over the output instead of two, and one node's
#: Python less; MobileNetV3-small has 32 such pairs)
EAGER_FUSIONS = {("Conv", "Relu"): "Conv2d+ReLU", ("Conv", "HardSwish"): "Conv2d+HardSwish",
                 ("Sigmoid", "Mul"): "Sigmoid+Mul"}
#: pairs of EAGER_FUSIONS whose second op reads another value too (SiLU, x * sigmoid(x), and
#: sigmoid gates): run_eager calls the fused kernel itself, inputs in its order (the first
#: op's, then the second's others); attribute-less ONNX ops whose semantics are singa's ops'
DIRECT_FUSIONS = frozenset({("Sigmoid", "Mul")})


def _eager_fusions(nodes, output_names) -> dict[int, str]:
    """{index of a node: the fused kernel of it and the next node} for the pairs of
    :data:`EAGER_FUSIONS` where the next node is the only reader of the node's single output
    (run_eager also checks that the output is not asked for and the device has the kernel)."""
    readers: dict[str, int] = {}
    for n in nodes:
        for x in n.inputs:
            if x:
                readers[x] = readers.get(x, 0) + 1
    out = {}
    for i in range(len(nodes) - 1):
        a, b = nodes[i], nodes[i + 1]
        fused = EAGER_FUSIONS.get((a.op_type, b.op_type))
        if fused is None or len(a.outputs) != 1 or len(b.outputs) != 1:
            continue
        reads = (b.inputs == a.outputs if (a.op_type, b.op_type) not in DIRECT_FUSIONS
                 else len(b.inputs) == 2 and b.inputs.count(a.outputs[0]) == 1)
        if reads and readers.get(a.outputs[0]) == 1 and a.outputs[0] not in output_names:
            out[i] = fused
    return out


def _aliases(node, returned: set) -> bool:
    """Whether ``node`` is an Identity whose output may simply name its input's value (no
    op: torch's exporter leaves dozens in a model, EfficientNet-B0 36, each a device copy):
    when neither its input nor its output is returned (a graph output, an ``aux_output``,
    the last node's output with ``last_layers``), so no caller holds two names for one
    Tensor. Inside the model an alias is safe: no handler writes its inputs in place, and a
    recorded graph sees the one block read by the readers of both names."""
    return (node.op_type == "Identity" and len(node.inputs) == 1 and len(node.outputs) == 1
            and bool(node.inputs[0]) and node.inputs[0] not in returned
            and node.outputs[0] not in returned)


def _evaluate_on_host(node, ins, opset, max_elements, dev):
    """A node whose operands are all host values, evaluated on the host by
    :mod:`singa_onnx.host_eval` (numpy, or the op's handler on the CPU device)."""
    _guard_static(node, ins, max_elements)
    try:
        outs = host_eval.evaluate(node, ins, opset, dev.host(), max_elements)
    except SingaONNXError:
        raise
    except Exception as exc:
        raise SingaONNXError(f"node {node.name!r} ({node.op_type}) failed on its constant "
                             f"inputs: {exc}") from None
    for o in outs:
        if isinstance(o, np.ndarray) and o.size > max_elements:
            raise SingaONNXError(f"node {node.name!r}: result of {o.size} elements is over "
                                 f"the limit of {max_elements}")
    return [np.asarray(o) if o is not None else None for o in outs]


def _build(model, dev, max_elements) -> SingaRep:
    graph = model.graph
    opset = validate.default_opset(model)
    init_names = {t.name for t in graph.initializer}
    for sp in graph.sparse_initializer:
        raise SingaONNXError(f"sparse initializer {sp.values.name!r} is not supported")
    input_info = []
    for vi in graph.input:
        if vi.name in init_names:
            continue
        if not vi.type.HasField("tensor_type"):
            raise SingaONNXError(f"graph input {vi.name!r} is not a tensor (sequences, maps "
                                 "and optionals are not supported)")
        input_info.append((vi.name, vi.type.tensor_type.elem_type))
    output_info = [(vo.name, vo.type.tensor_type.elem_type
                    if vo.type.HasField("tensor_type") else 0) for vo in graph.output]
    # outputs declared as scalars: singa may hold a one-element result as shape (1,)
    scalar_outputs = {vo.name for vo in graph.output if vo.type.HasField("tensor_type")
                      and vo.type.tensor_type.HasField("shape")
                      and len(vo.type.tensor_type.shape.dim) == 0}
    known = init_names | {n for n, _ in input_info}
    ordered = validate.topological_order(graph, known)
    nodes = [_Node(p, i) for i, p in enumerate(ordered)]

    # which values are known before running: Constant outputs, initializers (for now), and
    # the outputs of nodes whose operands are all known and not random
    static = set(init_names)
    float_inits = {t.name for t in graph.initializer
                   if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                      onnx.TensorProto.FLOAT16)}
    runtime_nodes, folded = [], []
    trainable, frozen = set(), set()
    # known only at run time, but always host values (shape arithmetic)
    host_valued: set[str] = set()
    on_host = set()  # runtime nodes evaluated on the host (singa_onnx.host_eval)
    for n in nodes:
        if n.op_type == "Constant":
            folded.append(n)
            static.update(o for o in n.outputs if o)
            continue
        operands = [x for x in n.inputs if x]
        # a float initializer read as data by a node that runs is a parameter: its consumers
        # are not constants (they run at run time and stay trainable)
        is_static = n.op_type not in _RANDOM_OPS and all(
            x in static and (x not in float_inits or _static_position(n, x)) for x in operands)
        if is_static and operands:
            folded.append(n)
            static.update(o for o in n.outputs if o)
        else:
            runtime_nodes.append(n)
            if n.op_type in ("Shape", "Size"):
                host_valued.update(o for o in n.outputs if o)
            elif operands and n.op_type not in _RANDOM_OPS and n.op_type not in _HOST_RESULT \
                    and all(x in static or x in host_valued for x in operands) \
                    and not any(x in float_inits and not _static_position(n, x)
                                for x in operands):
                host_valued.update(o for o in n.outputs if o)
                on_host.add(id(n))
            h = n.handler
            for pos, x in enumerate(n.inputs):
                if x in float_inits and h is not None:
                    if pos in h.frozen_inputs:
                        frozen.add(x)
                    elif pos not in h.static_inputs:
                        trainable.add(x)

    problems = []
    for n in runtime_nodes:
        if id(n) in on_host:
            problems += [f"{p} (node {n.name!r})" for p in _host_problems(n)]
            continue
        problems += [f"{p} (node {n.name!r})" for p in _problems(n)]
    for n in folded:
        problems += [f"{p} (node {n.name!r})" for p in _host_problems(n)]
    if problems:
        kinds = sorted({p.split(" (node")[0] for p in problems})
        raise SingaONNXError(f"the model uses {len(kinds)} unsupported op(s)/attribute(s): "
                             + "; ".join(kinds) + ". Where: " + "; ".join(problems[:50]))

    consts = {}
    for t in graph.initializer:
        if t.name not in trainable and t.name not in frozen:
            consts[t.name] = _np_of_tensor(t)
    ctx = Context(dev, opset, "<initializers>", max_elements=max_elements)
    params = {}
    for t in graph.initializer:
        if t.name in trainable or t.name in frozen:
            p = ctx.tensor(_np_of_tensor(t))
            p.name = t.name
            p.requires_grad = t.name in trainable
            p.stores_grad = t.name in trainable
            params[t.name] = p
    values = dict(consts)
    for n in folded:
        if n.op_type == "Constant":
            values[n.outputs[0]] = _constant_value(n)
            continue
        ins = [values.get(x) if x else None for x in n.inputs]
        while ins and ins[-1] is None:
            ins.pop()
        outs = _evaluate_on_host(n, ins, opset, max_elements, dev)
        for name, v in zip(n.outputs, outs):
            if name:
                values[name] = v
    needed = {x for n in runtime_nodes for x in n.inputs if x} | {n for n, _ in output_info}
    consts = {k: v for k, v in values.items() if k in needed and k not in params}
    trainable_params = {k: v for k, v in params.items() if k in trainable}
    rep = SingaRep(model, dev, runtime_nodes, consts, params, input_info, output_info, opset,
                   max_elements)
    rep.trainable = trainable_params
    rep.scalar_outputs = scalar_outputs
    # declared element types (singa holds ints as int32: some ops need the original type)
    types = {t.name: t.data_type for t in graph.initializer}
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type"):
            types[vi.name] = vi.type.tensor_type.elem_type
    for n in folded:
        for o in n.outputs:
            if o in values and isinstance(values[o], np.ndarray):
                try:
                    types[o] = onnx.helper.np_dtype_to_tensor_dtype(values[o].dtype)
                except (KeyError, TypeError, ValueError):
                    pass
    rep.types = types
    return rep


def _static_position(node, name) -> bool:
    h = node.handler
    if h is None:
        return False
    return all(pos in h.static_inputs for pos, x in enumerate(node.inputs) if x == name)


def _constant_value(node):
    a = node.attrs
    for k in ("value", "value_float", "value_int", "value_floats", "value_ints"):
        if k in a:
            v = np.asarray(a[k])
            if k == "value_float" or k == "value_floats":
                v = v.astype(np.float32)
            elif k in ("value_int", "value_ints"):
                v = v.astype(np.int64)
            return v
    raise SingaONNXError(f"node {node.name!r}: Constant with "
                         f"{sorted(a)} (string or sparse values) is not supported")


class SingaBackend(Backend):
    """ONNX backend running models through singa's autograd ops on any singa device."""

    @classmethod
    def prepare(cls, model, device=None, max_elements=DEFAULT_MAX_ELEMENTS, base_dir=None,
                use_graph=False, **kwargs) -> SingaRep:
        """Validate ``model`` (ModelProto, bytes or path) and plan it for ``device``.

        ``device``: "CPU", "CUDA", a singa device name ("opencl:0") or a Device; None (the
        default) is singa's default device (``SINGA_DEVICE``, else the CPU).
        ``max_elements``: the largest tensor the model may create.
        ``use_graph``: record the model's device operations at the first :meth:`SingaRep.run`
        of each input signature and replay them afterwards (faster; see
        :mod:`singa_onnx.replay` for what cannot be replayed).
        """
        m, base = validate.load_model(model, base_dir)
        validate.check_tensors(m, base, max_elements)
        m = validate.check_model(m)
        dev = _resolve_device(device)
        rep = _build(m, dev, max_elements)
        rep.use_graph = bool(use_graph)
        return rep

    @classmethod
    def run_node(cls, node, inputs, device=None, outputs_info=None, opset_version=None,
                 **kwargs):
        """Run one NodeProto on numpy ``inputs``; returns its outputs as numpy arrays."""
        opset = opset_version or onnx.defs.onnx_opset_version()
        names = [x for x in node.input if x]
        if len(names) > len(inputs):
            raise SingaONNXError(f"run_node: {node.op_type} takes {len(names)} inputs, got "
                                 f"{len(inputs)}")
        graph_inputs = [onnx.helper.make_tensor_value_info(
            n, onnx.helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v))
            for n, v in zip(names, inputs)]
        outs = []
        for i, o in enumerate(node.output):
            if not o:
                continue
            et = 0
            if outputs_info is not None and i < len(outputs_info):
                et = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(outputs_info[i][0]))
            outs.append(onnx.helper.make_tensor_value_info(o, et or onnx.TensorProto.FLOAT,
                                                           None))
        graph = onnx.helper.make_graph([node], "run_node", graph_inputs, outs)
        model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("",
                                                                                      opset)])
        validate.check_opsets(model)
        rep = _build(model, _resolve_device(device),
                     kwargs.get("max_elements", DEFAULT_MAX_ELEMENTS))
        return rep.run(list(inputs))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        """Whether a singa backend for ``device`` ("CPU", "CUDA", "opencl", ...) is usable."""
        try:
            _resolve_device(device)
            return True
        except (DeviceUnavailableError, SingaError, ValueError):
            return False


prepare = SingaBackend.prepare
run_node = SingaBackend.run_node
supports_device = SingaBackend.supports_device
