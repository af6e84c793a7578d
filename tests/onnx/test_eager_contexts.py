"""What the eager loop makes once per node and what it makes per run (backend ``_run_node``).

A node's handler Context (device, opset, element limit, the node's name, op, state and input
types) is made on its first run and kept; its attributes with ``__noutputs__`` are computed
at prepare, and every call gets its own copy, so a handler that changes the dict it is given
changes nothing for the next run. Oracle: onnxruntime on every run.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from conftest import ort_run
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper
from singa import sonnx


def gemm_model(rng):
    """x (2, 3) -> Gemm(W, b, transB=1, alpha=0.5) -> Relu -> y."""
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    graph = oh.make_graph(
        [oh.make_node("Gemm", ["x", "w", "b"], ["g"], transB=1, alpha=0.5),
         oh.make_node("Relu", ["g"], ["y"])],
        "gemm", [oh.make_tensor_value_info("x", TP.FLOAT, [2, 3])],
        [oh.make_tensor_value_info("y", TP.FLOAT, [2, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_a_node_keeps_its_context_between_runs_and_a_new_type_table_rebuilds_it(rng):
    model = gemm_model(rng)
    rep = sonnx.prepare(model)
    node = rep.nodes[0]
    for _ in range(2):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_allclose(rep.run([x])[0], ort_run(model, {"x": x})[0], rtol=1e-5,
                                   atol=1e-6)
    ctx = rep._context(node)
    assert ctx is rep._context(node)
    assert ctx.state is node.state and ctx.node_name == node.name
    assert ctx.in_types == [TP.FLOAT, TP.FLOAT, TP.FLOAT]
    rep.types = {"x": TP.DOUBLE}
    assert rep._context(node) is not ctx
    assert rep._context(node).in_types == [TP.DOUBLE, None, None]


def test_a_handler_changing_its_attributes_changes_nothing_for_the_next_run(rng):
    model = gemm_model(rng)
    rep = sonnx.prepare(model)
    node = rep.nodes[0]
    seen = []
    inner = node.handler.fn

    def meddling(ctx, attrs, *ins):
        seen.append(dict(attrs))
        out = inner(ctx, attrs, *ins)
        attrs["alpha"] = 100.0  # after use: what the next run would see if the dict were shared
        attrs.pop("transB")
        return out

    node.handler = dataclasses.replace(node.handler, fn=meddling)
    for _ in range(3):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        np.testing.assert_allclose(rep.run([x])[0], ort_run(model, {"x": x})[0], rtol=1e-5,
                                   atol=1e-6)
    assert seen[0] == seen[1] == seen[2] == {"transB": 1, "alpha": 0.5, "__noutputs__": 1}
