"""Eager inference runs a Conv and the Relu/HardSwish after it, and a Sigmoid and the Mul
after it, as one fused kernel.

``backend.EAGER_FUSIONS``: while ``singa.autograd.training`` is off and no graph is being
recorded, a Conv whose only reader is the next node, a Relu or HardSwish, runs as the device's
``Conv2d+ReLU`` / ``Conv2d+HardSwish`` kernel (``singa.ops.run_fused``); a Sigmoid whose only
reader is the next node, a Mul of it and another tensor (SiLU, a squeeze-excitation gate), as
``Sigmoid+Mul``. Oracles: onnxruntime, and the same eager run with training on (no fusion),
which must give the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ort_run
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper
from singa import autograd, sonnx
from singa_onnx import backend
from singa_onnx.handlers import _registry


def _model(rng, nsp=2):
    """x -> Conv -> Relu -> Conv -> HardSwish -> Conv (c3) -> Relu -> Add(c3) -> y: the first
    two pairs fuse; the third does not (c3 is read by the Add too)."""
    k = [3] * nsp
    inits, nodes = [], []

    def conv(i, cin, cout, inp, out):
        w = rng.standard_normal((cout, cin, *k)).astype(np.float32) * 0.3
        b = rng.standard_normal(cout).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")])
        nodes.append(oh.make_node("Conv", [inp, f"w{i}", f"b{i}"], [out], kernel_shape=k,
                                  pads=[1] * (2 * nsp)))

    conv(1, 3, 4, "x", "c1")
    nodes.append(oh.make_node("Relu", ["c1"], ["r1"]))
    conv(2, 4, 5, "r1", "c2")
    nodes.append(oh.make_node("HardSwish", ["c2"], ["h2"]))
    conv(3, 5, 5, "h2", "c3")
    nodes.append(oh.make_node("Relu", ["c3"], ["r3"]))
    nodes.append(oh.make_node("Add", ["r3", "c3"], ["y"]))
    dims = ["n", 3] + [f"s{i}" for i in range(nsp)]
    graph = oh.make_graph(nodes, "fuse", [oh.make_tensor_value_info("x", TP.FLOAT, dims)],
                          [oh.make_tensor_value_info("y", TP.FLOAT, ["n", 5] + dims[2:])],
                          inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.fixture
def fused_calls(monkeypatch):
    """The names of the fused kernels the eager run ran (the real run_fused, counted)."""
    calls = []
    real = _registry.run_fused

    def counted(name, ins, attrs):
        calls.append(name)
        return real(name, ins, attrs)

    monkeypatch.setattr(_registry, "run_fused", counted)
    return calls


def _fused_equals_plain(model, rep, x, fused_calls, want_calls):
    """An inference run calls exactly ``want_calls``; a run with training on (no fusion) calls
    none and gives the same bits; both match onnxruntime."""
    saved = autograd.training
    try:
        autograd.training = False
        fused = rep.run([x])[0]
        assert fused_calls == want_calls
        autograd.training = True  # no fusion while training
        plain = rep.run([x])[0]
        assert fused_calls == want_calls
    finally:
        autograd.training = saved
    np.testing.assert_array_equal(fused, plain)
    np.testing.assert_allclose(fused, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nsp", [2, 1], ids=["2d", "1d"])
def test_fused_eager_run_equals_the_unfused_one_and_onnxruntime(rng, nsp, fused_calls):
    model = _model(rng, nsp)
    rep = sonnx.prepare(model, "CPU")
    assert rep._fusions == {0: "Conv2d+ReLU", 2: "Conv2d+HardSwish"}  # not the shared c3
    x = rng.standard_normal((2, 3, *([7] * nsp))).astype(np.float32)
    _fused_equals_plain(model, rep, x, fused_calls, ["Conv2d+ReLU", "Conv2d+HardSwish"])


def test_no_fusion_where_the_convolution_output_is_asked_for(rng, fused_calls, eval_mode):
    model = _model(rng)
    rep = sonnx.prepare(model, "CPU")
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    y, c1, r1 = rep.run([x], aux_output=("c1", "r1"))
    assert fused_calls == ["Conv2d+HardSwish"]  # c1 is returned: its pair runs as two ops
    np.testing.assert_array_equal(r1, np.maximum(c1, 0))
    want = ort_run(model, {"x": x})[0]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    # last_layers ending on the Conv: its output is the result, nothing fuses into it
    fused_calls.clear()
    (c1_only,) = rep.run([x], last_layers=1)
    assert fused_calls == []
    np.testing.assert_array_equal(c1_only, c1)


def test_no_fusion_where_the_device_has_no_fused_kernel(rng, fused_calls, eval_mode,
                                                        monkeypatch):
    model = _model(rng)
    rep = sonnx.prepare(model, "CPU")
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    want = rep.run([x])[0]
    fused_calls.clear()
    kernels = {k: v for k, v in rep.dev.kernels.items() if k != "Conv2d+HardSwish"}
    monkeypatch.setattr(rep.dev, "kernels", kernels)
    got = rep.run([x])[0]
    assert fused_calls == ["Conv2d+ReLU"]
    np.testing.assert_array_equal(got, want)


def test_graph_mode_records_the_ops_not_the_eager_fusion(rng, fused_calls, eval_mode):
    model = _model(rng)
    rep = sonnx.prepare(model, "CPU", use_graph=True)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    y1, y2 = rep.run([x])[0], rep.run([x])[0]
    assert fused_calls == []  # the recording runs the ops; the scheduler fuses them itself
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(y1, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def _gates(rng):
    """x -> Conv (c) -> SiLU: Mul(c, Sigmoid(c)) (m) -> a squeeze-excitation gate:
    Mul(m, Sigmoid(ReduceMean(m))) (m2) -> Mul(Sigmoid(m2), k) with k a Constant (a host
    value) (m3) -> Mul(Sigmoid(m3), Sigmoid(m3)) (s5) -> Mul(Sigmoid(s5), g) (y). The first
    two Sigmoid/Mul pairs fuse; the third is a pair but its other operand is on the host, and
    the last one's is smaller than the Sigmoid's output (the fused kernels' contract has the
    other operand as large as the output), so each runs as two ops; the Mul of s5 reads its
    Sigmoid twice, not a pair."""
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    k = numpy_helper.from_array(rng.standard_normal((4, 1, 1)).astype(np.float32), "kv")
    nodes = [oh.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
             oh.make_node("Sigmoid", ["c"], ["s1"]),
             oh.make_node("Mul", ["c", "s1"], ["m"]),
             oh.make_node("ReduceMean", ["m"], ["g"], axes=[2, 3], keepdims=1),
             oh.make_node("Sigmoid", ["g"], ["gs"]),
             oh.make_node("Mul", ["gs", "m"], ["m2"]),  # the gate first: either order fuses
             oh.make_node("Constant", [], ["k"], value=k),
             oh.make_node("Sigmoid", ["m2"], ["s3"]),
             oh.make_node("Mul", ["s3", "k"], ["m3"]),
             oh.make_node("Sigmoid", ["m3"], ["s4"]),
             oh.make_node("Mul", ["s4", "s4"], ["s5"]),
             oh.make_node("Sigmoid", ["s5"], ["s6"]),
             oh.make_node("Mul", ["s6", "g"], ["y"])]  # g is smaller than s6: two ops
    graph = oh.make_graph(nodes, "gates",
                          [oh.make_tensor_value_info("x", TP.FLOAT, ["n", 3, 6, 6])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, ["n", 4, 6, 6])], [w])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_silu_and_gates_run_as_sigmoid_mul(rng, fused_calls):
    model = _gates(rng)
    rep = sonnx.prepare(model, "CPU")
    # (the Constant node is folded at import: the pair after it is nodes 6 and 7)
    assert rep._fusions == {1: "Sigmoid+Mul", 4: "Sigmoid+Mul", 6: "Sigmoid+Mul",
                            10: "Sigmoid+Mul"}
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    # not the pair whose other operand is k (on the host) nor g (smaller than the output)
    _fused_equals_plain(model, rep, x, fused_calls, ["Sigmoid+Mul", "Sigmoid+Mul"])


def test_the_pairs_an_import_finds():
    class N:
        def __init__(self, op, ins, outs):
            self.op_type, self.inputs, self.outputs = op, ins, outs

    nodes = [N("Conv", ["x", "w"], ["a"]), N("Relu", ["a"], ["b"]),      # fuses
             N("Conv", ["b", "w"], ["c"]), N("Sigmoid", ["c"], ["d"]),   # not a listed pair
             N("Conv", ["d", "w"], ["e"]), N("HardSwish", ["e"], ["f"]),  # e is an output
             N("Conv", ["f", "w"], ["g"]), N("Relu", ["g"], ["h"])]      # fuses
    assert backend._eager_fusions(nodes, ["e", "h"]) == {0: "Conv2d+ReLU", 6: "Conv2d+ReLU"}
    gates = [N("Sigmoid", ["x"], ["a"]), N("Mul", ["x", "a"], ["b"]),   # SiLU: fuses
             N("Sigmoid", ["b"], ["c"]), N("Mul", ["c", "c"], ["d"]),   # c read twice
             N("Sigmoid", ["d"], ["e"]), N("Mul", ["e", "d"], ["f"]),   # e is an output
             N("Sigmoid", ["f"], ["g"]), N("Relu", ["g"], ["h"])]       # not a listed pair
    assert backend._eager_fusions(gates, ["e", "h"]) == {0: "Sigmoid+Mul"}
