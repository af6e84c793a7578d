"""float32 GEMM: numpy's BLAS (OpenBLAS in numpy's wheels) against Intel MKL, on this CPU.

    pip install mkl            # Intel's wheel (about 220 MB with intel-openmp and tbb)
    python benchmarks/blas.py [--threads 1] [--repeat 30] [--json PATH]

Answers issue 31's question "is another BLAS faster for our GEMM-bound steps on this CPU?"
with the products those steps make: the MLP's (784-512-512-10 at batch 64, forward and both
gradients), the seed CNN's im2col products, ResNet-18's Winograd point products and 1x1
shortcuts (CIFAR shapes, batch 32), and a 1024^3 product for the peak. MKL is called through
``cblas_sgemm`` of the ``libmkl_rt`` the ``mkl`` wheel installs (ctypes, row-major), numpy's
BLAS through ``np.matmul`` with a preallocated output: both single calls on contiguous
operands, timed alternately in blocks (``_timing.median_pair``), each library held to
``--threads`` threads (environment variables set before either loads).

Each row reports both libraries' GFLOP/s, MKL's time over numpy's (below 1: MKL faster) and
each library's largest error relative to a float64 product, so that a switch can be judged
on "identical within the kit's tolerances" as well as on speed. Without the ``mkl`` wheel the
script says how to install it and exits with status 2.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import cpu_name, median_pair, rel_err  # noqa: E402  (stdlib only: numpy loads after the thread caps)

# name, (m, k, n) of C[m, n] = A[m, k] @ B[k, n]
SHAPES = [
    ("square 1024", (1024, 1024, 1024)),
    ("mlp fc1 fwd", (64, 784, 512)),
    ("mlp fc2 fwd", (64, 512, 512)),
    ("mlp fc1 dX", (64, 512, 784)),
    ("mlp fc1 dW", (784, 64, 512)),
    ("cnn conv2 im2col", (50, 500, 4096)),
    ("r18 l1 winograd point", (64, 64, 2048)),
    ("r18 l2 winograd point", (128, 128, 512)),
    ("r18 l3 winograd point", (256, 256, 128)),
    ("r18 l4 winograd point", (512, 512, 128)),
    ("r18 l3 1x1 shortcut", (256, 128, 2048)),
    ("r18 l4 dW im2col", (512, 2304, 128)),
]

_ROW_MAJOR, _NO_TRANS = 101, 111


def find_mkl() -> str | None:
    """Path of the ``libmkl_rt`` shared library the ``mkl`` wheel puts under
    ``<prefix>/lib``, or None."""
    for prefix in dict.fromkeys((sys.prefix, sys.base_prefix)):
        hits = sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*")))
        if hits:
            return hits[0]
    return None


class MklGemm:
    """``cblas_sgemm`` of MKL's single dynamic library, for C-contiguous float32 matrices."""

    def __init__(self, path: str, threads: int):
        self.lib = ctypes.CDLL(path)
        self.lib.MKL_Set_Num_Threads(ctypes.c_int(threads))
        i, f, p = ctypes.c_int, ctypes.c_float, ctypes.c_void_p
        self.sgemm = self.lib.cblas_sgemm
        self.sgemm.restype = None
        self.sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]

    def version(self) -> str:
        buf = ctypes.create_string_buffer(256)
        self.lib.MKL_Get_Version_String(buf, 256)
        return buf.value.decode(errors="replace")

    def __call__(self, a, b, c) -> None:
        m, k = a.shape
        n = b.shape[1]
        assert a.flags.c_contiguous and b.flags.c_contiguous and c.flags.c_contiguous
        assert a.dtype == b.dtype == c.dtype and a.dtype.str == "<f4" and c.shape == (m, n)
        self.sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes.data, k,
                   b.ctypes.data, n, 0.0, c.ctypes.data, n)


def compare(mkl, repeat: int, shapes=SHAPES):
    """One row per shape: (name, (m, k, n), numpy s, mkl s, numpy err, mkl err)."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows = []
    for name, (m, k, n) in shapes:
        a = rng.standard_normal((m, k), dtype=np.float32)
        b = rng.standard_normal((k, n), dtype=np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        c_np = np.empty((m, n), np.float32)
        c_mkl = np.empty((m, n), np.float32)
        t_np, t_mkl = median_pair(lambda a=a, b=b, c=c_np: np.matmul(a, b, out=c),
                                  lambda a=a, b=b, c=c_mkl: mkl(a, b, c), repeat)
        rows.append((name, (m, k, n), t_np, t_mkl, rel_err(c_np, ref), rel_err(c_mkl, ref)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    for var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_NUM_THREADS"):
        os.environ[var] = str(args.threads)
    path = find_mkl()
    if path is None:
        print("MKL not found: `pip install mkl` in this environment puts libmkl_rt.so under "
              f"{sys.prefix}/lib", file=sys.stderr)
        return 2
    import numpy as np

    mkl = MklGemm(path, args.threads)
    config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    cpu = cpu_name()
    print(f"cpu {cpu!r}, {args.threads} thread(s); numpy {np.__version__} "
          f"({config.get('name')} {config.get('version')}); {mkl.version()}")
    print(f"{'product':<22} {'m x k x n':>16} {'numpy GF/s':>10} {'mkl GF/s':>9} "
          f"{'mkl/numpy':>9} {'numpy err':>9} {'mkl err':>9}")
    rows = compare(mkl, args.repeat)
    for name, (m, k, n), t_np, t_mkl, e_np, e_mkl in rows:
        flops = 2.0 * m * k * n
        print(f"{name:<22} {f'{m}x{k}x{n}':>16} {flops / t_np / 1e9:10.1f} "
              f"{flops / t_mkl / 1e9:9.1f} {t_mkl / t_np:9.2f} {e_np:9.1e} {e_mkl:9.1e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu, "threads": args.threads, "mkl": mkl.version(),
                       "rows": [{"name": r[0], "mkn": r[1], "numpy_s": r[2], "mkl_s": r[3],
                                 "numpy_err": r[4], "mkl_err": r[5]} for r in rows]}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
