"""GEMM GFLOP/s of the OpenCL backend vs numpy's BLAS on the same machine, in one run, and
seconds per training step of the seed CNN on the OpenCL device vs the CPU backend.

    python benchmarks/opencl_gemm.py [--sizes 1024 4096] [--device opencl:0] [--repeat 3]
                                     [--cnn-steps 10]

For each size n it times ``C = A @ B`` (float32, n x n) through ``singa.ops`` on the OpenCL
device (kernel time including packing; operands stay on the device) and through ``numpy.matmul``
and prints GFLOP/s (2 n^3 / seconds, best of ``--repeat``) and the ratio; numpy runs first,
before the OpenCL runtime starts its worker threads. The OpenCL result is checked against
numpy. With ``--cnn-steps N`` (0 skips it) it then trains the seed CNN of
``benchmarks/_models.py`` (batch 64) for N steps after 3 warm-up steps, eager and graph, on the
OpenCL device and on ``cpu``, and prints the median seconds per step.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np


def _best(fn, repeat: int) -> float:
    fn()  # warm-up: builds programs, JIT-compiles work-group functions, fills the pool
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def cnn_step_seconds(dev, steps: int, use_graph: bool, warmup: int = 3) -> float:
    """Median seconds per training step of the seed CNN (batch 64) on ``dev``."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _models
    from singa import tensor

    x, y = _models.batch("cnn", 64)
    m = _models.singa_model("cnn")
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    m.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _out, loss = m(tx, ty)
        float(tensor.to_numpy(loss)[0])  # waits for the device
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cnn-steps", type=int, default=10)
    args = ap.parse_args()

    # numpy first: once pocl's worker threads exist they compete with OpenBLAS's threads
    rng = np.random.default_rng(0)
    operands, numpy_seconds = {}, {}
    for n in args.sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        operands[n] = (a, b)
        numpy_seconds[n] = _best(lambda a=a, b=b: np.matmul(a, b), args.repeat)

    from singa import _math
    from singa._ctensor import CTensor
    from singa.device import get_device

    dev = get_device(args.device)
    print(f"device: {dev.name} = {dev.describe()}")
    print(f"host: {platform.processor() or platform.machine()}, numpy {np.__version__}")
    print(f"{'n':>6} {'opencl GFLOP/s':>15} {'numpy GFLOP/s':>14} {'ratio':>7}")
    for n in args.sizes:
        a, b = operands[n]
        ta, tb = CTensor((n, n), dev), CTensor((n, n), dev)
        ta.copy_from_numpy(a)
        tb.copy_from_numpy(b)
        out = CTensor((n, n), dev)

        def run_cl(ta=ta, tb=tb, out=out):
            _math.matmul(ta, tb, out=out)
            dev.synchronize()

        t_cl = _best(run_cl, args.repeat)
        t_np = numpy_seconds[n]
        ref = a @ b
        err = np.abs(out.to_numpy() - ref).max() / np.abs(ref).max()
        assert err < 1e-4, f"OpenCL GEMM differs from numpy: relative error {err}"
        g_cl, g_np = 2 * n**3 / t_cl / 1e9, 2 * n**3 / t_np / 1e9
        print(f"{n:>6} {g_cl:>15.1f} {g_np:>14.1f} {g_cl / g_np:>7.1%}")

    if args.cnn_steps > 0:
        cpu = get_device("cpu")
        print(f"seed CNN, batch 64, median of {args.cnn_steps} steps (s/step)")
        print(f"{'device':>10} {'eager':>8} {'graph':>8}")
        for d in (dev, cpu):
            eager = cnn_step_seconds(d, args.cnn_steps, False)
            graph = cnn_step_seconds(d, args.cnn_steps, True)
            print(f"{d.name:>10} {eager:>8.4f} {graph:>8.4f}")


if __name__ == "__main__":
    main()
