"""Every reduction record that names an ONNX operator (``singa.ops.REDUCTIONS``: its ``onnx``
field) imports and exports through the tables singa-onnx builds from it, against onnxruntime,
and its ONNX form agrees with onnx's own schema of the operator.

Import: one node of the record's ONNX operator at EXPORT_OPSET and at the opset that moved its
``axes`` from an attribute to an input (13 for ReduceSum, 18 for the others), for several axes
and both keepdims, run by ``singa_onnx.prepare`` and by onnxruntime. Export: the record's
autograd Operator on the same input, written by ``singa_onnx.to_onnx`` and run by
onnxruntime, against singa's own forward pass.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from onnx import helper
from singa import autograd, tensor
from singa.ops import REDUCTIONS
from singa_onnx.frontend import EXPORT_OPSET, EXPORTERS
from singa_onnx.handlers import HANDLERS

RECORDS = [d for d in REDUCTIONS.values() if d.onnx is not None]
AXES = [None, [1], [-1], [0, 2]]
pytestmark = pytest.mark.usefixtures("eval_mode")


def _axes_input_since(op_type: str) -> int:
    """The first opset whose ``op_type`` takes ``axes`` as an input (onnx's schema says)."""
    return next(v for v in range(1, onnx.defs.onnx_opset_version() + 1)
                if onnx.defs.has(op_type, v)
                and any(i.name == "axes" for i in onnx.defs.get_schema(op_type, v).inputs))


def _node_model(decl, x, axes, keepdims, opset) -> onnx.ModelProto:
    inputs = ["x"]
    inits = []
    attrs = {"keepdims": keepdims}
    if axes is not None:
        if opset >= _axes_input_since(decl.onnx.op_type):
            inputs.append("axes")
            inits.append(helper.make_tensor("axes", onnx.TensorProto.INT64, [len(axes)], axes))
        else:
            attrs["axes"] = axes
    node = helper.make_node(decl.onnx.op_type, inputs, ["y"], name="n", **attrs)
    graph = helper.make_graph([node], "record",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                             x.shape)],
                              [onnx.ValueInfoProto(name="y")], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_record_imports_through_the_table(decl, axes, keepdims, rng):
    assert decl.onnx.op_type in HANDLERS, f"{decl.op}: no import handler"
    x = rng.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    for opset in sorted({EXPORT_OPSET, _axes_input_since(decl.onnx.op_type)}):
        model = _node_model(decl, x, axes, keepdims, opset)
        onnx.checker.check_model(model, full_check=True)
        (want,) = ort_run(model, {"x": x})
        (got,) = singa_onnx.prepare(model).run({"x": x})
        got = np.asarray(got)
        assert got.shape == want.shape and got.dtype == want.dtype, (opset, got.shape,
                                                                     want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"opset {opset}")


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_record_exports_through_the_table(decl, axes, keepdims, rng):
    cls = getattr(autograd, decl.operator)
    assert cls.__name__ in EXPORTERS, f"{decl.op}: no exporter for {cls.__name__}"
    x = rng.uniform(-3, 3, (2, 3, 4)).astype(np.float32)
    t = tensor.from_numpy(x)
    y = cls(axes, keepdims)(t)[0]
    model = singa_onnx.to_onnx([t], [y])
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == [decl.onnx.op_type]
    (got,) = ort_run(model, {model.graph.input[0].name: x})
    np.testing.assert_allclose(got, tensor.to_numpy(y), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, decl.reference(x, axes, bool(keepdims)), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("decl", RECORDS, ids=lambda d: d.op)
def test_record_form_agrees_with_the_onnx_schema(decl):
    """At EXPORT_OPSET and at the newest opset the operator's attributes are ONNX's reduce
    attributes (``noop_with_empty_axes`` from opset 18, ``axes`` until it became an input),
    all of which the handler reads; keepdims defaults to 1, as the record's autograd function
    does; one data input besides the optional axes."""
    handled = {"axes", "keepdims", "noop_with_empty_axes"}
    assert HANDLERS[decl.onnx.op_type].attrs == handled
    for opset in (EXPORT_OPSET, onnx.defs.onnx_opset_version()):
        schema = onnx.defs.get_schema(decl.onnx.op_type, opset)
        assert "keepdims" in schema.attributes and set(schema.attributes) <= handled, opset
        assert helper.get_attribute_value(schema.attributes["keepdims"].default_value) == 1
        assert [i.name for i in schema.inputs if i.name != "axes"] == ["data"]


def test_each_onnx_operator_is_claimed_once():
    names = [d.onnx.op_type for d in RECORDS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
