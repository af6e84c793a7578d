"""Every exporter against onnxruntime with non-default attributes: one table of small autograd
graphs, each exported with ``sonnx.to_onnx`` and run by onnxruntime on the same inputs as
singa's own forward pass (the oracle), then imported back with ``sonnx.prepare``.

Axes are exercised away from the last one, on 3-D and 4-D inputs, since an exporter that
writes a fixed axis (the last) agrees with singa exactly when the op runs over the last axis.
A meta-test checks that the table reaches every exporter in ``frontend.EXPORTERS``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
import singa_onnx
from conftest import ort_run
from singa import autograd, layer, tensor
from singa_onnx.frontend import EXPORTERS

X3, X4 = (2, 3, 4), (2, 3, 4, 5)
pytestmark = pytest.mark.usefixtures("eval_mode")


@dataclass(frozen=True)
class E:
    """``fn(*inputs)`` -> a Tensor or a list of them, on float32 inputs of ``shapes``."""

    name: str
    fn: object = field(compare=False)
    shapes: tuple = (X3,)
    ints: tuple = ()  # positions of int32 inputs (ids in [0, 4))
    positive: bool = False  # inputs in [0.2, 3) (log, sqrt, pow's base)


def _param(a):
    t = tensor.from_numpy(np.asarray(a, np.float32))
    t.requires_grad = t.stores_grad = True
    return t


def _const(a):
    return tensor.from_numpy(np.asarray(a, np.float32))


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _conv(nb, k, **kw):
    conv = layer.Conv2d(nb, k, **kw)
    return lambda x: conv(x)


def _bn(x):
    bn = layer.BatchNorm2d(x.shape[1])
    bn(x)  # initialises it; then statistics as after training
    c = x.shape[1]
    bn.running_mean.copy_from_numpy(_r(c, seed=1))
    bn.running_var.copy_from_numpy(np.abs(_r(c, seed=2)) + 0.5)
    bn.scale.copy_from_numpy(_r(c, seed=3))
    bn.bias.copy_from_numpy(_r(c, seed=4))
    return bn(x)


def _along(fn, axis):
    return lambda x: fn(x, axis)


def _positive_arg(fn, scale=1.0, shift=0.0):
    """fn(scale x + shift): inputs in [0.2, 3) moved into fn's domain."""
    return lambda x: fn(autograd.add(autograd.mul(x, _const(scale)), _const(shift)))


def _on_booleans(fn):
    return lambda a, b: fn(autograd.greater(a, _const(0)), autograd.less(b, _const(0)))


CASES = []
# the softmax family over every axis of 3-D and 4-D inputs, negative axes included
for _fn in (autograd.softmax, autograd.log_softmax):
    for _shape, _axes in ((X3, (0, 1, 2, -2)), (X4, (0, 1, 2, 3, -3))):
        CASES += [E(f"{_fn.__name__}_{len(_shape)}d_axis{a}", _along(_fn, a), (_shape,))
                  for a in _axes]

