"""A deterministic corpus of mutated ONNX models built from valid ones.

``make_case(i, seed, workdir)`` writes case ``i`` into ``workdir`` and returns its path. The
mutations: truncation, bit flips, wrong attribute types, huge dims, cycles, dangling names,
external-data paths (absolute, ``..``, symlinks out of the folder, wrong lengths).
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MUTATIONS = ("truncate", "bitflip", "attr_type", "huge_dim", "cycle", "dangling",
             "external", "huge_init", "bad_raw", "opset")


def _base_models():
    """Small valid models covering conv, pooling, BN, gemm, reshape and shape arithmetic."""
    rng = np.random.default_rng(1234)
    f = np.float32
    conv = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
         helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
         helper.make_node("Relu", ["n"], ["r"]),
         helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
         helper.make_node("Shape", ["p"], ["sh"]),
         helper.make_node("Gather", ["sh", "zero"], ["n0"], axis=0),
         helper.make_node("Unsqueeze", ["n0", "zero1"], ["n0u"]),
         helper.make_node("Concat", ["n0u", "minus1"], ["newshape"], axis=0),
         helper.make_node("Reshape", ["p", "newshape"], ["flat"]),
         helper.make_node("Gemm", ["flat", "fw", "fb"], ["y"], transB=1)],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(f), "w"),
         numpy_helper.from_array(rng.standard_normal(4).astype(f), "b"),
         numpy_helper.from_array(np.ones(4, f), "s"),
         numpy_helper.from_array(np.zeros(4, f), "bb"),
         numpy_helper.from_array(np.zeros(4, f), "m"),
         numpy_helper.from_array(np.ones(4, f), "v"),
         numpy_helper.from_array(np.array(0, np.int64), "zero"),
         numpy_helper.from_array(np.array([0], np.int64), "zero1"),
         numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
         numpy_helper.from_array(rng.standard_normal((4, 64)).astype(f), "fw"),
         numpy_helper.from_array(rng.standard_normal(4).astype(f), "fb")])
    mlp = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"]),
         helper.make_node("Add", ["h", "b1"], ["ha"]),
         helper.make_node("Tanh", ["ha"], ["t"]),
         helper.make_node("ConstantOfShape", ["cs"], ["ones"],
                          value=numpy_helper.from_array(np.ones(1, f))),
         helper.make_node("Mul", ["t", "ones"], ["tm"]),
         helper.make_node("Softmax", ["tm"], ["y"], axis=-1)],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 6])],
        [numpy_helper.from_array(rng.standard_normal((5, 6)).astype(f), "w1"),
         numpy_helper.from_array(rng.standard_normal(6).astype(f), "b1"),
         numpy_helper.from_array(np.array([6], np.int64), "cs")])
    return [helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
            for g in (conv, mlp)]


_BASES = None


def _mutate(model, kind, rng, workdir):
    g = model.graph
    if kind == "attr_type":
        nodes = [n for n in g.node if n.attribute]
        node = nodes[rng.integers(len(nodes))]
        a = node.attribute[rng.integers(len(node.attribute))]
        choice = rng.integers(3)
        name = a.name
        node.attribute.remove(a)
        value = ["str", 3.5, [1.5, 2.5]][choice]
        node.attribute.append(helper.make_attribute(name, value))
    elif kind == "huge_dim":
        t = g.initializer[rng.integers(len(g.initializer))]
        t.dims[rng.integers(len(t.dims))] if t.dims else None
        if t.dims:
            t.dims[rng.integers(len(t.dims))] = int(rng.choice([1 << 40, 1 << 31, -3]))
        else:
            t.dims.append(1 << 40)
        if rng.integers(2):
            vi = g.input[0].type.tensor_type.shape.dim[0]
            vi.dim_value = 1 << 40
    elif kind == "huge_init":
        # a tiny file claiming a huge constant: ConstantOfShape / Expand of huge shapes
        for t in g.initializer:
            if t.data_type == TensorProto.INT64:
                arr = numpy_helper.to_array(t).copy()
                arr[...] = 1 << 40
                t.CopyFrom(numpy_helper.from_array(arr, t.name))
                break
    elif kind == "cycle":
        a, b = rng.choice(len(g.node), 2, replace=False)
        g.node[a].input[0] = g.node[b].output[0]
        g.node[b].input[0] = g.node[a].output[0]
    elif kind == "dangling":
        node = g.node[rng.integers(len(g.node))]
        node.input[rng.integers(len(node.input))] = "nobody_makes_this"
    elif kind == "external":
        t = g.initializer[rng.integers(len(g.initializer))]
        raw = numpy_helper.to_array(t).tobytes()
        t.ClearField("raw_data")
        for field in ("float_data", "int64_data", "int32_data"):
            t.ClearField(field)
        where = int(rng.integers(5))
        if where == 0:
            loc = "/etc/passwd"
        elif where == 1:
            loc = "../../../../etc/passwd"
        elif where == 2:
            link = os.path.join(workdir, "link_out")
            if not os.path.lexists(link):
                os.symlink("/etc/hostname", link)
            loc = "link_out"
        elif where == 3:
            loc = "weights.bin"
            with open(os.path.join(workdir, loc), "wb") as fh:
                fh.write(raw[: len(raw) // 2])  # too short for the dims
        else:
            loc = "weights_ok.bin"
            with open(os.path.join(workdir, loc), "wb") as fh:
                fh.write(raw)  # valid external data inside the folder: must load and run
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", loc), ("offset", "0"), ("length", str(len(raw)))):
            e = t.external_data.add()
            e.key, e.value = k, v
    elif kind == "bad_raw":
        t = g.initializer[rng.integers(len(g.initializer))]
        raw = numpy_helper.to_array(t).tobytes()
        t.ClearField("float_data")
        t.ClearField("int64_data")
        t.raw_data = raw[: max(len(raw) - 4, 0)]
    elif kind == "opset":
        model.opset_import[0].version = int(rng.choice([1, 7, 10, 99]))
    return model


def make_case(i: int, seed: int, workdir: str) -> str:
    global _BASES
    if _BASES is None:
        _BASES = _base_models()
    rng = np.random.default_rng(seed * 7919 + i)
    base = _BASES[i % len(_BASES)]
    kind = MUTATIONS[(i // len(_BASES)) % len(MUTATIONS)]
    model = onnx.ModelProto()
    model.CopyFrom(base)
    data = None
    if kind in ("truncate", "bitflip"):
        data = bytearray(model.SerializeToString())
        if kind == "truncate":
            data = data[: int(rng.integers(0, len(data)))]
        else:
            for _ in range(int(rng.integers(1, 8))):
                pos = int(rng.integers(len(data)))
                data[pos] ^= 1 << int(rng.integers(8))
    else:
        model = _mutate(model, kind, rng, workdir)
        data = model.SerializeToString()
    path = os.path.join(workdir, f"case_{i}.onnx")
    with open(path, "wb") as fh:
        fh.write(bytes(data))
    return path
