"""Host-evaluated values (constant folding, shape arithmetic) against onnxruntime.

sonnx evaluates a node whose operands are all known without running the model on the host
(:mod:`singa_onnx.host_eval`): numpy functions written to the ONNX spec, or the op's handler
on the CPU device. Each case below is a one-node model fed by Constant nodes, so prepare folds
it; the folded value must be onnxruntime's. The BERT-without-token_type_ids pattern (a
GatherElements over a 512-long buffer of token type ids, at position ids sliced to the input's
length) runs on the host at run time; onnx's reference evaluator fails on it.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import ort_run
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper
from singa import sonnx
from singa.errors import SingaONNXError

BIG = np.iinfo(np.int64).max
I64 = np.int64
F32 = np.float32


def _const(name, v):
    return oh.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(v)))


def folded_model(op, inputs, opset=17, n_out=1, **attrs):
    """A model computing ``op`` on Constant inputs (None: an omitted optional input)."""
    nodes, names = [], []
    for i, v in enumerate(inputs):
        if v is None:
            names.append("")
            continue
        nodes.append(_const(f"in{i}", v))
        names.append(f"in{i}")
    outs = [f"out{i}" for i in range(n_out)]
    nodes.append(oh.make_node(op, names, outs, **attrs))
    graph = oh.make_graph(nodes, op, [], [oh.make_tensor_value_info(o, TP.UNDEFINED, None)
                                          for o in outs])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])
    model.ir_version = 8
    probe = onnx.ModelProto()  # the op's outputs as intermediates: onnx infers their types
    probe.CopyFrom(model)
    probe.graph.output.extend([oh.make_tensor_value_info("probe", TP.FLOAT, None)])
    probe.graph.node.append(oh.make_node("Constant", [], ["probe"], value_float=0.0))
    del probe.graph.output[:n_out]
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(probe).graph.value_info}
    for i, o in enumerate(outs):
        model.graph.output[i].CopyFrom(inferred[o])
    return model


CASES = [  # (id, op, inputs, opset, attrs)
    ("gather_neg", "Gather", [np.arange(12, dtype=I64).reshape(3, 4), np.array([[-1, 0]])],
     17, {"axis": 1}),
    ("gather_elements_long_axis", "GatherElements",
     [np.arange(600, dtype=I64).reshape(1, 600) * 3, np.arange(100, dtype=I64)[None] * 5],
     17, {"axis": 1}),
    ("gather_elements_axis0_neg", "GatherElements",
     [np.arange(12, dtype=F32).reshape(3, 4), np.array([[-1, 0, 2, 1]])], 17, {"axis": 0}),
    ("unsqueeze13", "Unsqueeze", [np.arange(6, dtype=I64).reshape(2, 3), np.array([0, -1])],
     13, {}),
    ("unsqueeze11", "Unsqueeze", [np.arange(6, dtype=I64).reshape(2, 3)], 11, {"axes": [1]}),
    ("squeeze13", "Squeeze", [np.zeros((1, 3, 1), I64), np.array([2])], 13, {}),
    ("squeeze_all", "Squeeze", [np.zeros((1, 3, 1), F32)], 13, {}),
    ("concat", "Concat", [np.array([1, 2], I64), np.array([3], I64)], 17, {"axis": 0}),
    ("reshape_zero_and_infer", "Reshape", [np.arange(24, dtype=F32).reshape(2, 3, 4),
                                           np.array([0, -1])], 17, {}),
    ("slice_neg_step_big_ends", "Slice", [np.arange(20, dtype=I64).reshape(4, 5),
                                          np.array([-1, 1]), np.array([-BIG, BIG]),
                                          np.array([0, 1]), np.array([-2, 2])], 17, {}),
    ("slice9", "Slice", [np.arange(10, dtype=F32)], 9, {"starts": [2], "ends": [BIG],
                                                         "axes": [0]}),
    ("range_int", "Range", [np.array(2, I64), np.array(-7, I64), np.array(-3, I64)], 17, {}),
    ("range_float", "Range", [np.array(0.5, F32), np.array(3.0, F32), np.array(0.75, F32)],
     17, {}),
    ("constant_of_shape", "ConstantOfShape", [np.array([2, 3], I64)], 17,
     {"value": numpy_helper.from_array(np.array([7], I64))}),
    ("expand_bidirectional", "Expand", [np.arange(3, dtype=I64).reshape(3, 1),
                                        np.array([2, 1, 4])], 17, {}),
    ("tile", "Tile", [np.arange(6, dtype=F32).reshape(2, 3), np.array([2, 1])], 17, {}),
    ("transpose", "Transpose", [np.arange(24, dtype=I64).reshape(2, 3, 4)], 17,
     {"perm": [2, 0, 1]}),
    ("flatten", "Flatten", [np.arange(24, dtype=F32).reshape(2, 3, 4)], 17, {"axis": -1}),
    ("where", "Where", [np.array([True, False, True]), np.array([1, 2, 3], I64),
                        np.array([-1, -2, -3], I64)], 17, {}),
    ("equal", "Equal", [np.array([1, 2, 3], I64), np.array([1, 0, 3], I64)], 17, {}),
    ("less", "Less", [np.array([1.0, 2.5], F32), np.array([2.0, 2.5], F32)], 17, {}),
    ("not", "Not", [np.array([True, False])], 17, {}),
    ("and", "And", [np.array([True, False, True]), np.array([True, True, False])], 17, {}),
    ("cast_int_to_float", "Cast", [np.array([1, -2], I64)], 17, {"to": TP.FLOAT}),
    ("cast_float_to_int", "Cast", [np.array([1.7, -2.7], F32)], 17, {"to": TP.INT64}),
    ("cast_to_bool", "Cast", [np.array([0.0, -2.5], F32)], 17, {"to": TP.BOOL}),
    ("add_int", "Add", [np.array([[1], [2]], I64), np.array([10, 20], I64)], 17, {}),
    ("sub_int", "Sub", [np.array([5, -5], I64), np.array([7, 7], I64)], 17, {}),
    ("mul_int", "Mul", [np.array([5, -5], I64), np.array([3], I64)], 17, {}),
    ("div_int_negative", "Div", [np.array([7, -7, 7, -7, 6], I64),
                                 np.array([2, 2, -2, -2, 3], I64)], 17, {}),
    ("div_float", "Div", [np.array([7.0, -1.0], F32), np.array([2.0, 3.0], F32)], 17, {}),
    ("mod", "Mod", [np.array([7, -7, 7, -7], I64), np.array([3, 3, -3, -3], I64)], 17, {}),
    ("fmod", "Mod", [np.array([7.5, -7.5], F32), np.array([2.0, 2.0], F32)], 17,
     {"fmod": 1}),
    ("pow_int", "Pow", [np.array([2, 3], I64), np.array([3, 2], I64)], 17, {}),
    ("pow_float_int_exp", "Pow", [np.array([2.0, 0.5], F32), np.array([3, 2], I64)], 17, {}),
    ("max_variadic", "Max", [np.array([1, 5], I64), np.array([3, 2], I64),
                             np.array([0, 9], I64)], 17, {}),
    ("sum_variadic", "Sum", [np.array([1.0, 5.0], F32), np.array([3.0, 2.0], F32)], 17, {}),
    ("shape_start_end", "Shape", [np.zeros((2, 3, 4, 5), F32)], 17, {"start": 1, "end": -1}),
    ("size", "Size", [np.zeros((2, 3), F32)], 17, {}),
    ("nonzero", "NonZero", [np.array([[1, 0], [0, 3]], I64)], 17, {}),
    ("reduce_prod", "ReduceProd", [np.array([[2, 3], [4, 5]], I64)], 17,
     {"axes": [1], "keepdims": 0}),
    ("reduce_sum_input_axes", "ReduceSum", [np.arange(6, dtype=F32).reshape(2, 3),
                                            np.array([0])], 13, {}),
    ("reduce_sum_noop", "ReduceSum", [np.arange(6, dtype=F32).reshape(2, 3),
                                      np.array([], I64)], 13, {"noop_with_empty_axes": 1}),
    ("reduce_max", "ReduceMax", [np.arange(6, dtype=I64).reshape(2, 3)], 17, {}),
    ("neg", "Neg", [np.array([1, -2], I64)], 17, {}),
    ("abs", "Abs", [np.array([1.5, -2.0], F32)], 17, {}),
    ("sqrt", "Sqrt", [np.array([4.0, 2.0], F32)], 17, {}),
    ("floor", "Floor", [np.array([1.5, -2.5], F32)], 17, {}),
    ("sign", "Sign", [np.array([1.5, -2.5, 0.0], F32)], 17, {}),
    ("identity", "Identity", [np.array([1, 2], I64)], 17, {}),
    # ops outside the numpy table run through their singa handler on the CPU device
    ("matmul_handler", "MatMul", [np.arange(6, dtype=F32).reshape(2, 3),
                                  np.arange(12, dtype=F32).reshape(3, 4) / 7], 17, {}),
    ("softmax_handler", "Softmax", [np.arange(6, dtype=F32).reshape(2, 3) / 3], 17,
     {"axis": -1}),
]


@pytest.mark.parametrize("op, inputs, opset, attrs", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_folded_value_is_onnxruntimes(op, inputs, opset, attrs):
    model = folded_model(op, inputs, opset, **attrs)
    rep = sonnx.prepare(model, "cpu")
    assert not rep.nodes, "the node should be folded at prepare"
    (got,), (want,) = rep.run([]), ort_run(model, {})
    assert got.shape == want.shape
    if want.dtype.kind in "iub":
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_out_of_range_indices_on_the_host_name_the_node():
    model = folded_model("GatherElements", [np.arange(6, dtype=I64).reshape(2, 3),
                                            np.array([[5]])], axis=1)
    with pytest.raises(SingaONNXError, match="GatherElements.*out of range"):
        sonnx.prepare(model, "cpu")


def test_an_op_neither_table_nor_handler_evaluates_is_refused_at_prepare():
    model = folded_model("Det", [np.eye(2, dtype=F32)])
    with pytest.raises(SingaONNXError, match="Det"):
        sonnx.prepare(model, "cpu")


def bert_embeddings_without_token_type_ids(max_positions=512, vocab=30, hidden=8):
    """HF BERT's embeddings when token_type_ids is not passed: the registered buffer of zeros
    (1, max_positions) is expanded to the batch and gathered along the sequence at the
    position ids (torch.gather -> GatherElements), all from constants and the input's shape."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((vocab, hidden)).astype(F32), "word"),
        numpy_helper.from_array(rng.standard_normal((max_positions, hidden)).astype(F32),
                                "pos"),
        numpy_helper.from_array(rng.standard_normal((2, hidden)).astype(F32), "type"),
        numpy_helper.from_array(np.arange(max_positions, dtype=I64)[None], "position_ids"),
        numpy_helper.from_array(np.zeros((1, max_positions), I64), "token_type_buffer"),
        numpy_helper.from_array(np.array([1], I64), "one"),
        numpy_helper.from_array(np.array([0], I64), "zero"),
    ]
    nodes = [
        oh.make_node("Shape", ["input_ids"], ["ids_shape"]),
        oh.make_node("Gather", ["ids_shape", "one"], ["seq_len"], axis=0),
        oh.make_node("Gather", ["ids_shape", "zero"], ["batch"], axis=0),
        oh.make_node("Slice", ["position_ids", "zero", "seq_len", "one"], ["pos_ids"]),
        # buffered = buffer.expand(position_ids.shape[0], -1)
        oh.make_node("Shape", ["pos_ids"], ["pos_shape"]),
        oh.make_node("Gather", ["pos_shape", "zero"], ["pos_rows"], axis=0),
        oh.make_node("Shape", ["token_type_buffer"], ["buffer_shape"]),
        oh.make_node("Gather", ["buffer_shape", "one"], ["buffer_len"], axis=0),
        oh.make_node("Concat", ["pos_rows", "buffer_len"], ["buffer_to"], axis=0),
        oh.make_node("Expand", ["token_type_buffer", "buffer_to"], ["buffered"]),
        # torch.gather(buffered, dim=1, index=position_ids).expand(batch, seq)
        oh.make_node("GatherElements", ["buffered", "pos_ids"], ["gathered"], axis=1),
        oh.make_node("Concat", ["batch", "seq_len"], ["ids_to"], axis=0),
        oh.make_node("Expand", ["gathered", "ids_to"], ["token_type_ids"]),
        oh.make_node("Gather", ["word", "input_ids"], ["we"]),
        oh.make_node("Gather", ["type", "token_type_ids"], ["te"]),
        oh.make_node("Gather", ["pos", "pos_ids"], ["pe"]),
        oh.make_node("Add", ["we", "te"], ["s"]),
        oh.make_node("Add", ["s", "pe"], ["emb"]),
    ]
    graph = oh.make_graph(
        nodes, "bert_embeddings",
        [oh.make_tensor_value_info("input_ids", TP.INT64, ["batch", "seq"])],
        [oh.make_tensor_value_info("emb", TP.FLOAT, ["batch", "seq", hidden])], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("seq", [32, 100])
def test_bert_without_token_type_ids_runs_like_onnxruntime(seq):
    model = bert_embeddings_without_token_type_ids()
    ids = np.random.default_rng(seq).integers(0, 30, (2, seq)).astype(I64)
    rep = sonnx.prepare(model, "cpu")
    assert "GatherElements" in [n.op_type for n in rep.nodes]  # evaluated at run time
    got = rep.run([ids])[0]
    np.testing.assert_allclose(got, ort_run(model, {"input_ids": ids})[0], rtol=1e-6,
                               atol=1e-6)


def channel_shuffle(groups=2):
    """A channel shuffle as torch exports it with a dynamic batch: the target shapes of both
    Reshapes are computed from Shape(x) on the host (Gather, Div, Unsqueeze, Concat)."""
    c0 = [_const("i0", np.array(0, I64)), _const("i1", np.array(1, I64)),
          _const("i2", np.array(2, I64)), _const("i3", np.array(3, I64)),
          _const("g", np.array([groups], I64)), _const("gs", np.array(groups, I64)),
          _const("m1", np.array([-1], I64)), _const("ax0", np.array([0], I64))]
    nodes = c0 + [
        oh.make_node("Shape", ["x"], ["shp"]),
        *[oh.make_node("Gather", ["shp", f"i{k}"], [f"d{k}"], axis=0) for k in range(4)],
        oh.make_node("Div", ["d1", "gs"], ["cpg"]),
        *[oh.make_node("Unsqueeze", [v, "ax0"], [f"u{v}"]) for v in ("d0", "cpg", "d2", "d3")],
        oh.make_node("Concat", ["ud0", "g", "ucpg", "ud2", "ud3"], ["to5"], axis=0),
        oh.make_node("Reshape", ["x", "to5"], ["x5"]),
        oh.make_node("Transpose", ["x5"], ["t5"], perm=[0, 2, 1, 3, 4]),
        oh.make_node("Concat", ["ud0", "m1", "ud2", "ud3"], ["to4"], axis=0),
        oh.make_node("Reshape", ["t5", "to4"], ["y"]),
    ]
    graph = oh.make_graph(
        nodes, "channel_shuffle",
        [oh.make_tensor_value_info("x", TP.FLOAT, ["n", 8, "h", "w"])],
        [oh.make_tensor_value_info("y", TP.FLOAT, ["n", 8, "h", "w"])])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_host_nodes_reuse_their_last_outputs_only_for_the_same_inputs(monkeypatch):
    """An eager run repeats the shape arithmetic of the run before when the input shapes are
    the same (the host nodes take their kept outputs) and evaluates it again when they
    change: every run equals onnxruntime, batch and spatial sizes changing between runs."""
    from singa_onnx import backend

    model = channel_shuffle()
    rep = sonnx.prepare(model, "cpu")
    evaluated = []
    real = backend._evaluate_on_host
    monkeypatch.setattr(backend, "_evaluate_on_host", lambda node, *a: (
        evaluated.append(node.op_type), real(node, *a))[1])
    rng = np.random.default_rng(5)
    counts = []
    for shape in [(2, 8, 3, 4), (2, 8, 3, 4), (3, 8, 3, 4), (3, 8, 5, 2), (2, 8, 3, 4),
                  (2, 8, 3, 4)]:
        x = rng.standard_normal(shape).astype(F32)
        evaluated.clear()
        got = rep.run([x])[0]
        np.testing.assert_array_equal(got, ort_run(model, {"x": x})[0])
        counts.append(len(evaluated))
    full = counts[0]
    assert full >= 8  # the Gathers, the Div, the Unsqueezes, the Concats
    # same shape: nothing evaluated again; a new batch: what depends on it (and only that:
    # the Div reads the channels); a new h and w: their Gathers, Unsqueezes and Concats
    assert counts[1] == 0 and counts[5] == 0
    assert 0 < counts[2] < full and 0 < counts[3] < full and 0 < counts[4] < full


def test_kept_host_outputs_are_copies_and_big_ones_are_not_kept(monkeypatch):
    """What a node keeps is its own copy (a later consumer that wrote into an output could
    not change the next run's value), and values over HOST_MEMO_BYTES are evaluated every
    run (the memory kept per node is bounded)."""
    from singa_onnx import backend

    model = channel_shuffle()
    rep = sonnx.prepare(model, "cpu")
    x = np.random.default_rng(6).standard_normal((2, 8, 3, 4)).astype(F32)
    want = ort_run(model, {"x": x})[0]
    rep.run([x])
    kept_ids = {id(o) for _k, outs in rep._host_memo.values() for o in outs}
    got = []
    real_run_node = rep._run_node

    def spy(node, values):
        real_run_node(node, values)
        for name in node.outputs:
            if isinstance(values.get(name), np.ndarray):
                got.append(id(values[name]))

    monkeypatch.setattr(rep, "_run_node", spy)
    np.testing.assert_array_equal(rep.run([x])[0], want)
    assert kept_ids and got and not kept_ids & set(got)  # every value handed on is a copy
    monkeypatch.setattr(backend, "HOST_MEMO_BYTES", 0)
    evaluated = []
    real = backend._evaluate_on_host
    monkeypatch.setattr(backend, "_evaluate_on_host", lambda node, *a: (
        evaluated.append(node.op_type), real(node, *a))[1])
    np.testing.assert_array_equal(rep.run([x])[0], want)
    assert len(evaluated) >= 8
