"""Peak MemPool bytes per training step: eager vs graph (BFS and serial).

    python benchmarks/graph_memory.py [--models cnn resnet18] [--batches 16 32]

The loop is the usual user loop (``out, loss = model(tx, ty)`` each step). After warm-up the
pool's peak is reset, one step runs, and the peak is read: it covers parameters, optimizer state,
activations, gradients and (graph mode) the planned arena.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import _models  # noqa: E402
from singa import device, tensor  # noqa: E402


def peak_bytes(name, batch_size, mode, dev, warmup=2):
    x, y = _models.batch(name, batch_size)
    m = _models.singa_model(name)
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    m.compile([tx], is_train=True, use_graph=mode != "eager", sequential=mode == "serial")
    out = loss = None
    for _ in range(warmup):
        out, loss = m(tx, ty)
    dev.reset_peak_memory_stats()
    out, loss = m(tx, ty)
    float(tensor.to_numpy(loss)[0])
    peak = dev.memory_stats()["peak_bytes"]
    del out, loss, m
    dev.ResetGraph()
    gc.collect()
    return peak


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["cnn", "resnet18"])
    ap.add_argument("--batches", nargs="+", type=int, default=[16, 32])
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    dev = device.get_device(args.device)
    print(f"device {dev.name}; peak pool MiB during one training step")
    print(f"{'model':<9} {'batch':>5} {'eager':>9} {'graph bfs':>10} {'graph ser':>10} "
          f"{'reduction bfs':>14} {'reduction ser':>14}")
    for name in args.models:
        for bs in args.batches:
            e = peak_bytes(name, bs, "eager", dev)
            b = peak_bytes(name, bs, "bfs", dev)
            s = peak_bytes(name, bs, "serial", dev)
            mib = 1 << 20
            print(f"{name:<9} {bs:>5} {e / mib:9.1f} {b / mib:10.1f} {s / mib:10.1f} "
                  f"{100 * (1 - b / e):13.1f}% {100 * (1 - s / e):13.1f}%")


if __name__ == "__main__":
    main()
