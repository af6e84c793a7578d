"""Every rearrangement record that names an ONNX operator (``singa.ops.REARRANGEMENTS``: its
``onnx`` field) exports through the exporter singa-onnx builds from it and imports through
the handler of its operator, against onnxruntime, and its ONNX form agrees with onnx's schema.

Export: the record's autograd Operator on a few inputs, written by ``singa_onnx.to_onnx`` and
run by onnxruntime, against singa's forward pass and the record's numpy form. Import: one
node of the operator at EXPORT_OPSET and at opset 11 (where Squeeze's and Unsqueeze's axes are
attributes, not inputs), run by ``singa_onnx.prepare`` and by onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from onnx import helper
from singa import autograd, tensor
from singa.ops import REARRANGEMENTS
from singa_onnx.frontend import EXPORT_OPSET, EXPORTERS
from singa_onnx.handlers import HANDLERS

RECORDS = [d for d in REARRANGEMENTS.values() if d.onnx is not None]
pytestmark = pytest.mark.usefixtures("eval_mode")

# op -> [(x shape, constructor arguments)], the forms an exporter writes differently
EXPORT_CASES = {
    "Reshape": [((2, 3, 4), ([4, 6],)), ((2, 3, 4), ([0, -1],)), ((1,), ([],))],
    "Flatten": [((2, 3, 4), ()), ((2, 3, 4), (0,)), ((2, 3, 4), (-1,))],
    "Squeeze": [((1, 3, 1), ()), ((1, 3, 1), ([2],)), ((1, 3, 1), ([0, -1],))],
    "Unsqueeze": [((2, 3), (0,)), ((2, 3), ([-1, 1],))],
    "Transpose": [((2, 3, 4), ()), ((2, 3, 4), ([1, 2, 0],)), ((2, 3, 4), ([-1, 0, -2],))],
    "DepthToSpace": [((2, 8, 2, 3), (2,)), ((2, 8, 2, 3), (2, "CRD"))],
    "SpaceToDepth": [((2, 2, 4, 6), (2,)), ((2, 2, 4, 6), (2, "DCR"))],
}
# forms the ONNX operator cannot express, exported as their steps: (x shape, arguments, nodes)
STEP_CASES = {
    "SpaceToDepth": [((2, 2, 4, 6), (2, "CRD"), ["Reshape", "Transpose", "Reshape"]),
                     ((1, 3, 2, 2), (2, "crd"), ["Reshape", "Transpose", "Reshape"])],
}
# op -> [(x shape, ONNX attributes or inputs by name)]
IMPORT_CASES = {
    "Reshape": [((2, 3, 4), {"shape": [4, -1]}), ((2, 3, 4), {"shape": [0, 12]})],
    "Flatten": [((2, 3, 4), {}), ((2, 3, 4), {"axis": 2}), ((2, 3, 4), {"axis": -3})],
    "Squeeze": [((1, 3, 1), {}), ((1, 3, 1), {"axes": [-1]})],
    "Unsqueeze": [((2, 3), {"axes": [0]}), ((2, 3), {"axes": [1, -1]})],
    "Transpose": [((2, 3, 4), {}), ((2, 3, 4), {"perm": [2, 0, 1]})],
    "DepthToSpace": [((1, 8, 2, 3), {"blocksize": 2}),
                     ((1, 8, 2, 3), {"blocksize": 2, "mode": "CRD"})],
    "SpaceToDepth": [((1, 2, 4, 6), {"blocksize": 2})],
}


def _id(v):
    return v.op if hasattr(v, "op") else str(v)


def test_every_record_has_cases():
    assert set(EXPORT_CASES) == set(IMPORT_CASES) == {d.op for d in RECORDS}


@pytest.mark.parametrize("decl,shape,args", [(d, *c) for d in RECORDS
                                             for c in EXPORT_CASES[d.op]], ids=_id)
def test_record_exports_through_the_table(decl, shape, args, rng):
    cls = getattr(autograd, decl.op)
    assert decl.op in EXPORTERS, f"{decl.op}: no exporter"
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    t = tensor.from_numpy(x)
    y = cls(*args)(t)[0]
    model = singa_onnx.to_onnx([t], [y])
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == [decl.onnx.op_type]
    (got,) = ort_run(model, {model.graph.input[0].name: x})
    np.testing.assert_array_equal(got, tensor.to_numpy(y))
    np.testing.assert_array_equal(got, decl.numpy(x, *args))


@pytest.mark.parametrize("op,shape,args,nodes", [(op, *c) for op, cases in STEP_CASES.items()
                                                 for c in cases])
def test_forms_onnx_lacks_export_as_their_steps(op, shape, args, nodes, rng):
    """ONNX's SpaceToDepth is DCR only: the CRD one (once exported silently as a DCR node,
    a different model) is written as Reshape, Transpose, Reshape, run by onnxruntime against
    singa's forward, the record's numpy form, and the inverse of DepthToSpace's CRD."""
    decl = REARRANGEMENTS[op]
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    t = tensor.from_numpy(x)
    y = getattr(autograd, op)(*args)(t)[0]
    model = singa_onnx.to_onnx([t], [y])
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == nodes
    (got,) = ort_run(model, {model.graph.input[0].name: x})
    np.testing.assert_array_equal(got, tensor.to_numpy(y))
    np.testing.assert_array_equal(got, decl.numpy(x, *args))
    back = REARRANGEMENTS["DepthToSpace"].numpy(got, args[0], "CRD")
    np.testing.assert_array_equal(back, x)


