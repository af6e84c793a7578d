"""Loading and checking ONNX models that may come from strangers.

In order, before anything is computed: parse (truncated or garbage files fail here), refuse
external data outside the model's folder (the path-traversal class of CVE-2024-27318/27319),
check every tensor's stated size against the bytes it holds, refuse opsets newer than the
installed onnx knows, run ``onnx.checker`` in full mode, upgrade opsets older than 11 with
``onnx.version_converter``, and sort the graph (a cycle or a missing input names the node).
Every problem is a :class:`SingaONNXError`.
"""

from __future__ import annotations

import functools
import math
import os

import numpy as np
import onnx
from onnx import TensorProto
from singa.errors import ShapeError, SingaONNXError
from singa.tensor import check_shape

from .handlers._registry import onnx_to_np

__all__ = ["load_model", "check_model", "check_opsets", "known_opsets", "topological_order",
           "MIN_OPSET", "UPGRADE_TO"]

MIN_OPSET = 11  # oldest opset handled natively; older models are upgraded
UPGRADE_TO = 13
MAX_FILE_BYTES = 1 << 31  # protobuf's own limit is 2 GiB

# where each TensorProto data type keeps typed (non-raw) values
_TYPED_FIELD = {
    TensorProto.FLOAT: "float_data", TensorProto.COMPLEX64: "float_data",
    TensorProto.DOUBLE: "double_data", TensorProto.COMPLEX128: "double_data",
    TensorProto.INT64: "int64_data", TensorProto.UINT32: "uint64_data",
    TensorProto.UINT64: "uint64_data", TensorProto.STRING: "string_data",
}


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise SingaONNXError(f"{what} is not a readable ONNX model (truncated or corrupt: "
                             f"{exc}); re-export or re-download it") from None
    return model


def load_model(source, base_dir=None) -> tuple[onnx.ModelProto, str | None]:
    """Parse ``source`` (a path, bytes, or ModelProto) without following external data.

    Returns the model (a private copy) and the folder its external data may come from.
    """
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        return model, base_dir
    if isinstance(source, (bytes, bytearray)):
        return _parse(bytes(source), "the given bytes"), base_dir
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            size = os.path.getsize(path)
            if size > MAX_FILE_BYTES:
                raise SingaONNXError(f"{path}: {size} bytes, over protobuf's 2 GiB limit; "
                                     "store large weights as external data")
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            raise SingaONNXError(f"cannot read ONNX model {path!r}: {exc}") from None
        return _parse(data, path), (base_dir or os.path.dirname(os.path.abspath(path)))
    raise SingaONNXError(f"expected an onnx.ModelProto, bytes or a path, got "
                         f"{type(source).__name__}")


def _all_tensors(graph, where="graph"):
    """(TensorProto, description) for initializers and tensor attributes, subgraphs included."""
    for t in graph.initializer:
        yield t, f"initializer {t.name!r}"
    for sp in graph.sparse_initializer:
        yield sp.values, f"sparse initializer {sp.values.name!r}"
    for node in graph.node:
        for a in node.attribute:
            if a.HasField("t"):
                yield a.t, f"attribute {a.name!r} of node {node.name or node.op_type!r}"
            for t in a.tensors:
                yield t, f"attribute {a.name!r} of node {node.name or node.op_type!r}"
            subs = ([a.g] if a.HasField("g") else []) + list(a.graphs)
            for g in subs:
                yield from _all_tensors(g, f"subgraph of {node.name or node.op_type!r}")


def _external_info(t) -> dict:
    return {e.key: e.value for e in t.external_data}


