"""A Conv node keeps its ConvHandle between eager runs (handlers/nn.py ``_conv_handle``).

The handle is rebuilt when the operand shapes change: a model with a dynamic batch and
dynamic spatial sizes, run eagerly on inputs whose shapes change from run to run, must equal
onnxruntime on every run, for 2-D and 1-D convolutions, strided, padded (``auto_pad`` SAME,
whose pads depend on the input size) and grouped.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ort_run
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper
from singa import sonnx


def conv_model(rng, nsp: int, **attrs):
    """x (N, 4, *spatial) dynamic -> Conv(W, b) -> Relu -> Conv(W2) -> y."""
    k = [3] * nsp
    w = rng.standard_normal((6, 4 // attrs.get("group", 1), *k)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    w2 = rng.standard_normal((2, 6, *([1] * nsp))).astype(np.float32)
    nodes = [oh.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=k, **attrs),
             oh.make_node("Relu", ["c"], ["r"]),
             oh.make_node("Conv", ["r", "w2"], ["y"])]
    dims = ["n", 4] + [f"s{i}" for i in range(nsp)]
    graph = oh.make_graph(
        nodes, "convs", [oh.make_tensor_value_info("x", TP.FLOAT, dims)],
        [oh.make_tensor_value_info("y", TP.FLOAT, ["n", 2] + [f"o{i}" for i in range(nsp)])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
         numpy_helper.from_array(w2, "w2")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("nsp,attrs", [
    (2, {"strides": [2, 1], "pads": [1, 0, 1, 2]}),
    (2, {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    (2, {"group": 2, "dilations": [2, 1]}),
    (1, {"strides": [2], "pads": [1, 1]}),
    (1, {"auto_pad": "SAME_LOWER", "strides": [3]}),
], ids=["2d-pads", "2d-same", "2d-grouped", "1d-pads", "1d-same"])
def test_eager_runs_with_changing_shapes_equal_onnxruntime(rng, nsp, attrs, eval_mode):
    model = conv_model(rng, nsp, **attrs)
    rep = sonnx.prepare(model, "CPU")
    sizes = [(1, 9), (3, 9), (3, 12), (1, 9), (2, 7)]  # (batch, spatial): back to an old one
    for n, s in sizes:
        x = rng.standard_normal((n, 4, *([s] * nsp))).astype(np.float32)
        got = rep.run([x])[0]
        want = ort_run(model, {"x": x})[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    first = next(node for node in rep.nodes if node.op_type == "Conv")
    key, handle = first.state["conv"]
    assert key[0] == (2, 4, *([7] * nsp))  # the last run's shapes, one handle kept
    assert handle.batchsize == 2


def test_the_handle_is_kept_while_shapes_stay(rng, eval_mode):
    model = conv_model(rng, 2, strides=[1, 1])
    rep = sonnx.prepare(model, "CPU")
    x = rng.standard_normal((2, 4, 8, 8)).astype(np.float32)
    rep.run([x])
    handles = [node.state["conv"][1] for node in rep.nodes if node.op_type == "Conv"]
    y = rep.run([x])[0]
    assert [node.state["conv"][1] for node in rep.nodes if node.op_type == "Conv"] == handles
    np.testing.assert_allclose(y, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
