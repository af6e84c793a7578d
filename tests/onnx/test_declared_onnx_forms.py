"""Every function declared on its Operator class with an ONNX form
(``singa.autograd.functions.FUNCTIONS``: the declaration's ``onnx`` field) exports through the
exporter singa-onnx builds from that form, imports back, and agrees with onnx's schema.

Export: the declared function on its docstring example (and the cases below), written by
``singa_onnx.to_onnx`` and run by onnxruntime, against singa's forward pass and the
declaration's numpy form. Import: the exported model run by ``singa_onnx.prepare`` against
onnxruntime; the handlers built from the forms also on one node with and without its
attributes, at opset 11 and at EXPORT_OPSET (a left-out attribute is onnx's default).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from onnx import helper
from singa import autograd, tensor
from singa.autograd.functions import FUNCTIONS
from singa.errors import SingaONNXError
from singa_onnx import frontend
from singa_onnx.frontend import EXPORT_OPSET, EXPORTERS
from singa_onnx.handlers import HANDLERS, declared

FORMS = [(decl, cls) for decl, cls in FUNCTIONS.values() if decl.onnx is not None]
pytestmark = pytest.mark.usefixtures("eval_mode")

# function -> more arguments than its docstring example, for the forms an exporter writes
# differently (an attribute's value, an int for a list, an optional input left out)
EXTRA = {
    "gemm": [{"A": [[1.0, 2.0], [3.0, 4.0]], "B": [[1.0, 0.0], [2.0, 1.0], [0.5, 0.5]],
              "alpha": 0.5, "transA": 1, "transB": 1},
             {"A": [[1.0, 2.0]], "B": [[3.0], [4.0]]}],
    "softmax": [{"x": [[[1.0, 2.0], [3.0, 0.0]]], "axis": -1}],
    "log_softmax": [{"x": [[1.0, 2.0], [3.0, 0.0]], "axis": 0}],
    "leakyrelu": [{"x": [-1.0, 0.0, 2.0]}],
    "selu": [{"x": [-1.0, 0.0, 2.0], "alpha": 1.5, "gamma": 2.0}],
    "split": [{"x": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]], "axis": 0,
               "parts": None, "num_output": 2}],
    "gather": [{"x": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], "axis": 1,
                "indices": [[2, 0], [1, 1]]}],
    "tile": [{"x": [[1.0, 2.0]], "repeats": 3}],
    "argmax": [{"x": [[1.0, 5.0], [3.0, 2.0]], "axis": 0, "keepdims": 0}],
    "matmul": [{"x": [1.0, 2.0], "w": [[1.0, 0.0], [2.0, 1.0]]}],
}


def _cases():
    for decl, cls in FORMS:
        for i, example in enumerate([decl.example, *EXTRA.get(decl.name, [])]):
            yield pytest.param(decl, cls, example, id=f"{decl.name}-{i}")


def _call(decl, example):
    """The Tensor inputs, singa's outputs and the numpy form's outputs of ``decl`` on
    ``example``: inputs (and each of a variadic ``*xs``) as float32 Tensors."""
    args, tensors, numpy_args = {}, [], {}
    for name, value in example.items():
        if name == "*xs":
            arrays = [np.asarray(v, np.float32) for v in value]
            ts = [tensor.from_numpy(a) for a in arrays]
            tensors += ts
            args[name] = ts
            numpy_args["xs"] = tuple(arrays)
        elif name in decl.inputs:
            arr = np.asarray(value, np.float32)
            t = tensor.from_numpy(arr)
            tensors.append(t)
            args[name], numpy_args[name] = t, arr
        else:
            args[name] = numpy_args[name] = value
    fn = getattr(autograd, decl.name)
    ys = fn(*args["*xs"]) if "*xs" in args else fn(**args)
    ys = list(ys) if isinstance(ys, tuple) else [ys]
    want = decl.numpy(**numpy_args)
    want = list(want) if isinstance(want, tuple) else [want]
    return tensors, ys, want


def test_every_form_has_its_exporter_and_is_claimed_once():
    for _, cls in FORMS:
        assert EXPORTERS[cls.__name__] is frontend._DECLARED_EXPORTERS[cls.__name__], cls
    assert not set(frontend._DECLARED_EXPORTERS) & set(frontend._WRITTEN_OUT)
    names = [decl.onnx.op_type for decl, _ in FORMS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("decl,cls,example", list(_cases()))
def test_form_exports_runs_and_imports(decl, cls, example):
    """One node of the form's operator (and a Cast where ONNX's output is int64), run by
    onnxruntime against singa's forward and the numpy form; then imported back by
    singa_onnx.prepare, against onnxruntime."""
    tensors, ys, want = _call(decl, example)
    model = singa_onnx.to_onnx(tensors, ys)
    onnx.checker.check_model(model, full_check=True)
    nodes = [n.op_type for n in model.graph.node]
    assert nodes == [decl.onnx.op_type] + (["Cast"] if decl.onnx.int64_out else [])
    feeds = {i.name: tensor.to_numpy(t) for i, t in zip(model.graph.input, tensors)}
    got = ort_run(model, feeds)
    assert len(got) == len(ys) == len(want)
    for g, y, w in zip(got, ys, want):
        np.testing.assert_allclose(g, tensor.to_numpy(y), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    back = singa_onnx.prepare(model).run(feeds)
    for b, g in zip(back, got):
        np.testing.assert_allclose(np.asarray(b), g, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("decl,cls", FORMS, ids=lambda v: getattr(v, "name", ""))
def test_form_agrees_with_the_onnx_schema(decl, cls):
    """At EXPORT_OPSET each ONNX name of the form is an input or an attribute of its operator,
    every required attribute is given, and the operator's other inputs are the Operator's
    (one variadic input for ``*xs``); a convert names a paired operand."""
    form = decl.onnx
    assert onnx.defs.has(form.op_type, EXPORT_OPSET), form.op_type
    schema = onnx.defs.get_schema(form.op_type, EXPORT_OPSET)
    names = [name for name, _ in form.attrs]
    assert set(names) <= {i.name for i in schema.inputs} | set(schema.attributes), names
    required = {n for n, a in schema.attributes.items() if a.required}
    assert required <= set(names), (required, names)
    assert {name for name, _ in form.convert} <= set(names)
    rest = [i for i in schema.inputs if i.name not in names]
    option = onnx.defs.OpSchema.FormalParameterOption
    if decl.inputs == ("*xs",):
        assert [i.option for i in rest] == [option.Variadic]
    else:
        n_required = sum(i.option == option.Single for i in rest)
        assert n_required <= len(decl.inputs) <= len(rest), ([i.name for i in rest],
                                                             decl.inputs)


# the handlers built from the forms: (x, ONNX attributes given)
IMPORT_CASES = {
    "Identity": [{}],
    "LeakyRelu": [{}, {"alpha": 0.25}],
    "Elu": [{}, {"alpha": 0.5}],
    "Selu": [{}, {"alpha": 1.5, "gamma": 2.0}, {"gamma": 0.5}],
}


def test_handlers_built_from_forms_are_the_ones_listed():
    built = {op for op, h in HANDLERS.items() if h.fn.__module__ == declared.__name__}
    assert built == set(IMPORT_CASES)
    forms = {decl.onnx.op_type for decl, _ in FORMS}
    assert forms == built | set(declared.WRITTEN_OUT)
    assert not built & set(declared.WRITTEN_OUT)


@pytest.mark.parametrize("opset", [11, EXPORT_OPSET])
@pytest.mark.parametrize("op,given", [(op, g) for op, cases in IMPORT_CASES.items()
                                      for g in cases])
def test_built_handler_imports_one_node(op, given, opset, rng):
    x = rng.uniform(-3, 3, (2, 5)).astype(np.float32)
    node = helper.make_node(op, ["x"], ["y"], name="n", **given)
    graph = helper.make_graph([node], "form",
                              [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                                             x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT,
                                                             x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    (want,) = ort_run(model, {"x": x})
    (got,) = singa_onnx.prepare(model).run({"x": x})
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


def test_an_instance_the_form_refuses_is_not_exported():
    """ONNX's GlobalAveragePool takes the channels first: a channels_last one is refused,
    not written as a node that averages the wrong axes."""
    x = tensor.from_numpy(np.ones((1, 2, 2, 3), np.float32))
    y = autograd.globalaveragepool(x, "channels_last")
    with pytest.raises(SingaONNXError, match="GlobalAveragePool"):
        singa_onnx.to_onnx([x], [y])
