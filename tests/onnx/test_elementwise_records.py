"""Every elementwise record that names an ONNX operator (``singa.ops.UNARY``, ``BINARY``: its
``onnx`` field) imports and exports through the tables singa-onnx builds from it, against
onnxruntime, and its ONNX form agrees with onnx's own schema of the operator.

Import: one node of the record's ONNX operator, with attributes drawn from the record's
sampling ranges, run by ``singa_onnx.prepare`` and by onnxruntime. Export: the record's
autograd Operator on the same inputs, written by ``singa_onnx.to_onnx`` and run by
onnxruntime, against singa's own forward pass. Inputs are drawn per record: over its domain
(unary), positive for arithmetic (Div's divisor, Pow's base), small integers for comparisons
(ties included), 0/1 for logic.
"""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from onnx import helper
from singa import autograd, tensor
from singa.ops import BINARY, UNARY
from singa_onnx.frontend import EXPORT_OPSET, EXPORTERS
from singa_onnx.handlers import HANDLERS

RECORDS = [d for d in (*UNARY.values(), *BINARY.values()) if d.onnx is not None]
SHAPES = {1: [(2, 3, 4)], 2: [(2, 3, 4), (4,)]}
pytestmark = pytest.mark.usefixtures("eval_mode")


def _arity(decl) -> int:
    return 1 if decl.op in UNARY else 2


def _rng(decl, what):
    return np.random.default_rng(zlib.crc32(f"{decl.op}/{what}".encode()))


def _inputs(decl) -> list:
    """Float32 inputs for ``decl``'s op (0/1 values where its ONNX operator takes bools)."""
    rng = _rng(decl, "inputs")
    shapes = SHAPES[_arity(decl)]
    if decl.onnx.bools == "all":
        return [rng.integers(0, 2, s).astype(np.float32) for s in shapes]
    if decl.onnx.bools == "out":
        return [rng.integers(-2, 3, s).astype(np.float32) for s in shapes]
    low, high = decl.domain if _arity(decl) == 1 else (0.5, 2.0)
    return [rng.uniform(low, high, s).astype(np.float32) for s in shapes]


def _attrs(decl) -> dict:
    """A value drawn from the record's sampling range for each attribute, by record name."""
    rng = _rng(decl, "attrs")
    return {name: float(np.float32(rng.uniform(lo, hi)))
            for name, _, lo, hi in getattr(decl, "attrs", ())}  # Binary records have none


def _onnx_feeds(decl, xs) -> list:
    return [x.astype(bool) for x in xs] if decl.onnx.bools == "all" else xs


def _node_model(decl, xs, values) -> onnx.ModelProto:
    names = [f"in{i}" for i in range(len(xs))]
    attrs = {name: values[field] for name, field in decl.onnx.attrs}
    node = helper.make_node(decl.onnx.op_type, names, ["out"], name="n", **attrs)
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
              for n, x in zip(names, xs)]
    graph = helper.make_graph([node], "record", inputs, [onnx.ValueInfoProto(name="out")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", EXPORT_OPSET)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def _schema(decl):
    return onnx.defs.get_schema(decl.onnx.op_type, EXPORT_OPSET)


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_record_imports_through_the_table(decl):
    assert decl.onnx.op_type in HANDLERS, f"{decl.op}: no import handler"
    assert HANDLERS[decl.onnx.op_type].attrs == {name for name, _ in decl.onnx.attrs}
    xs = _onnx_feeds(decl, _inputs(decl))
    model = _node_model(decl, xs, _attrs(decl))
    onnx.checker.check_model(model, full_check=True)
    feeds = {f"in{i}": x for i, x in enumerate(xs)}
    (want,) = ort_run(model, feeds)
    (got,) = singa_onnx.prepare(model).run(feeds)
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_record_exports_through_the_table(decl):
    cls = getattr(autograd, decl.operator or decl.op)
    assert cls.__name__ in EXPORTERS, f"{decl.op}: no exporter for {cls.__name__}"
    xs = _inputs(decl)
    ts = [tensor.from_numpy(x) for x in xs]
    y = cls(**_attrs(decl))(*ts)[0]
    model = singa_onnx.to_onnx(ts, [y])
    assert decl.onnx.op_type in {n.op_type for n in model.graph.node}
    feeds = {i.name: x for i, x in zip(model.graph.input, xs)}
    (got,) = ort_run(model, feeds)
    np.testing.assert_allclose(got, tensor.to_numpy(y), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_record_form_agrees_with_the_onnx_schema(decl):
    """The attribute map covers every attribute of the operator at EXPORT_OPSET, ONNX's
    default of each is the record's, and ``bools`` names the tensors the schema types bool."""
    schema = _schema(decl)
    assert set(schema.attributes) == {name for name, _ in decl.onnx.attrs}
    for name, field in decl.onnx.attrs:
        default = helper.get_attribute_value(schema.attributes[name].default_value)
        assert np.float32(default) == np.float32(decl.defaults[field]), (name, default)
    types = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    bool_in = all("tensor(bool)" in types.get(i.type_str, [i.type_str]) and
                  "tensor(float)" not in types.get(i.type_str, [i.type_str])
                  for i in schema.inputs)
    bool_out = all(types.get(o.type_str, [o.type_str]) == ["tensor(bool)"]
                   for o in schema.outputs)
    want = "all" if bool_in else "out" if bool_out else ""
    assert decl.onnx.bools == want
    assert len(schema.inputs) == _arity(decl)


def test_each_onnx_operator_is_claimed_once():
    names = [d.onnx.op_type for d in RECORDS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
