"""Graph mode for imported models: ``prepare(model, use_graph=True)`` records once per input
signature and replays. Oracles: the eager run of the same SingaRep and onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from onnx import TensorProto, helper
from singa import autograd
from singa.errors import SingaONNXError

torch = pytest.importorskip("torch")
nn = torch.nn

from torch_models import EncoderLayer, LSTMNet, ResNetish, SeedCNN, export  # noqa: E402

MODELS = {
    "mlp": (lambda: nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4),
                                  nn.Softmax(-1)), (10,)),
    "seed_cnn": (SeedCNN, (1, 28, 28)),
    "resnet_style_bn": (ResNetish, (3, 16, 16)),
    "lstm": (LSTMNet, (5, 6)),
    # a free batch dimension: Shape -> Gather -> Concat -> Reshape, evaluated at record time
    "encoder_layer": (EncoderLayer, (5, 16)),
    # a causal mask (Trilu of a constant -inf matrix) folded on the host while the graph records
    "causal_softmax": (lambda: CausalSoftmax(), (5, 6)),
}


class CausalSoftmax(nn.Module):
    """Softmax of x x^T over the positions at or before each one (a decoder's attention)."""

    def forward(self, x):
        t = x.shape[1]
        mask = torch.triu(torch.full((t, t), float("-inf")), diagonal=1)
        return torch.softmax(x @ x.transpose(-1, -2) + mask, dim=-1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    assert not autograd.training  # inference: the recording must not be a training graph


@pytest.mark.parametrize("name", list(MODELS))
def test_replay_equals_eager_and_onnxruntime(rng, name):
    make, shape = MODELS[name]
    onx = export(make(), rng.standard_normal((2, *shape)).astype(np.float32),
                 dynamic_batch=True)
    eager = singa_onnx.prepare(onx)
    rep = singa_onnx.prepare(onx, use_graph=True)
    cache = rep._graphs
    for i, batch in enumerate((2, 2, 3, 2)):
        x = rng.standard_normal((batch, *shape)).astype(np.float32)
        got = rep.run([x])[0]
        np.testing.assert_allclose(got, eager.run([x])[0], atol=1e-5, rtol=1e-5)
        np.testing.assert_allclose(got, ort_run(onx, {"x": x})[0], atol=1e-5, rtol=1e-4)
        # batch 2 recorded once, batch 3 re-records, batch 2 again replays its graph
        assert cache.recordings == (1 if i < 2 else 2)
    assert len(cache.graphs) == 2


def test_replay_reads_new_values_each_call(rng):
    onx = export(SeedCNN(), rng.standard_normal((1, 1, 28, 28)).astype(np.float32))
    rep = singa_onnx.prepare(onx, use_graph=True)
    xs = [rng.standard_normal((1, 1, 28, 28)).astype(np.float32) for _ in range(3)]
    outs = [rep.run({"x": x})[0].copy() for x in xs]
    assert rep._graphs.recordings == 1
    for x, y in zip(xs, outs):
        np.testing.assert_allclose(y, ort_run(onx, {"x": x})[0], atol=1e-5, rtol=1e-4)
    assert not np.allclose(outs[0], outs[1])


def test_batch1_replay_runs_bound_kernels_and_equals_eager_bitwise(rng):
    """On the CPU the seed CNN's batch-1 replay runs its convolutions, products and fused
    activations as kernels bound to the plan's arrays (the ``bind`` kernel attribute); they
    give bitwise what the eager run's general kernels give, on new inputs each call."""
    onx = export(SeedCNN(), rng.standard_normal((1, 1, 28, 28)).astype(np.float32))
    eager = singa_onnx.prepare(onx)
    rep = singa_onnx.prepare(onx, use_graph=True)
    if rep.dev.backend != "cpu":
        pytest.skip("the CPU backend's bound kernels")
    xs = [rng.standard_normal((1, 1, 28, 28)).astype(np.float32) for _ in range(3)]
    outs = [rep.run([x])[0] for x in xs]  # no copies: a later replay must not change them
    for x, y in zip(xs, outs):
        assert np.array_equal(y, eager.run([x])[0])
    plan = next(iter(rep._graphs.graphs.values())).graph.plan
    bound = sorted(node.name for fn, _, _, _, node in plan.calls
                   if fn is not rep.dev.kernels[node.name][0])
    assert bound == ["Add", "Add+ReLU", "Conv2d+ReLU+Pooling2d", "Conv2d+ReLU+Pooling2d",
                     "Matmul", "Matmul"]


def test_aux_output_and_last_layers_are_part_of_the_signature(rng):
    onx = export(SeedCNN(), rng.standard_normal((1, 1, 28, 28)).astype(np.float32))
    rep = singa_onnx.prepare(onx, use_graph=True)
    eager = singa_onnx.prepare(onx)
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    mid = eager.nodes[3].outputs[0]
    for kw in ({}, {"last_layers": -2}, {"aux_output": (mid,)}, {}):
        got, want = rep.run([x], **kw), eager.run([x], **kw)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=1e-5)
    assert rep._graphs.recordings == 3


def test_graph_off_drops_recordings(rng):
    onx = export(SeedCNN(), rng.standard_normal((1, 1, 28, 28)).astype(np.float32))
    rep = singa_onnx.prepare(onx, use_graph=True)
    x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
    y = rep.run([x])[0]
    rep.graph(False)
    assert not rep._graphs.graphs
    np.testing.assert_allclose(rep.run([x])[0], y, atol=1e-6)
    assert rep._graphs.recordings == 1


def _reshape_to_input_shape_model():
    """Reshape(x, s) where the target shape ``s`` is a runtime input."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "s"], ["y"])],
        "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _slice_to_computed_bound_model():
    """Slice(x, 0, end) where ``end`` is computed on the device (ArgMax of a runtime input)."""
    g = helper.make_graph(
        [helper.make_node("ArgMax", ["k"], ["end"], keepdims=1),
         helper.make_node("Slice", ["x", "zero", "end"], ["y"])],
        "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
                helper.make_tensor_value_info("k", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])],
        initializer=[onnx.numpy_helper.from_array(np.array([0], np.int64), "zero")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("build,feeds,node", [
    (_reshape_to_input_shape_model,
     lambda r: {"x": r.standard_normal((2, 6)).astype(np.float32),
                "s": np.array([3, 4], np.int64)}, "Reshape"),
    (_slice_to_computed_bound_model,
     lambda r: {"x": r.standard_normal(6).astype(np.float32),
                "k": np.array([0, 1, 5, 2, 0, 0], np.float32)}, "Slice"),
])
def test_runtime_bounds_refused_in_graph_mode(rng, build, feeds, node):
    onx = build()
    f = feeds(rng)
    # eager mode runs it (the oracle: onnxruntime)
    np.testing.assert_allclose(singa_onnx.prepare(onx).run(f)[0], ort_run(onx, f)[0])
    rep = singa_onnx.prepare(onx, use_graph=True)
    with pytest.raises(SingaONNXError, match=rf"{node}.*cannot run in graph mode.*"
                                             r"use_graph=False"):
        rep.run(f)
    assert not rep._graphs.graphs  # nothing half-recorded is kept
    rep.graph(False)
    np.testing.assert_allclose(rep.run(f)[0], ort_run(onx, f)[0])


def test_sonnx_model_refuses_use_graph(rng):
    onx = export(SeedCNN(), rng.standard_normal((1, 1, 28, 28)).astype(np.float32))
    with pytest.raises(SingaONNXError, match="Model.compile"):
        singa_onnx.SONNXModel(onx, use_graph=True)


class _Activations(nn.Module):
    """MobileNetV3's and EfficientNet's activations after a convolution: HardSwish, a
    HardSigmoid gate, SiLU (exported as Sigmoid and Mul(x, sigmoid(x)))."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        h = nn.functional.hardswish(self.conv(x))
        h = h * nn.functional.hardsigmoid(h)
        return nn.functional.silu(h)


def test_hard_activations_and_silu_run_as_one_op_each(rng):
    """HardSwish and HardSigmoid import as one op each, and graph mode fuses the convolution
    and its HardSwish into one Conv2d+HardSwish call and SiLU's Sigmoid and Mul into one
    Sigmoid+Mul call (where the device has those kernels); the replay equals onnxruntime and
    the eager run."""
    x = (3 * rng.standard_normal((2, 3, 8, 8))).astype(np.float32)
    onx = export(_Activations(), x)
    ops = [n.op_type for n in onx.graph.node]
    assert "HardSwish" in ops and "HardSigmoid" in ops and "Sigmoid" in ops, ops
    rep = singa_onnx.prepare(onx, use_graph=True)
    eager = singa_onnx.prepare(onx)
    y = rep.run([x])[0]
    np.testing.assert_allclose(y, ort_run(onx, {"x": x})[0], atol=1e-5, rtol=1e-5)
    np.testing.assert_array_equal(y, eager.run([x])[0])
    plan = next(iter(rep._graphs.graphs.values())).graph.plan
    names = [node.name for *_, node in plan.calls]
    assert names.count("HardSigmoid") == 1, names
    if "Conv2d+HardSwish" in rep.dev.kernels:
        assert "Conv2d+HardSwish" in names and "HardSwish" not in names, names
    else:
        assert names.count("HardSwish") == 1, names
    if "Sigmoid+Mul" in rep.dev.kernels:
        assert "Sigmoid+Mul" in names and "Sigmoid" not in names, names


def _identity_model():
    """x -> Identity a -> Relu r (returned) -> Identity b -> Neg n (returned), and returned
    Identities of r (o1) and of the graph input (o2)."""
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Identity", ["x"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Identity", ["r"], ["b"]),
             helper.make_node("Neg", ["b"], ["n"]),
             helper.make_node("Identity", ["r"], ["o1"]),
             helper.make_node("Identity", ["x"], ["o2"])]
    outs = [helper.make_tensor_value_info(n, f, [2, 3]) for n in ("n", "r", "o1", "o2")]
    graph = helper.make_graph(nodes, "ids", [helper.make_tensor_value_info("x", f, [2, 3])],
                              outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("use_graph", [False, True])
def test_identity_inside_the_model_costs_no_op(rng, use_graph):
    """An Identity whose input and output are not returned names its input's value (a: no
    Copy; torch's exporter leaves 36 in EfficientNet-B0); one whose output or input is a
    graph output still copies (b, o1, o2), so no two outputs are one Tensor. Values equal
    onnxruntime's, and an Identity's output asked for as an ``aux_output`` is computed."""
    onx = _identity_model()
    rep = singa_onnx.prepare(onx, use_graph=use_graph)
    rep.is_graph = not use_graph  # eager: Tensors back, to see which are one object
    x = rng.standard_normal((2, 3)).astype(np.float32)
    got = rep.run([x])
    for g, want in zip(got, ort_run(onx, {"x": x})):
        np.testing.assert_array_equal(g if use_graph else g.to_numpy(), want)
    if use_graph:
        plan = next(iter(rep._graphs.graphs.values())).graph.plan
        names = [node.name for *_, node in plan.calls]
        assert names.count("Copy") == 3, names  # b, o1 and o2; not a
    else:
        assert len({id(t) for t in got}) == 4
    aux = singa_onnx.prepare(onx, use_graph=use_graph)
    a, b = aux.run([x], aux_output=("a", "b"))[-2:]  # asked for: still their values
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, np.maximum(x, 0))