def _node_model(decl, shape, given, opset) -> onnx.ModelProto:
    schema = onnx.defs.get_schema(decl.onnx.op_type, opset)
    as_inputs = {i.name for i in schema.inputs}
    inputs, inits, attrs = ["x"], [], {}
    for name, value in given.items():
        if name in as_inputs:
            inputs.append(name)
            inits.append(helper.make_tensor(name, onnx.TensorProto.INT64, [len(value)], value))
        else:
            attrs[name] = value
    node = helper.make_node(decl.onnx.op_type, inputs, ["y"], name="n", **attrs)
    graph = helper.make_graph([node], "record",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                             shape)],
                              [onnx.ValueInfoProto(name="y")], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


@pytest.mark.parametrize("opset", [11, EXPORT_OPSET])
@pytest.mark.parametrize("decl,shape,given", [(d, *c) for d in RECORDS
                                              for c in IMPORT_CASES[d.op]], ids=_id)
def test_record_imports_through_the_handler(decl, shape, given, opset, rng):
    assert decl.onnx.op_type in HANDLERS, f"{decl.op}: no import handler"
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    model = _node_model(decl, shape, given, opset)
    onnx.checker.check_model(model, full_check=True)
    (want,) = ort_run(model, {"x": x})
    (got,) = singa_onnx.prepare(model).run({"x": x})
    got = np.asarray(got)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("decl", RECORDS, ids=_id)
def test_record_form_agrees_with_the_onnx_schema(decl):
    """Each ONNX name the record pairs with an Operator attribute is an input or an attribute
    of the operator at opset 11 and at EXPORT_OPSET, and the import handler reads each one
    that is an attribute there; the operator has one data input besides them."""
    names = {name for name, _ in decl.onnx.attrs}
    for opset in (11, EXPORT_OPSET):
        schema = onnx.defs.get_schema(decl.onnx.op_type, opset)
        inputs = [i.name for i in schema.inputs]
        assert names <= set(inputs) | set(schema.attributes), (opset, names)
        assert names & set(schema.attributes) <= HANDLERS[decl.onnx.op_type].attrs
        assert len([i for i in inputs if i not in names]) == 1, (opset, inputs)
    for name, field in decl.onnx.attrs:
        op = getattr(autograd, decl.op)(*EXPORT_CASES[decl.op][-1][1])
        assert hasattr(op, field), f"{decl.op} keeps no attribute {field!r} for ONNX's {name}"


def test_each_onnx_operator_is_claimed_once():
    names = [d.onnx.op_type for d in RECORDS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
