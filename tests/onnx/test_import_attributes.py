"""Every import handler against onnxruntime with non-default attributes (``import_cases``).

Each case is one node built with ``onnx.helper``, typed by onnx's shape inference, checked by
``onnx.checker``, then run by ``singa_onnx.prepare(model).run`` and by onnxruntime on the same
inputs; every output must match in shape, dtype and value. The meta-tests keep the table in
step with the handler registry: each handler has a case, and each attribute it declares is
set to a non-default value somewhere, refused by name, or waived with a reason.
"""

from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from import_cases import CASES, REFUSED, WAIVED, Feed, U
from onnx import helper, numpy_helper
from singa.errors import SingaONNXError
from singa_onnx.handlers import HANDLERS


def build(case):
    """(model, feeds) for ``case``: graph inputs named in0, in1, ..., initializers k0, k1, ..."""
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    names, graph_inputs, inits, feeds = [], [], [], {}
    for i, spec in enumerate(case.inputs):
        if spec is None:
            names.append("")
            continue
        if isinstance(spec, np.ndarray):
            names.append(f"k{i}")
            inits.append(numpy_helper.from_array(spec, f"k{i}"))
            continue
        if isinstance(spec, tuple):
            value = rng.standard_normal(spec).astype(np.float32)
        elif isinstance(spec, U):
            dt = np.dtype(spec.dtype)
            if dt.kind in "iub":
                value = rng.integers(spec.lo, spec.hi, spec.shape).astype(dt)
            else:
                value = rng.uniform(spec.lo, spec.hi, spec.shape).astype(dt)
        elif isinstance(spec, Feed):
            value = spec.value
        else:
            raise TypeError(f"input spec {spec!r}")
        name = f"in{i}"
        names.append(name)
        feeds[name] = value
        graph_inputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape))
    outs = ["" if i in case.unused else f"out{i}" for i in range(case.outputs)]
    node = helper.make_node(case.op, names, outs, name=case.op, **case.attrs)
    graph = helper.make_graph([node], "case", graph_inputs,
                              [onnx.ValueInfoProto(name=o) for o in outs if o], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    for vi in model.graph.output:
        if not vi.type.HasField("tensor_type"):  # a function op inference does not expand
            vi.type.CopyFrom(model.graph.input[0].type)  # (GroupNormalization): like x
    return model, feeds


def oracle(case, model, feeds) -> list:
    if case.oracle == "reference":
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(model).run(None, feeds)
    return ort_run(model, feeds)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_handler_matches_onnxruntime(case):
    model, feeds = build(case)
    onnx.checker.check_model(model, full_check=True)
    want = oracle(case, model, feeds)
    got = singa_onnx.prepare(model).run(feeds)
    assert len(got) == len(want) == case.outputs - len(case.unused)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, f"output {i}: shape {g.shape}, onnxruntime {w.shape}"
        assert g.dtype == w.dtype, f"output {i}: dtype {g.dtype}, onnxruntime {w.dtype}"
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")


@pytest.mark.parametrize("case,what", REFUSED, ids=lambda v: v.id if hasattr(v, "id") else "")
def test_unsupported_attribute_is_refused_by_name(case, what):
    """Refused with a SingaONNXError naming ``what``: at prepare when the attributes show it,
    else at the first run (a 3-D convolution known only from its weight's shape)."""
    model, feeds = build(case)
    onnx.checker.check_model(model, full_check=True)
    with pytest.raises(SingaONNXError) as e:
        singa_onnx.prepare(model).run(feeds)
    assert what in str(e.value)


def _default(op, attr, opset):
    """ONNX's default for ``attr`` of ``op`` at ``opset`` (None: required or not defined)."""
    try:
        a = onnx.defs.get_schema(op, opset).attributes.get(attr)
    except onnx.defs.SchemaError:
        return None
    if a is None or not a.default_value.name:
        return None
    return helper.get_attribute_value(a.default_value)


def _same(value, default):
    if isinstance(default, bytes):
        default = default.decode()
    if isinstance(value, np.ndarray) or isinstance(default, onnx.TensorProto):
        return False
    return value == default or (isinstance(default, list) and list(value) == default)


def _schema_attrs(op):
    """Every attribute any version of ``op`` defines."""
    return {a for s in onnx.defs.get_all_schemas_with_history()
            if s.name == op and s.domain == "" for a in s.attributes}


def test_every_handler_has_a_case():
    missing = sorted(set(HANDLERS) - {c.op for c in CASES})
    assert not missing, f"handlers with no case in import_cases.CASES: {missing}"


def test_every_attribute_is_set_to_a_non_default_value():
    covered = {(c.op, a) for c in CASES for a, v in c.attrs.items()
               if not _same(v, _default(c.op, a, c.opset))}
    covered |= {(c.op, a) for c, _ in REFUSED for a in c.attrs}
    missing = []
    for op, h in sorted(HANDLERS.items()):
        # attributes of the handler's shared list that this op does not have in any opset
        # (the RNN family shares one list) cannot be given: onnx.checker refuses them
        for a in sorted(h.attrs & _schema_attrs(op)):
            if (op, a) not in covered and (op, a) not in WAIVED:
                missing.append(f"{op}.{a}")
    assert not missing, ("attributes never set to a non-default value in import_cases.CASES "
                         f"(add a case, a REFUSED entry or a WAIVED reason): {missing}")


def test_waivers_are_still_needed():
    covered = {(c.op, a) for c in CASES for a, v in c.attrs.items()
               if not _same(v, _default(c.op, a, c.opset))}
    stale = sorted(k for k in WAIVED if k in covered or k[0] not in HANDLERS
                   or k[1] not in HANDLERS[k[0]].attrs)
    assert not stale, f"WAIVED entries that a case covers or no handler declares: {stale}"