CASES += [
    E("flatten_axis0", lambda x: autograd.flatten(x, 0), (X4,)),
    E("flatten_axis2", lambda x: autograd.flatten(x, 2), (X4,)),
    E("flatten_axis-1", lambda x: autograd.flatten(x, -1), (X3,)),
    E("cat_axis0", lambda a, b: autograd.cat([a, b], 0), (X3, (1, 3, 4))),
    E("cat_axis1", lambda a, b, c: autograd.cat([a, b, c], 1), (X4, (2, 1, 4, 5), X4)),
    E("cat_axis-2", lambda a, b: autograd.cat([a, b], -2), (X3, (2, 2, 4))),
    E("split_axis1", lambda x: autograd.split(x, 1, [1, 2]), (X4,)),
    E("split_axis-1", lambda x: autograd.split(x, -1, [3, 1]), (X3,)),
    E("slice_axis1_step2", lambda x: autograd.slice(x, [0], [3], [1], [2]), (X4,)),
    E("slice_negative_step", lambda x: autograd.slice(x, [-1, 3], [-4, 0], [0, 2], [-1, -2]),
      (X3,)),
    E("slice_two_axes", lambda x: autograd.slice(x, [1, 1], [3, 4], [1, 3]), (X4,)),
    E("reduce_sum_axes02", lambda x: autograd.reduce_sum(x, [0, 2], 0), (X4,)),
    E("reduce_sum_axis1_keep", lambda x: autograd.reduce_sum(x, [1], 1), (X3,)),
    E("reduce_mean_axes13", lambda x: autograd.reduce_mean(x, [1, 3], 0), (X4,)),
    E("reduce_mean_axis-2_keep", lambda x: autograd.reduce_mean(x, [-2], 1), (X3,)),
    E("reduce_max_axis1", lambda x: autograd.reduce_max(x, [1], 0), (X4,)),
    E("reduce_min_axes02_keep", lambda x: autograd.reduce_min(x, [0, 2], 1), (X3,)),
    E("reduce_sum_all", lambda x: autograd.reduce_sum(x, None, 0), (X3,)),
    E("transpose_default", lambda x: autograd.transpose(x), (X3,)),
    E("transpose_perm", lambda x: autograd.transpose(x, (0, 2, 3, 1)), (X4,)),
    E("transpose_perm_3d", lambda x: autograd.transpose(x, (1, 0, 2)), (X3,)),
    E("squeeze_axis1", lambda x: autograd.squeeze(x, [1]), ((2, 1, 4, 1),)),
    E("squeeze_all", lambda x: autograd.squeeze(x), ((2, 1, 4, 1),)),
    E("unsqueeze_axes03", lambda x: autograd.unsqueeze(x, [0, 3]), (X3,)),
    E("unsqueeze_axis-2", lambda x: autograd.unsqueeze(x, [-2]), (X3,)),
    E("gather_axis1", lambda x: autograd.gather(x, 1, [2, 0, 2]), (X4,)),
    E("gather_axis-1_negative", lambda x: autograd.gather(x, -1, [-1, 1]), (X3,)),
    E("argmax_axis1", lambda x: autograd.argmax(x, 1, 0), (X4,)),
    E("argmax_axis0_keep", lambda x: autograd.argmax(x, 0, 1), (X3,)),
    E("reshape", lambda x: autograd.reshape(x, [4, -1, 5]), (X4,)),
    E("tile", lambda x: autograd.tile(x, [2, 1, 3]), (X3,)),
    E("expand", lambda x: autograd.expand(x, [2, 3, 4]), ((3, 1),)),
    E("pad_constant", lambda x: autograd.pad(x, "constant", [0, 1, 2, 0, 0, 2, 1, 1], 1.5),
      (X4,)),
    E("pad_reflect", lambda x: autograd.pad(x, "reflect", [0, 0, 2, 1, 0, 0, 1, 3]), (X4,)),
    E("pad_edge", lambda x: autograd.pad(x, "edge", [1, 0, 2, 0, 2, 1]), (X3,)),
    E("upsample", lambda x: autograd.upsample(x, "nearest", [1, 1, 2, 3]), (X4,)),
    E("depth_to_space_dcr", lambda x: autograd.depth_to_space(x, 2), ((1, 8, 2, 3),)),
    E("depth_to_space_crd", lambda x: autograd.depth_to_space(x, 2, "CRD"), ((1, 8, 2, 3),)),
    E("space_to_depth", lambda x: autograd.space_to_depth(x, 2), ((1, 2, 4, 6),)),
    E("where", lambda a, b: autograd.where(a, b, np.array([[1, 0, 0, 1]] * 3, np.float32)),
      (X3, (3, 4))),
    E("cast_int32", lambda x: autograd.cast(autograd.mul(x, _const(10)), tensor.int32),
      (X3,)),
    E("shape", lambda x: autograd.shape(x), (X4,)),
    E("embedding", lambda ids: autograd.embedding(ids, _param(_r(4, 6))), ((2, 3),), (0,)),
    E("dropout_eval", lambda x: autograd.dropout(x, 0, 0.3), (X3,)),
    E("global_average_pool", lambda x: autograd.globalaveragepool(x), (X4,)),
    # nn ops with their geometry
    E("conv_strides_pads", _conv(4, 3, stride=(2, 1), padding=(1, 0)), (X4,)),
    E("conv_dilation", _conv(4, 3, dilation=(2, 1), padding=1), ((1, 3, 9, 8),)),
    E("conv_group_odd_pads", _conv(6, (3, 2), group=3, padding=(0, 2, 1, 0), bias=False),
      ((1, 3, 7, 8),)),
    E("conv_same_upper", _conv(2, 3, stride=2, pad_mode="SAME_UPPER"), ((1, 3, 7, 8),)),
    E("max_pool", lambda x: layer.MaxPool2d(3, (2, 1), (1, 0))(x), ((1, 2, 7, 8),)),
    E("max_pool_odd_pads", lambda x: layer.MaxPool2d(2, 2, (0, 1, 1, 0))(x), ((1, 2, 7, 8),)),
    E("avg_pool", lambda x: layer.AvgPool2d((3, 2), (1, 2), (1, 1))(x), ((1, 2, 7, 8),)),
    E("batch_norm_4d", _bn, (X4,)),
    E("batch_norm_2d", _bn, ((4, 3),)),
    E("gemm_trans", lambda a, b: autograd.gemm(a, b, _param(_r(5)), 0.5, 2.0, 1, 1),
      ((4, 3), (5, 4))),
    E("gemm_transB", lambda a, b: autograd.gemm(a, b, _param(_r(3, 1)), 1.0, -1.0, 0, 1),
      ((3, 4), (5, 4))),
    E("matmul_3d", lambda a, b: autograd.matmul(a, b), (X3, (4, 5))),
    E("add_bias_axis0", lambda x: autograd.add_bias(x, _param(_r(5))), ((3, 5),)),
    E("add_bias_axis1", lambda x: autograd.add_bias(x, _param(_r(3)), 1), ((3, 5),)),
    E("linear", lambda x: layer.Linear(3)(x), ((4, 6),)),
    # whole-sequence recurrent ops (xw (T, B, G*H), h0, c0); reading c makes a one-step chain
    E("lstm_seq_y", lambda xw, h, c: autograd.LSTMSeq()(xw, _param(_r(8, 2, seed=1)), h, c)[0],
      ((3, 2, 8), (2, 2), (2, 2))),
    E("lstm_seq_reverse_y_and_c",
      lambda xw, h, c: list(autograd.LSTMSeq(True)(xw, _param(_r(8, 2, seed=1)), h, c)),
      ((3, 2, 8), (2, 2), (2, 2))),
    E("gru_seq_reverse_linear_before_reset",
      lambda xw, h: autograd.GRUSeq(True, True)(xw, _param(_r(6, 2, seed=1)),
                                                _param(_r(6, seed=2)), h)[0],
      ((3, 2, 6), (2, 2))),
    E("gru_seq", lambda xw, h: autograd.GRUSeq()(xw, _param(_r(6, 2, seed=1)),
                                                 _param(_r(6, seed=2)), h)[0],
      ((3, 2, 6), (2, 2))),
    # activations with their constants
    E("leaky_relu", lambda x: autograd.leakyrelu(x, 0.3)),
    E("elu", lambda x: autograd.elu(x, 0.5)),
    E("selu", lambda x: autograd.selu(x, 1.2, 0.9)),
    E("hard_sigmoid", lambda x: autograd.hardsigmoid(x, 0.3, 0.4)),
    E("clip_both", lambda x: autograd.clip(x, -0.5, 0.7)),
    E("clip_max_only", lambda x: autograd.clip(x, None, 0.3)),
    E("clip_min_only", lambda x: autograd.clip(x, -0.2, None)),
    E("prelu", lambda x: autograd.prelu(x, _param(_r(3, 1, 1))), (X4,)),
    E("pow", lambda a, b: autograd.pow(a, b), (X3, (4,)), positive=True),
    E("sum3", lambda a, b, c: autograd.sum(a, b, c), (X3, X3, X3)),
    E("mean3", lambda a, b, c: autograd.mean(a, b, c), (X3, X3, X3)),
    E("max3", lambda a, b, c: autograd.max(a, b, c), (X3, X3, X3)),
    E("min2", lambda a, b: autograd.min(a, b), (X3, X3)),
]
for _name in ("relu", "sigmoid", "tanh", "exp", "abs", "sign", "ceil", "floor", "rounde",
              "erf", "cos", "cosh", "sin", "sinh", "tan", "atan", "asinh", "softplus",
              "softsign", "negative", "identity", "hardswish"):
    CASES.append(E(_name, getattr(autograd, _name)))