def _load_external(t, what, base_dir, expected):
    info = _external_info(t)
    loc = info.get("location", "")
    if base_dir is None:
        raise SingaONNXError(f"{what} keeps its data in external file {loc!r}, but the model "
                             "was not loaded from a path; pass the model's path to prepare")
    if not loc or os.path.isabs(loc) or loc.startswith(("\\", "/")) or ":" in loc \
            or ".." in loc.replace("\\", "/").split("/"):
        raise SingaONNXError(f"{what}: external data location {loc!r} is not a plain relative "
                             "path inside the model's folder; refusing to read it")
    root = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(root, loc))
    if os.path.commonpath([root, full]) != root:
        raise SingaONNXError(f"{what}: external data {loc!r} resolves outside the model's "
                             f"folder {root!r} (a symlink?); refusing to read it")
    if not os.path.isfile(full):
        raise SingaONNXError(f"{what}: external data file {loc!r} does not exist in {root!r}")
    try:
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else os.path.getsize(full) - offset
    except ValueError:
        raise SingaONNXError(f"{what}: external data offset/length are not integers") from None
    fsize = os.path.getsize(full)
    if offset < 0 or length < 0 or offset + length > fsize:
        raise SingaONNXError(f"{what}: external data [{offset}, {offset + length}) is outside "
                             f"{loc!r} ({fsize} bytes)")
    if expected is not None and length != expected:
        raise SingaONNXError(f"{what}: external data holds {length} bytes but dims "
                             f"{list(t.dims)} need {expected}")
    with open(full, "rb") as fh:
        fh.seek(offset)
        t.raw_data = fh.read(length)
    del t.external_data[:]
    t.data_location = TensorProto.DEFAULT


def check_tensors(model, base_dir, max_elements: int) -> None:
    """Sizes against contents for every tensor; external data read only from ``base_dir``."""
    for t, what in _all_tensors(model.graph):
        try:  # core's shape rule: non-negative, a product numpy can index
            dims = list(check_shape(list(t.dims), what))
        except ShapeError as exc:
            raise SingaONNXError(f"{exc}; the model file is malformed (re-export it)") from None
        n = math.prod(dims)
        if n > max_elements:
            raise SingaONNXError(f"{what}: dims {dims} hold {n} elements, over the limit of "
                                 f"{max_elements} (pass max_elements to prepare to allow more)")
        np_dt = onnx_to_np(t.data_type) if t.data_type != TensorProto.STRING else None
        if np_dt is None and t.data_type != TensorProto.STRING:
            raise SingaONNXError(f"{what}: data type {t.data_type} is not supported")
        item = np_dt.itemsize if np_dt is not None else None
        if t.data_type in (TensorProto.INT4, TensorProto.UINT4):
            expected: int | None = (n + 1) // 2
        else:
            expected = None if item is None else n * item
        if t.data_location == TensorProto.EXTERNAL:
            _load_external(t, what, base_dir, expected)
            continue
        if t.HasField("raw_data") or t.raw_data:
            if expected is not None and len(t.raw_data) != expected:
                raise SingaONNXError(f"{what}: holds {len(t.raw_data)} bytes but dims {dims} "
                                     f"of type {t.data_type} need {expected}")
            continue
        field = _TYPED_FIELD.get(t.data_type, "int32_data")
        count = len(getattr(t, field))
        if t.data_type in (TensorProto.COMPLEX64, TensorProto.COMPLEX128):
            count //= 2
        if t.data_type in (TensorProto.INT4, TensorProto.UINT4):
            count *= 2
        if count != n and not (t.data_type in (TensorProto.INT4, TensorProto.UINT4)
                               and count == n + 1):
            raise SingaONNXError(f"{what}: holds {count} values but dims {dims} need {n}")


@functools.lru_cache(maxsize=1)
def known_opsets() -> dict:
    """{domain: the newest opset the installed onnx defines} for the operator domains onnx
    versions as a whole (the default one, under both of its names, and ai.onnx.ml)."""
    default = onnx.defs.onnx_opset_version()
    return {"": default, "ai.onnx": default, "ai.onnx.ml": onnx.defs.onnx_ml_opset_version()}


def check_opsets(model: onnx.ModelProto) -> None:
    """Refuse opset imports newer than the installed onnx knows.

    Such a model was written for operator definitions that do not exist here: its ops may
    have changed meaning, and onnx's checker and shape inference pass them unchecked (as
    onnxruntime does, this refuses them instead of guessing). Other domains (onnx's preview
    ones, vendor ops) are left to the op check, which refuses every node outside the default
    domain by name.
    """
    known = known_opsets()
    for o in model.opset_import:
        newest = known.get(o.domain)
        if newest is not None and o.version > newest:
            name = o.domain or "ai.onnx"
            raise SingaONNXError(
                f"the model imports opset {o.version} of domain {name!r}, but the installed "
                f"onnx {onnx.__version__} knows opsets of {name!r} up to {newest}: upgrade "
                f"onnx (pip install -U onnx) to a release that defines opset {o.version}, or "
                f"re-export the model with opset {newest} or older")


