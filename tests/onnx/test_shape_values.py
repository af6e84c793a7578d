"""Shape-like values from a model file go through core's shape rule (issue 29).

Shapes, axes, perms, pads, repeats and split sizes reach the handlers from attributes and
from constant operands. ``onnx.checker`` sees a constant only where it is an initializer read
directly by the node; here each constant passes through an ``Identity`` first (as in exported
graphs that compute shapes), so only the handler can refuse it, and attributes and float
operands arrive through ``run_node``, which runs no checker. Every bad value must be a
``SingaONNXError`` naming the node, the attribute or input and the value; the same models with
good values (negative axes, -1 and 0 in reshape, Flatten's axis == rank) match onnxruntime.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from singa.errors import SingaONNXError

X = np.arange(6, dtype=np.float32).reshape(2, 3)
X4 = np.linspace(-1, 1, 64, dtype=np.float32).reshape(1, 4, 4, 4)
W4 = np.linspace(-1, 1, 72, dtype=np.float32).reshape(2, 4, 3, 3)
BIG = 2**62  # int64 values the checker would have caught on a plain initializer


def hidden(op, operands, attrs=None, x=X, out_rank=2, outputs=1, opset=18):
    """One ``op`` node named 'bad' on graph input x (symbolic dims) whose other operands are
    constants routed through Identity nodes (their values reach the handler unchecked)."""
    nodes, inits, names = [], [], ["x"]
    for i, v in enumerate(operands):
        if v is None:
            names.append("")
            continue
        inits.append(numpy_helper.from_array(np.asarray(v), f"k{i}"))
        nodes.append(helper.make_node("Identity", [f"k{i}"], [f"h{i}"]))
        names.append(f"h{i}")
    outs = [f"y{i}" for i in range(outputs)]
    nodes.append(helper.make_node(op, names, outs, name="bad", **(attrs or {})))
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                           [f"x{j}" for j in range(x.ndim)])
    out_info = [helper.make_tensor_value_info(o, TensorProto.FLOAT,
                                              [f"d{j}" for j in range(out_rank)])
                for o in outs]
    graph = helper.make_graph(nodes, "g", [x_info], out_info, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def i64(*v):
    return np.array(v, np.int64)


# (op, operands, attrs, output rank, outputs, what the message must name)
BAD_OPERANDS = [
    ("Reshape", [i64(-3, -2)], {}, 2, 1, "input 'shape'.*-3"),
    ("Reshape", [i64(-1, -1)], {}, 2, 1, "input 'shape'.*-1"),
    ("Reshape", [i64(4, 2)], {}, 2, 1, "input 'shape'.*8 elements, not 6"),
    ("Reshape", [i64(2**32, 2**32, 6)], {}, 3, 1, "input 'shape'.*more elements"),
    ("Expand", [i64(-2, 3)], {}, 2, 1, "input 'shape'.*-2"),
    ("Expand", [i64(4, 3)], {}, 2, 1, "input 'shape'.*does not broadcast"),
    ("Expand", [i64(BIG, BIG, 2, 3)], {}, 4, 1, "input 'shape'.*more elements"),
    ("Expand", [i64(2**40, 2, 3)], {}, 3, 1, "would create.*over the limit"),
    ("Tile", [i64(-1, 2)], {}, 2, 1, "input 'repeats'.*-1"),
    ("Tile", [i64(2)], {}, 2, 1, "input 'repeats'.*needs 2"),
    ("Tile", [i64(BIG, BIG)], {}, 2, 1, "input 'repeats'.*more elements"),
    ("Split", [i64(4, -1)], {"axis": 1}, 2, 2, "input 'split'.*-1"),
    ("Split", [i64(1, 1, 1)], {"axis": 1}, 2, 2, "input 'split'.*needs 2"),
    ("Split", [i64(1, 1)], {"axis": 1}, 2, 2, "input 'split'.*sum to 2"),
    ("Pad", [i64(0, 0, 1)], {}, 2, 1, "input 'pads'.*needs 4"),
    ("Pad", [i64(0, 0, BIG, BIG)], {}, 2, 1, "output shape.*'pads'.*more elements"),
    ("Pad", [i64(1, 1), None, i64(5)], {}, 2, 1, "input 'axes'.*axis 5"),
    ("Squeeze", [i64(5)], {}, 1, 1, "input 'axes'.*axis 5"),
    ("Unsqueeze", [i64(7)], {}, 3, 1, "input 'axes'.*axis 7"),
    ("Unsqueeze", [i64(0, 0)], {}, 4, 1, "input 'axes'.*twice"),
    ("Unsqueeze", [i64(BIG)], {}, 3, 1, "input 'axes'.*axis 4611686018427387904"),
    ("Slice", [i64(0), i64(1), i64(9)], {}, 2, 1, "input 'axes'.*axis 9"),
    ("Slice", [i64(0, 0), i64(1)], {}, 2, 1, "input 'ends'"),
    ("Slice", [i64(0), i64(1), i64(1), i64(0)], {}, 2, 1, "input 'steps'"),
    ("ReduceSum", [i64(9)], {}, 2, 1, "input 'axes'.*axis 9"),
    ("ReduceMax", [i64(-3)], {}, 2, 1, "input 'axes'.*axis -3"),
    ("CumSum", [i64(2)], {}, 2, 1, "input 'axis'.*axis 2"),
]


@pytest.mark.parametrize("op,operands,attrs,rank,outputs,what", BAD_OPERANDS,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(BAD_OPERANDS)])
def test_bad_operand_is_refused_naming_node_and_input(op, operands, attrs, rank, outputs,
                                                      what):
    model = hidden(op, operands, attrs, out_rank=rank, outputs=outputs)
    with pytest.raises(SingaONNXError, match=f"node 'bad': {op} {what}"):
        singa_onnx.prepare(model).run({"x": X})


def _node(op, n_in, outputs=1, **attrs):
    return helper.make_node(op, ["x"] + [f"k{i}" for i in range(n_in)],
                            [f"y{i}" for i in range(outputs)], name="bad", **attrs)


# run_node: no checker, so attributes (and operand types) reach the handler as written
BAD_ATTRIBUTES = [
    (_node("Transpose", 0, perm=[0, 5]), [X], "attribute 'perm'.*not a permutation"),
    (_node("Transpose", 0, perm=[0, 0]), [X], "attribute 'perm'.*not a permutation"),
    (_node("Transpose", 0, perm=[0]), [X], "attribute 'perm'.*needs 2"),
    (_node("Transpose", 0, perm=[1.0, 0.0]), [X], "attribute 'perm'.*integer"),
    (_node("Flatten", 0, axis=3), [X], "attribute 'axis'.*axis 3"),
    (_node("Concat", 0, axis=9), [X], "attribute 'axis'.*axis 9"),
    (_node("Gather", 1, axis=-3), [X, i64(0)], "attribute 'axis'.*axis -3"),
    (_node("Split", 0, 2, axis=7), [X], "attribute 'axis'.*axis 7"),
    (_node("ArgMax", 0, axis=2), [X], "attribute 'axis'.*axis 2"),
    (_node("Softmax", 0, axis=2), [X], "attribute 'axis'.*axis 2"),
    (_node("LogSoftmax", 0, axis=-3), [X], "attribute 'axis'.*axis -3"),
    (_node("LayerNormalization", 1, axis=5), [X, np.ones(3, np.float32)],
     "attribute 'axis'.*axis 5"),
    (_node("Conv", 1, pads=[1, 1]), [X4, W4], "attribute 'pads'.*needs 4"),
    (_node("Conv", 1, pads=[-1, 0, 0, 0]), [X4, W4], "attribute 'pads'.*at least 0"),
    (_node("Conv", 1, strides=[0, 1]), [X4, W4], "attribute 'strides'.*at least 1"),
    (_node("Conv", 1, group=0), [X4, W4], "attribute 'group'.*at least 1"),
    (_node("ConvTranspose", 1, output_padding=[-1, 0]), [X4, W4.transpose(1, 0, 2, 3)],
     "attribute 'output_padding'.*at least 0"),
    (_node("MaxPool", 0, kernel_shape=[0, 2]), [X4], "attribute 'kernel_shape'.*at least 1"),
    (_node("AveragePool", 0, kernel_shape=[2, 2], strides=[0, 1]), [X4],
     "attribute 'strides'.*at least 1"),
    (_node("DepthToSpace", 0, blocksize=0), [X4], "attribute 'blocksize'.*positive"),
    (_node("SpaceToDepth", 0, blocksize=-2), [X4], "attribute 'blocksize'.*positive"),
    (_node("TopK", 1, 2), [X, np.array([2.0], np.float32)], "input 'K'.*must hold integers"),
    (_node("Split", 0, 2, axis=1, num_outputs=3), [X], "attribute 'num_outputs'"),
    (helper.make_node("Resize", ["x", "", "", "s"], ["y"], name="bad"),
     [X4, i64(1, 4)], "input 'sizes'.*needs 4"),
    (helper.make_node("Resize", ["x", "", "s"], ["y"], name="bad"),
     [X4, np.array([1, 1, -2, 2], np.float32)], "input 'scales'.*positive"),
    (helper.make_node("Range", ["s", "l", "d"], ["y"], name="bad"),
     [np.array(0.0, np.float32), np.array(np.inf, np.float32), np.array(1.0, np.float32)],
     "inputs.*no finite length"),
    (_node("Reshape", 1), [X, np.array([3.0, 2.0], np.float32)],
     "input 'shape'.*must hold integers"),
    (_node("Tile", 1), [X, np.array([1.5, 2.0], np.float32)],
     "input 'repeats'.*must hold integers"),
    (_node("Expand", 1), [X, np.array([2.0, 3.0], np.float32)],
     "input 'shape'.*must hold integers"),
    (_node("Pad", 1), [X, np.array([0.0, 1.9, 0.0, 1.0], np.float32)],
     "input 'pads'.*must hold integers"),
]


@pytest.mark.parametrize("node,inputs,what", BAD_ATTRIBUTES,
                         ids=[f"{c[0].op_type}-{i}" for i, c in enumerate(BAD_ATTRIBUTES)])
def test_bad_attribute_or_operand_type_is_refused(node, inputs, what):
    with pytest.raises(SingaONNXError, match=f"node 'bad': {node.op_type} {what}"):
        singa_onnx.run_node(node, inputs, opset_version=18)


def test_opset_11_attribute_axes_are_checked():
    node = helper.make_node("Unsqueeze", ["x"], ["y"], name="bad", axes=[7])
    with pytest.raises(SingaONNXError, match="attribute 'axes'.*axis 7"):
        singa_onnx.run_node(node, [X], opset_version=11)


@pytest.mark.parametrize("shape", [[-1, 2], [2**31 - 1] * 3])
def test_constant_of_shape_refuses_bad_shapes(shape):
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name="bad")
    with pytest.raises(SingaONNXError, match="node 'bad': ConstantOfShape"):
        singa_onnx.run_node(node, [np.array(shape, np.int64)])


# good values: the handler's answer is onnxruntime's
GOOD = [
    ("Reshape", [i64(3, -1)], {}, 2, 1),
    ("Reshape", [i64(0, 3)], {}, 2, 1),
    ("Reshape", [i64(-1)], {}, 1, 1),
    ("Expand", [i64(2, 2, 3)], {}, 3, 1),
    ("Expand", [i64(1, 3)], {}, 2, 1),
    ("Tile", [i64(2, 1)], {}, 2, 1),
    ("Split", [i64(1, 2)], {"axis": -1}, 2, 2),
    ("Pad", [i64(0, 1, 1, 0)], {}, 2, 1),
    ("Pad", [i64(1, 2), None, i64(-1)], {}, 2, 1),
    ("Unsqueeze", [i64(0, -1)], {}, 4, 1),
    ("Slice", [i64(2, 0), i64(0, 1), i64(-1, 0), i64(-1, 1)], {}, 2, 1),
    ("ReduceSum", [i64(-1)], {}, 2, 1),
    ("ReduceMax", [i64(0, -1)], {"keepdims": 0}, 0, 1),
    ("CumSum", [i64(-1)], {}, 2, 1),
    ("Transpose", [], {"perm": [1, 0]}, 2, 1),
    ("Flatten", [], {"axis": 2}, 2, 1),
    ("Flatten", [], {"axis": -2}, 2, 1),
    ("Concat", [X], {"axis": -1}, 2, 1),
]


@pytest.mark.parametrize("op,operands,attrs,rank,outputs", GOOD,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GOOD)])
def test_good_values_match_onnxruntime(op, operands, attrs, rank, outputs):
    model = hidden(op, operands, attrs, out_rank=rank, outputs=outputs)
    onnx.checker.check_model(model, full_check=True)
    want = ort_run(model, {"x": X})
    got = singa_onnx.prepare(model).run({"x": X})
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.asarray(g).shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_squeeze_with_negative_axis_matches_onnxruntime():
    x = X.reshape(2, 1, 3)
    model = hidden("Squeeze", [i64(-2)], x=x, out_rank=2)
    np.testing.assert_array_equal(singa_onnx.prepare(model).run({"x": x})[0],
                                  ort_run(model, {"x": x})[0])


@pytest.mark.parametrize("dims,what", [([-4, -3], "dimension -4"),
                                       ([BIG, BIG], "more elements")])
def test_initializer_dims_use_the_shape_rule(dims, what):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=dims, float_data=[0.0] * 12)
    graph = helper.make_graph([helper.make_node("Identity", ["w"], ["y"])], "g", [],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
                              [t])
    with pytest.raises(SingaONNXError, match=f"initializer 'w'.*{what}"):
        singa_onnx.prepare(helper.make_model(graph))


# ---------------------------------------------------------------- properties
# Drawn values for each op's shape-like operand, including negatives and values past int32
# and int64 products; numpy is the oracle (ONNX's rules are numpy's for these ops). With a
# budget of LIMIT elements, singa must give numpy's answer when numpy accepts and the output
# is non-empty and within the budget, and a SingaONNXError otherwise: never another
# exception, a wrapped axis, a truncated value or a huge allocation.
LIMIT = 10_000
VALUE = st.one_of(st.integers(-3, 6), st.sampled_from([2**31, 2**40, 2**62, -(2**62)]))
XP = np.arange(6, dtype=np.float32).reshape(1, 2, 3)


def _reshape_oracle(x, v):
    shape = [x.shape[i] if d == 0 and i < x.ndim else d for i, d in enumerate(v)]
    if any(d < -1 for d in shape):  # numpy reads any negative as "infer"; ONNX only -1
        raise ValueError(shape)
    return x.reshape(shape)


def _expand_oracle(x, v):
    if any(d < 0 for d in v):
        raise ValueError(v)
    out = np.broadcast_shapes(x.shape, tuple(v))
    return None if math.prod(out) > LIMIT else np.broadcast_to(x, out)


def _tile_oracle(x, v):
    if len(v) != x.ndim or any(d < 0 for d in v):
        raise ValueError(v)
    if 0 in v:  # np.tile would build the nonzero axes first: 2**31 repeats next to a 0
        return np.zeros([d * r for d, r in zip(x.shape, v)], x.dtype)
    return None if x.size * math.prod(v) > LIMIT else np.tile(x, v)


def _pad_oracle(x, v):
    if len(v) != 2 * x.ndim or any(d < 0 for d in v):  # negative pads: not supported here
        raise ValueError(v)
    out = [d + v[i] + v[i + x.ndim] for i, d in enumerate(x.shape)]
    if math.prod(out) > LIMIT:
        return None
    return np.pad(x, list(zip(v[:x.ndim], v[x.ndim:])))


def _squeeze_oracle(x, v):
    if any(not -x.ndim <= a < x.ndim for a in v):
        raise ValueError(v)
    return np.squeeze(x, axis=tuple(v))


def _unsqueeze_oracle(x, v):
    return np.expand_dims(x, tuple(v))


PROPERTY_OPS = {  # op: (oracle, output rank from the drawn values)
    "Reshape": (_reshape_oracle, len),
    "Expand": (_expand_oracle, lambda v: max(len(v), XP.ndim)),
    "Tile": (_tile_oracle, lambda v: XP.ndim),
    "Pad": (_pad_oracle, lambda v: XP.ndim),
    "Squeeze": (_squeeze_oracle, lambda v: max(XP.ndim - len(v), 0)),
    "Unsqueeze": (_unsqueeze_oracle, lambda v: XP.ndim + len(v)),
}


@pytest.mark.parametrize("op", sorted(PROPERTY_OPS))
@settings(max_examples=60, deadline=None)
@given(values=st.lists(VALUE, min_size=1, max_size=6))
def test_drawn_values_give_numpys_answer_or_a_singa_onnx_error(op, values):
    oracle, rank = PROPERTY_OPS[op]
    try:
        with np.errstate(all="ignore"):
            want = oracle(XP, values)
    except (ValueError, TypeError, IndexError, OverflowError, np.exceptions.AxisError):
        want = None
    model = hidden(op, [np.array(values, np.int64)], x=XP, out_rank=rank(values))
    try:
        got = singa_onnx.prepare(model, max_elements=LIMIT).run({"x": XP})[0]
    except SingaONNXError:
        assert want is None or want.size == 0, f"{op} {values}: refused, numpy gives " \
                                               f"shape {want.shape}"
        return
    assert want is not None, f"{op} {values}: accepted ({got.shape}), numpy refuses"
    np.testing.assert_array_equal(got, want)