for _name in ("log", "sqrt", "reciprocal", "acosh"):
    CASES.append(E(_name, _positive_arg(getattr(autograd, _name), shift=1.0), positive=True))
for _name in ("acos", "asin", "atanh"):
    CASES.append(E(_name, _positive_arg(getattr(autograd, _name), scale=0.3), positive=True))
for _name in ("add", "sub", "mul", "div", "less", "greater", "equal"):
    CASES.append(E(_name, getattr(autograd, _name), (X4, (4, 1))))
for _name in ("_and", "_or", "_xor"):
    CASES.append(E(_name, _on_booleans(getattr(autograd, _name)), (X3, (3, 4))))
CASES.append(E("_not", lambda x: autograd._not(autograd.greater(x, _const(0)))))


def _inputs(case):
    rng = np.random.default_rng(zlib.crc32(case.name.encode()))
    out = []
    for i, s in enumerate(case.shapes):
        if i in case.ints:
            out.append(rng.integers(0, 4, s).astype(np.int32))
        elif case.positive:
            out.append(rng.uniform(0.2, 3.0, s).astype(np.float32))
        else:
            out.append(rng.standard_normal(s).astype(np.float32))
    return out


def _run(case):
    """(numpy inputs, input Tensors, output Tensors) of ``case``'s forward pass in eval mode."""
    xs = _inputs(case)
    ts = [tensor.from_numpy(x) for x in xs]
    ys = case.fn(*ts)
    return xs, ts, list(ys) if isinstance(ys, (list, tuple)) else [ys]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_exported_graph_matches_singa(case):
    xs, ts, ys = _run(case)
    want = [tensor.to_numpy(y) for y in ys]
    model = singa_onnx.to_onnx(ts, ys)
    onnx.checker.check_model(model, full_check=True)
    feeds = {i.name: x for i, x in zip(model.graph.input, xs)}
    for i, (got, w) in enumerate(zip(ort_run(model, feeds), want)):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5,
                                   err_msg=f"output {i}: onnxruntime against singa")
    for i, (got, w) in enumerate(zip(singa_onnx.prepare(model).run(xs), want)):
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-5,
                                   err_msg=f"output {i}: re-imported against singa")


def _op_types(ys) -> set:
    seen, stack, names = set(), [y.creator for y in ys], set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        names.add(type(op).__name__)
        stack.extend(s for s, _, _, _ in op.src)
    return names


def test_every_exporter_has_a_case():
    reached = set()
    for case in CASES:
        reached |= _op_types(_run(case)[2])
    missing = sorted(set(EXPORTERS) - reached)
    assert not missing, f"exporters no case in CASES reaches: {missing}"
