"""ResNet-18 (224x224) convolutions one by one: our CPU Conv2d kernel against onnxruntime
(``--net depthwise``: depthwise layers of MobileNetV3-small, EfficientNet-B0 and ConvNeXt-tiny
instead, one of each).

Each layer shape of an ImageNet ResNet-18 becomes a one-node ONNX model (its weight an
initializer) run by onnxruntime, and the same convolution runs through ``singa.ops.run`` on
the CPU backend with preallocated output (dispatch included, as in a graph replay). Both use
the process's threads (all cores unless ``--threads``). Calls alternate in blocks between the
two; each side reports its median. The total weighs each shape by how many layers share it,
so it estimates the convolutions' share of one ResNet-18 inference.

    python benchmarks/conv_layers.py [--net resnet18|depthwise] [--batch 1] [--repeat 20]
                                     [--threads N] [--winograd-min-tiles T]

``--winograd-min-tiles`` overrides the Winograd kernel's batch threshold
(``singa_cpu.kernels.winograd.MIN_BATCH_TILES``; a huge value turns Winograd off, 1 takes it
wherever the shape allows), to measure where it pays. Ratio = ours / onnxruntime.
"""

from __future__ import annotations

import argparse
import os
import platform

import numpy as np
import onnx
import onnxruntime as ort
from _timing import median_pair
from onnx import TensorProto, helper, numpy_helper

# name, count in one inference, (C, H, W), (O, k), stride, pad
LAYERS = [
    ("stem", 1, (3, 224, 224), (64, 7), 2, 3),
    ("l1", 4, (64, 56, 56), (64, 3), 1, 1),
    ("l2.down", 1, (64, 56, 56), (128, 3), 2, 1),
    ("l2.sc", 1, (64, 56, 56), (128, 1), 2, 0),
    ("l2", 3, (128, 28, 28), (128, 3), 1, 1),
    ("l3.down", 1, (128, 28, 28), (256, 3), 2, 1),
    ("l3.sc", 1, (128, 28, 28), (256, 1), 2, 0),
    ("l3", 3, (256, 14, 14), (256, 3), 1, 1),
    ("l4.down", 1, (256, 14, 14), (512, 3), 2, 1),
    ("l4.sc", 1, (256, 14, 14), (512, 1), 2, 0),
    ("l4", 3, (512, 7, 7), (512, 3), 1, 1),
]
# name, count, (C, H, W), (O, k), stride, pad, group: depthwise layers (one of each)
DEPTHWISE = [
    ("mbv3.s2", 1, (16, 112, 112), (16, 3), 2, 1, 16),
    ("mbv3.5x5", 1, (240, 14, 14), (240, 5), 1, 2, 240),
    ("mbv3.7x7", 1, (576, 7, 7), (576, 5), 1, 2, 576),
    ("eff.3x3", 1, (32, 112, 112), (32, 3), 1, 1, 32),
    ("eff.s2", 1, (96, 112, 112), (96, 3), 2, 1, 96),
    ("eff.5x5", 1, (240, 28, 28), (240, 5), 1, 2, 240),
    ("cnx.56", 1, (96, 56, 56), (96, 7), 1, 3, 96),
    ("cnx.14", 1, (384, 14, 14), (384, 7), 1, 3, 384),
]
NETS = {"resnet18": LAYERS, "depthwise": DEPTHWISE}


def one_conv_model(x, w, stride, pad, group=1):
    """A one-node ONNX model computing Conv(x, w) with ``w`` as an initializer."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride, stride],
                            pads=[pad] * 4, kernel_shape=list(w.shape[2:]), group=group)
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--net", choices=list(NETS), default="resnet18")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--winograd-min-tiles", type=int, default=None)
    args = p.parse_args()

    from singa.device import get_device
    from singa.ops import OPS, run
    from singa.tensor import CTensor
    from singa_cpu.kernels import winograd
    from singa_cpu.kernels._threads import num_threads

    if args.threads:  # our kernels follow the BLAS thread count
        import threadpoolctl

        threadpoolctl.threadpool_limits(args.threads, user_api="blas")
    if args.winograd_min_tiles is not None:
        winograd.MIN_BATCH_TILES = args.winograd_min_tiles
    threads = args.threads or num_threads()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    dev = get_device("cpu")
    rng = np.random.default_rng(0)

    def ct(arr):
        t = CTensor(arr.shape, dev, arr.dtype)
        t.copy_from_numpy(arr)
        return t

    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
          f"{threads} threads, batch {args.batch}, Winograd min tiles "
          f"{winograd.MIN_BATCH_TILES}")
    print(f"{'layer':8s} {'count':>5s} {'ours ms':>9s} {'ort ms':>9s} {'ratio':>6s}")
    total_ours = total_ort = 0.0
    for name, count, chw, (o, k), stride, pad, *group in NETS[args.net]:
        group = group[0] if group else 1
        cg = chw[0] // group
        x = rng.standard_normal((args.batch, *chw)).astype(np.float32)
        w = (rng.standard_normal((o, cg, k, k)) / np.sqrt(cg * k * k)).astype(np.float32)
        model = one_conv_model(x, w, stride, pad, group)
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        want = sess.run(None, {"x": x})[0]
        attrs = {"stride": (stride, stride), "pads": (pad,) * 4, "group": group}
        y = CTensor(want.shape, dev, np.float32)
        op, ins = OPS["Conv2d"], [ct(x), ct(w)]
        run(op, ins, attrs, [y])
        # an oracle before any timing: a fast wrong kernel must not look good
        np.testing.assert_allclose(y.to_numpy(), want, rtol=1e-3, atol=1e-3)
        ours, theirs = median_pair(
            lambda op=op, ins=ins, attrs=attrs, y=y: run(op, ins, attrs, [y]),
            lambda s=sess, x=x: s.run(None, {"x": x}), args.repeat, rounds=4, pause=0.02)
        total_ours += count * ours
        total_ort += count * theirs
        print(f"{name:8s} {count:5d} {ours * 1e3:9.3f} {theirs * 1e3:9.3f} "
              f"{ours / theirs:6.2f}", flush=True)
    print(f"{'total':8s} {'':5s} {total_ours * 1e3:9.3f} {total_ort * 1e3:9.3f} "
          f"{total_ours / total_ort:6.2f}")


if __name__ == "__main__":
    main()
