"""Graph mode for imported models: record the device operations once per input signature,
replay them afterwards.

``prepare(model, use_graph=True)`` makes :meth:`SingaRep.run` record the whole imported graph
into a :class:`singa.graph.Graph` at the first call with a given signature (input shapes and
dtypes, ``last_layers``, ``aux_output`` and whether ``singa.autograd.training`` is on) and
replay that graph on later calls with the same signature, with no per-node Python work
(handlers, autograd bookkeeping, shape checks). Host-valued nodes (shape arithmetic on
``Shape`` outputs) are evaluated once while recording: they only depend on the signature.

A model that needs values computed on the device as host values while it runs (a Reshape
whose target shape, or a Slice whose bounds, come from a runtime input or from a computed
tensor) cannot be replayed: recording it raises :class:`singa.errors.SingaONNXError` naming
the node, and ``use_graph=False`` runs it eagerly.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from singa import autograd, tensor
from singa.errors import GraphError, SingaONNXError
from singa.graph import Graph

from .handlers._registry import singa_np_dtype

__all__ = ["GraphCache", "MAX_SIGNATURES"]

#: numpy dtypes singa holds input values in unchanged (the common case skips the conversion)
_HELD = frozenset(np.dtype(d) for d in (np.float32, np.int32) if singa_np_dtype(d) is d)

# recorded graphs kept per SingaRep (each holds its own memory arena); the least recently used
# one is dropped when another signature is recorded
MAX_SIGNATURES = 4


class _Recorded:
    """One recorded signature: the graph, the input placeholders and the output values."""

    __slots__ = ("graph", "placeholders", "natives", "outputs", "out_natives")

    def __init__(self, graph, placeholders, natives, outputs):
        self.graph = graph
        self.placeholders = placeholders
        self.natives = natives
        self.outputs = outputs
        self.out_natives = None  # the output Tensors' device views, after the first replay


class GraphCache:
    """The recorded graphs of one :class:`SingaRep`, keyed by input signature."""

    def __init__(self, rep):
        self.rep = rep
        self.graphs: OrderedDict = OrderedDict()
        self.recordings = 0  # how many times a graph was recorded (tests and diagnostics)

    def clear(self) -> None:
        """Drop every recorded graph (and the memory its arena holds)."""
        for rec in self.graphs.values():
            rec.graph.reset()
        self.graphs.clear()

    def run(self, items, last_layers, aux_output):
        """``(names, values)`` of the model's results for ``items`` ([(name, value)] in
        graph-input order), as :meth:`SingaRep.run_eager` returns them. The value Tensors are
        the recorded graph's: the next replay overwrites them."""
        return self._replay(items, last_layers, aux_output).outputs

    def run_numpy(self, items, last_layers, aux_output):
        """:meth:`run` with the values as host arrays (copies: the next replay does not
        change them). The output Tensors' device views are resolved at the first replay and
        read with the device's own copy (their memory, held by the recording, does not
        move)."""
        rec = self._replay(items, last_layers, aux_output)
        names, values = rec.outputs
        dev = self.rep.dev
        if rec.out_natives is None:
            rec.out_natives = [dev.native(v.data) if isinstance(v, tensor.Tensor) else None
                               for v in values]
        return names, [v if nat is None else dev.native_to_numpy(nat)
                       for nat, v in zip(rec.out_natives, values)]

    def _replay(self, items, last_layers, aux_output) -> _Recorded:
        """Record ``items``' signature if new, copy the inputs in, replay; the recording."""
        rep = self.rep
        ctx = None
        # (name, value to copy in, shape, dtype key)
        arrays: list[tuple[str, tensor.Tensor | np.ndarray, tuple, object]] = []
        sig = []
        for name, v in items:
            if isinstance(v, tensor.Tensor):
                arrays.append((name, v, tuple(v.shape), ("tensor", v.dtype)))
                sig.append(arrays[-1][2:])
                continue
            if type(v) is np.ndarray and v.dtype in _HELD and v.flags.c_contiguous:
                arr = v  # already as singa holds it: what singa_array would return
            else:
                ctx = ctx or rep.input_context()
                arr = ctx.singa_array(rep.check_input_array(name, v))
            arrays.append((name, arr, arr.shape, arr.dtype))
            sig.append((arr.shape, arr.dtype))
        key = (tuple(sig), last_layers, tuple(aux_output), bool(autograd.training))
        rec = self.graphs.get(key)
        if rec is None:
            rec = self._record(arrays, last_layers, aux_output)
            self.graphs[key] = rec
            while len(self.graphs) > MAX_SIGNATURES:
                _, old = self.graphs.popitem(last=False)
                old.graph.reset()
        else:
            self.graphs.move_to_end(key)
        dev = rep.dev
        for ph, nat, (_, v, _, _) in zip(rec.placeholders, rec.natives, arrays):
            if isinstance(v, tensor.Tensor):
                ph.copy_data(v)
            else:  # shape and dtype are the signature's: straight into the device's view
                dev.numpy_into_native(v, nat)
        prev = dev.use_graph(rec.graph)
        try:
            dev.RunGraph()
        finally:
            dev.use_graph(prev)
        return rec

    def _record(self, arrays, last_layers, aux_output) -> _Recorded:
        rep = self.rep
        dev = rep.dev
        ctx = rep.input_context()
        placeholders = []
        for _, v, shape, _ in arrays:
            if isinstance(v, tensor.Tensor):
                ph = tensor.Tensor(shape, dev, v.dtype, requires_grad=False)
            else:
                ph = ctx.tensor(v)
            placeholders.append(ph)
        graph = Graph(dev)
        prev = dev.use_graph(graph)
        was = dev.graph_enabled()
        dev.EnableGraph(True)
        rep.recording = True
        try:
            outs = rep.run_eager(list(zip([a[0] for a in arrays], placeholders)),
                                 last_layers, aux_output)
        except BaseException:
            graph.reset()
            raise
        finally:
            rep.recording = False
            dev.EnableGraph(was)
            dev.use_graph(prev)
        self.recordings += 1
        # the device views of the placeholders that numpy inputs are copied into, resolved
        # once: their memory (held here, written before recording) does not move. A replay
        # writes them with the device's own copy (Device.numpy_into_native), without
        # Tensor.copy_from_numpy's dispatch (~2 us of a batch-1 CNN's ~100); no autograd runs
        # in a replay, so nothing reads the version count that dispatch would bump.
        natives = [None if isinstance(v, tensor.Tensor) else dev.native(ph.data)
                   for ph, (_, v, _, _) in zip(placeholders, arrays)]
        return _Recorded(graph, placeholders, natives, outs)


def recording_error(node, exc: GraphError) -> SingaONNXError:
    """The error for a node that reads device values on the host while a graph records."""
    return SingaONNXError(
        f"node {node.name!r} ({node.op_type}) cannot run in graph mode: it needs values "
        "computed on the device at run time (a shape, bounds, indices or a count that come "
        "from a runtime input or a computed tensor) as host values, and a recorded graph "
        "replays device operations only. Prepare this model with use_graph=False (eager "
        f"execution). ({exc})")
