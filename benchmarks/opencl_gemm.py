"""GEMM GFLOP/s of the OpenCL backend vs numpy's BLAS on the same machine, in one run.

    python benchmarks/opencl_gemm.py [--sizes 1024 4096] [--device opencl:0] [--repeat 3]

For each size n it times ``C = A @ B`` (float32, n x n) through ``singa.ops`` on the OpenCL
device (kernel time including packing; operands stay on the device) and through ``numpy.matmul``
and prints GFLOP/s (2 n^3 / seconds, best of ``--repeat``) and the ratio. The OpenCL result is
checked against numpy.
"""

from __future__ import annotations

import argparse
import platform
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 4096])
    ap.add_argument("--device", default="opencl:0")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from singa import _math
    from singa._ctensor import CTensor
    from singa.device import get_device

    dev = get_device(args.device)
    print(f"device: {dev.name} = {dev.describe()}")
    print(f"host: {platform.processor() or platform.machine()}, numpy {np.__version__}")
    print(f"{'n':>6} {'opencl GFLOP/s':>15} {'numpy GFLOP/s':>14} {'ratio':>7}")
    rng = np.random.default_rng(0)
    for n in args.sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        ta, tb = CTensor((n, n), dev), CTensor((n, n), dev)
        ta.copy_from_numpy(a)
        tb.copy_from_numpy(b)
        out = CTensor((n, n), dev)

        def run_cl(ta=ta, tb=tb, out=out):
            _math.matmul(ta, tb, out=out)
            dev.synchronize()

        t_cl = _best(run_cl, args.repeat)
        t_np = _best(lambda a=a, b=b: np.matmul(a, b), args.repeat)
        ref = a @ b
        err = np.abs(out.to_numpy() - ref).max() / np.abs(ref).max()
        assert err < 1e-4, f"OpenCL GEMM differs from numpy: relative error {err}"
        g_cl, g_np = 2 * n**3 / t_cl / 1e9, 2 * n**3 / t_np / 1e9
        print(f"{n:>6} {g_cl:>15.1f} {g_np:>14.1f} {g_cl / g_np:>7.1%}")


if __name__ == "__main__":
    main()