def check_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """Opsets known, ``onnx.checker`` in full mode, then the opset upgrade; returns the model
    to use."""
    check_opsets(model)
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception as exc:  # ValidationError, InferenceError, or anything the checker hits
        msg = str(exc).strip().splitlines()
        raise SingaONNXError("the model fails onnx.checker (full check): "
                             + " ".join(msg)[:2000]) from None
    opset = default_opset(model)
    if any(o.domain in ("", "ai.onnx") for o in model.opset_import) and opset < MIN_OPSET:
        resized = {n.output[0]: n.op_type for n in model.graph.node
                   if n.op_type in ("Resize", "Upsample") and n.domain in ("", "ai.onnx")
                   and n.output}
        try:
            model = onnx.version_converter.convert_version(model, UPGRADE_TO)
            onnx.checker.check_model(model)
        except Exception as exc:
            raise SingaONNXError(f"the model uses opset {opset}; upgrading it to opset "
                                 f"{UPGRADE_TO} with onnx.version_converter failed: {exc}; "
                                 "re-export it with opset >= 11") from None
        _keep_asymmetric_resize(model, resized)
    return model


def _keep_asymmetric_resize(model, outputs: dict) -> None:
    """Give the Resize nodes the converter made from Upsample and Resize-10 (``outputs``:
    {output name: the old op}) their old coordinate mapping, which Resize-13's defaults would
    change.

    Before opset 11 an output index i reads input coordinate i / scale (``asymmetric``), and
    nearest mode rounds it down on an upsampled axis and up on a downsampled one (what
    onnxruntime does; Upsample's scales are at least 1); the converter writes neither, so the
    nodes would default to ``half_pixel`` and ``round_prefer_floor``.
    """
    consts = {t.name: t for t in model.graph.initializer}
    consts.update({n.output[0]: a.t for n in model.graph.node if n.op_type == "Constant"
                   for a in n.attribute if a.name == "value"})
    for n in model.graph.node:
        if n.op_type != "Resize" or not n.output or n.output[0] not in outputs:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        if "coordinate_transformation_mode" in attrs:  # a converter that keeps the mapping
            continue
        n.attribute.append(onnx.helper.make_attribute("coordinate_transformation_mode",
                                                      "asymmetric"))
        if attrs.get("mode", b"nearest") != b"nearest":
            continue
        scales = consts.get(n.input[2]) if len(n.input) > 2 else None
        s = onnx.numpy_helper.to_array(scales).reshape(-1) if scales is not None else None
        if outputs[n.output[0]] == "Upsample" or (s is not None and np.all(s >= 1)):
            rounding = "floor"
        elif s is not None and np.all(s <= 1):
            rounding = "ceil"
        else:
            raise SingaONNXError(f"node {n.name or n.output[0]!r}: a nearest Resize before "
                                 "opset 11 whose scales are not constant, or that upsamples "
                                 "some axes and downsamples others, has no opset-13 form "
                                 "(its rounding differs per axis); re-export the model with "
                                 "opset >= 11")
        n.attribute.append(onnx.helper.make_attribute("nearest_mode", rounding))


def default_opset(model) -> int:
    """The model's opset of the default ONNX domain (the installed onnx's newest if it imports
    none).
    """
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return onnx.defs.onnx_opset_version()  # no default-domain import: no default-domain op


def topological_order(graph, known: set) -> list:
    """Nodes in dependency order; a cycle or an input nobody produces names the node."""
    producer = {}
    for i, node in enumerate(graph.node):
        for o in node.output:
            if not o:
                continue
            if o in producer or o in known:
                raise SingaONNXError(f"node {node.name or node.op_type!r} (#{i}): output "
                                     f"{o!r} is already produced elsewhere")
            producer[o] = i
    for i, node in enumerate(graph.node):
        for x in node.input:
            if x and x not in producer and x not in known:
                raise SingaONNXError(f"node {node.name or node.op_type!r} (#{i}): input "
                                     f"{x!r} is not a graph input, initializer or node output")
    deps = [{producer[x] for x in n.input if x in producer} for n in graph.node]
    users: list[list[int]] = [[] for _ in graph.node]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    pending = [len(d) for d in deps]
    ready = [i for i, p in enumerate(pending) if p == 0]
    order = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for u in users[i]:
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    if len(order) != len(graph.node):
        stuck = [graph.node[i].name or graph.node[i].op_type
                 for i, p in enumerate(pending) if p > 0]
        raise SingaONNXError(f"the graph has a cycle through node(s) {stuck[:10]}")
    return [graph.node[i] for i in order]
