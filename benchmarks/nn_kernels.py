"""NN kernel benchmark: the CPU backend's Conv2d / pooling / batch-norm kernels vs PyTorch.

Times each kernel on the layer shapes of the seed CNN (batch 64, 1x28x28) and the CIFAR
ResNet-18 (batch 32, 3x32x32), forward and backward, against the torch.nn.functional / aten
equivalent in the same process with the same number of threads. Calls alternate between the
two libraries and each side reports its median, so machine noise hits both alike.

Usage::

    python benchmarks/nn_kernels.py [--threads 2] [--repeat 15] [--only conv|pool|bn]
                                    [--clock wall|cpu]

``--clock cpu`` times process CPU time instead of wall time and reports the best call; with
``--threads 1`` that is robust to other processes loading the machine (wall-clock ratios are
not: under load, multi-threaded BLAS and numba loops wait at barriers for descheduled threads).
Wall-clock runs report medians.

Ours is timed through ``singa.ops.run`` on preallocated outputs (dispatch included, as in
training). Ratio = ours / torch (lower is better; 1.0 = parity).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
from _timing import median_pair

# name, count in one training step (ResNet-18: how many layers share the shape), x shape,
# (O, kh, kw), stride, pads
CONV_CASES = [
    ("cnn.conv1", 1, (64, 1, 28, 28), (20, 5, 5), 1, 0),
    ("cnn.conv2", 1, (64, 20, 12, 12), (50, 5, 5), 1, 0),
    ("r18.stem", 1, (32, 3, 32, 32), (64, 3, 3), 1, 1),
    ("r18.l1", 4, (32, 64, 32, 32), (64, 3, 3), 1, 1),
    ("r18.l2.down", 1, (32, 64, 32, 32), (128, 3, 3), 2, 1),
    ("r18.l2.sc", 1, (32, 64, 32, 32), (128, 1, 1), 2, 0),
    ("r18.l2", 3, (32, 128, 16, 16), (128, 3, 3), 1, 1),
    ("r18.l3.down", 1, (32, 128, 16, 16), (256, 3, 3), 2, 1),
    ("r18.l3.sc", 1, (32, 128, 16, 16), (256, 1, 1), 2, 0),
    ("r18.l3", 3, (32, 256, 8, 8), (256, 3, 3), 1, 1),
    ("r18.l4.down", 1, (32, 256, 8, 8), (512, 3, 3), 2, 1),
    ("r18.l4.sc", 1, (32, 256, 8, 8), (512, 1, 1), 2, 0),
    ("r18.l4", 3, (32, 512, 4, 4), (512, 3, 3), 1, 1),
]
# name, count, x shape, kernel, stride, pad, mode
POOL_CASES = [
    ("cnn.pool1", 1, (64, 20, 24, 24), 2, 2, 0, "max"),
    ("cnn.pool2", 1, (64, 50, 8, 8), 2, 2, 0, "max"),
    ("r18.stem.pool", 1, (32, 64, 32, 32), 3, 2, 1, "max"),
    ("r18.avgpool", 1, (32, 512, 4, 4), 4, 4, 0, "avg"),
]
# name, count, x shape
BN_CASES = [
    ("r18.bn64", 9, (32, 64, 32, 32)),
    ("r18.bn128", 5, (32, 128, 16, 16)),
    ("r18.bn256", 5, (32, 256, 8, 8)),
    ("r18.bn512", 5, (32, 512, 4, 4)),
]


_clock = time.perf_counter
_stat = statistics.median


class Bench:
    def __init__(self, repeat):
        import torch
        from singa.device import get_device
        from singa.ops import OPS, run
        from singa.tensor import CTensor

        self.torch = torch
        self.dev = get_device("cpu")
        self.OPS, self.run, self.CTensor = OPS, run, CTensor
        self.repeat = repeat
        self.rng = np.random.default_rng(0)
        self.rows = []

    def ct(self, arr):
        t = self.CTensor(arr.shape, self.dev, arr.dtype)
        t.copy_from_numpy(arr)
        return t

    def empty(self, shape, dtype=np.float32):
        return self.CTensor(shape, self.dev, dtype)

    def randn(self, shape):
        return self.rng.standard_normal(shape).astype(np.float32)

    def op(self, name, ins, outs, attrs):
        op = self.OPS[name]
        return lambda: self.run(op, ins, attrs, outs)

    def record(self, group, name, what, count, ours, theirs):
        a, b = median_pair(ours, theirs, self.repeat, clock=_clock, stat=_stat)
        self.rows.append((group, name, what, count, a, b))
        print(f"{name:15s} {what:5s} x{count}  ours {a * 1e3:8.3f} ms   torch {b * 1e3:8.3f} ms"
              f"   ratio {a / b:5.2f}", flush=True)

    # ------------------------------------------------------------------ cases
    def conv_passes(self, xs, wspec, stride, pad):
        """Random x, w, dy of one layer and our three passes on them: ``(x, w, dy,
        {"fwd": call, "bwdX": call, "bwdW": call})``."""
        o, kh, kw = wspec
        x, w = self.randn(xs), self.randn((o, xs[1], kh, kw))
        attrs = {"stride": (stride, stride), "pads": (pad,) * 4}
        y = self.OPS["Conv2d"].reference(x[:1].astype(np.float64), w.astype(np.float64),
                                         **attrs)
        ys = (xs[0],) + y.shape[1:]
        dy = self.randn(ys)
        cx, cw, cdy = self.ct(x), self.ct(w), self.ct(dy)
        return x, w, dy, {
            "fwd": self.op("Conv2d", [cx, cw], [self.empty(ys)], attrs),
            "bwdX": self.op("Conv2dBackwardX", [cdy, cw], [self.empty(xs)],
                            {**attrs, "x_shape": xs}),
            "bwdW": self.op("Conv2dBackwardW", [cdy, cx], [self.empty(w.shape)],
                            {**attrs, "w_shape": w.shape})}

    def conv(self, name, count, xs, wspec, stride, pad):
        torch = self.torch
        x, w, dy, ours = self.conv_passes(xs, wspec, stride, pad)
        tx, tw, tdy = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(dy)
        kw_t = {"stride": stride, "padding": pad}
        self.record("conv", name, "fwd", count, ours["fwd"],
                    lambda: torch.nn.functional.conv2d(tx, tw, **kw_t))
        self.record("conv", name, "bwdX", count, ours["bwdX"],
                    lambda: torch.nn.grad.conv2d_input(xs, tw, tdy, **kw_t))
        self.record("conv", name, "bwdW", count, ours["bwdW"],
                    lambda: torch.nn.grad.conv2d_weight(tx, w.shape, tdy, **kw_t))

    def pool(self, name, count, xs, k, s, p, mode):
        torch = self.torch
        aten = torch.ops.aten
        x = self.randn(xs)
        attrs = {"kernel": (k, k), "stride": (s, s), "pads": (p,) * 4, "mode": mode}
        y = self.OPS["Pooling2d"].reference(x, **attrs).astype(np.float32)
        dy = self.randn(y.shape)
        cx, cy, cdy = self.ct(x), self.ct(y), self.ct(dy)
        tx, tdy = torch.from_numpy(x), torch.from_numpy(dy)
        if mode == "max":
            _, idx = aten.max_pool2d_with_indices(tx, [k, k], [s, s], [p, p])
            fwd = lambda: aten.max_pool2d_with_indices(tx, [k, k], [s, s], [p, p])  # noqa: E731
            bwd = lambda: aten.max_pool2d_with_indices_backward(  # noqa: E731
                tdy, tx, [k, k], [s, s], [p, p], [1, 1], False, idx)
        else:
            fwd = lambda: aten.avg_pool2d(tx, [k, k], [s, s], [p, p])  # noqa: E731
            bwd = lambda: aten.avg_pool2d_backward(  # noqa: E731
                tdy, tx, [k, k], [s, s], [p, p], False, True, None)
        self.record("pool", name, "fwd", count,
                    self.op("Pooling2d", [cx], [self.empty(y.shape)], attrs), fwd)
        self.record("pool", name, "bwd", count,
                    self.op("Pooling2dBackward", [cdy, cx, cy], [self.empty(xs)], attrs), bwd)

    def bn(self, name, count, xs):
        torch = self.torch
        aten = torch.ops.aten
        c = xs[1]
        x, dy = self.randn(xs), self.randn(xs)
        scale, bias = self.randn((c,)), self.randn((c,))
        rm, rv = np.zeros(c, np.float32), np.ones(c, np.float32)
        cins = [self.ct(a) for a in (x, scale, bias, rm, rv)]
        couts = [self.empty(xs)] + [self.empty((c,)) for _ in range(2)] + cins[3:]
        attrs = {"momentum": 0.9, "eps": 1e-5}
        t = [torch.from_numpy(a) for a in (x, scale, bias, rm, rv, dy)]
        self.record("bn", name, "fwd", count, self.op("BatchNormTrain", cins, couts, attrs),
                    lambda: aten.native_batch_norm(t[0], t[1], t[2], t[3], t[4], True, 0.1,
                                                   1e-5))
        _, sm, si = aten.native_batch_norm(t[0], t[1], t[2], t[3], t[4], True, 0.1, 1e-5)
        mean = x.mean(axis=(0, 2, 3))
        inv = 1 / np.sqrt(x.var(axis=(0, 2, 3)) + 1e-5)
        bins = [self.ct(a) for a in (dy, x, scale, mean.astype(np.float32),
                                     inv.astype(np.float32))]
        bouts = [self.empty(xs), self.empty((c,)), self.empty((c,))]
        self.record("bn", name, "bwd", count, self.op("BatchNormBackward", bins, bouts, {}),
                    lambda: aten.native_batch_norm_backward(t[5], t[0], t[1], t[3], t[4], sm,
                                                            si, True, 1e-5,
                                                            [True, True, True]))

    def summary(self):
        print("\nWeighted totals per training step (time x layer count):")
        for prefix, label in (("cnn.", "seed CNN"), ("r18.", "ResNet-18")):
            for group in ("conv", "pool", "bn"):
                rows = [r for r in self.rows if r[0] == group and r[1].startswith(prefix)]
                if not rows:
                    continue
                a = sum(r[3] * r[4] for r in rows)
                b = sum(r[3] * r[5] for r in rows)
                print(f"  {label:10s} {group:5s} ours {a * 1e3:8.2f} ms  torch {b * 1e3:8.2f} ms"
                      f"  ratio {a / b:5.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--only", choices=("conv", "pool", "bn"), default=None)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = ap.parse_args()
    global _clock, _stat
    if args.clock == "cpu":  # interference only adds CPU time: report the best call
        _clock, _stat = time.process_time, min
    blas = "unknown"
    try:
        import threadpoolctl

        threadpoolctl.threadpool_limits(args.threads, user_api="blas")
        info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
        if info:
            blas = f"{info[0]['internal_api']} {info[0].get('version')} " \
                   f"kernels={info[0].get('architecture')}"
    except ImportError:
        pass
    import torch

    torch.set_num_threads(args.threads)
    b = Bench(args.repeat)  # creates the device first: singa_cpu picks numba's threading layer
    try:
        import numba

        numba.set_num_threads(args.threads)
    except ImportError:
        pass
    print(f"clock={args.clock} threads={args.threads} machine={platform.machine()} "
          f"cpus={os.cpu_count()} numpy={np.__version__} ({blas}) torch={torch.__version__} "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(auto)')} "
          f"stat={'min' if args.clock == 'cpu' else 'median'}")
    if args.only in (None, "conv"):
        for case in CONV_CASES:
            b.conv(*case)
    if args.only in (None, "pool"):
        for case in POOL_CASES:
            b.pool(*case)
    if args.only in (None, "bn"):
        for case in BN_CASES:
            b.bn(*case)
    b.summary()


if __name__ == "__main__":
    main()
