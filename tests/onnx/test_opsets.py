"""Opsets from the future: a model stamped with an opset newer than the installed onnx knows is
refused with both numbers and the fix, as onnxruntime refuses it; the newest known one runs."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort
from onnx import TensorProto, helper
from singa.errors import SingaONNXError

NEWEST = onnx.defs.onnx_opset_version()
NEWEST_ML = onnx.defs.onnx_ml_opset_version()
X = np.array([[-1.0, 2.0, -3.0]], np.float32)


def _relu(*opsets):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


@pytest.mark.parametrize("domain,version,newest", [
    ("", NEWEST + 1, NEWEST), ("", 99, NEWEST), ("ai.onnx", 99, NEWEST),
    ("ai.onnx.ml", NEWEST_ML + 1, NEWEST_ML)])
def test_future_opset_is_refused_with_both_numbers_and_the_fix(domain, version, newest):
    opsets = [(domain, version)] if domain in ("", "ai.onnx") else [("", NEWEST),
                                                                    (domain, version)]
    m = _relu(*opsets)
    with pytest.raises(SingaONNXError) as e:
        singa_onnx.prepare(m)
    msg = str(e.value)
    assert f"opset {version}" in msg and f"up to {newest}" in msg
    assert "pip install -U onnx" in msg and f"opset {newest} or older" in msg


def test_future_opset_is_refused_from_a_file(tmp_path):
    p = tmp_path / "future.onnx"
    p.write_bytes(_relu(("", 99)).SerializeToString())
    with pytest.raises(SingaONNXError, match="opset 99"):
        singa_onnx.prepare(str(p))
    with pytest.raises(SingaONNXError, match="opset 99"):
        singa_onnx.prepare(p.read_bytes())


def test_onnxruntime_refuses_it_too():
    """The oracle the refusal follows: onnxruntime does not run opsets it does not know."""
    with pytest.raises(Exception, match="99"):
        ort.InferenceSession(_relu(("", 99)).SerializeToString(),
                             providers=["CPUExecutionProvider"])


def test_run_node_with_a_future_opset_is_refused():
    node = helper.make_node("Relu", ["x"], ["y"])
    with pytest.raises(SingaONNXError, match=f"opset {NEWEST + 1}.*up to {NEWEST}"):
        singa_onnx.run_node(node, [X], opset_version=NEWEST + 1)


def test_the_newest_known_opset_runs():
    got = singa_onnx.prepare(_relu(("", NEWEST))).run([X])[0]
    np.testing.assert_array_equal(got, np.maximum(X, 0))
    np.testing.assert_array_equal(singa_onnx.run_node(
        helper.make_node("Relu", ["x"], ["y"]), [X], opset_version=NEWEST)[0], np.maximum(X, 0))


def test_an_unused_vendor_domain_is_not_an_opset_problem():
    """Domains onnx does not version are the op check's business: imported but unused, the
    model runs; used, the node is refused by its domain."""
    got = singa_onnx.prepare(_relu(("", 17), ("com.example", 99))).run([X])[0]
    np.testing.assert_array_equal(got, np.maximum(X, 0))
