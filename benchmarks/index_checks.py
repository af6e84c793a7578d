"""What the range check of index tensors costs (issue 15): Take (Embedding's forward), its
gradient ScatterAdd, and SoftmaxCrossEntropy with class ids, checked vs unchecked, in one run.

    python benchmarks/index_checks.py [cpu|opencl]

Every backend validates indices before its kernel uses them (``singa.backend.check_indices``
on a host copy; on OpenCL one blocking 4-byte-per-index read). The unchecked variant replaces
the check by a no-op, which is what the kernels did before (and what let an out-of-range id
segfault OpenCL). Reports microseconds per op (best of several repeats) and the ratio. The
machine is shared and noisy: compare the ratios.
"""

from __future__ import annotations

import sys
import timeit

import numpy as np


def per_call_us(fn, dev, number=200, repeat=7) -> float:
    def run():
        fn()
        dev.synchronize()

    run()
    return min(timeit.Timer(run).repeat(repeat=repeat, number=number)) / number * 1e6


def _no_check(*args, **kwargs) -> None:
    """The unchecked variant: what the kernels did before the check."""


def main(backend: str = "cpu") -> None:
    import singa._bounds as bounds
    from singa import device
    from singa.ops import OPS, run
    from singa.testing.checks import upload

    dev = device.get_device(backend)
    g = np.random.default_rng(0)
    cases = []
    for vocab, dim, n in ((1000, 64, 32 * 35), (30000, 256, 64 * 35)):
        w = upload(g.standard_normal((vocab, dim)).astype(np.float32), dev)
        ids = upload(g.integers(0, vocab, n).astype(np.int32), dev)
        dy = upload(g.standard_normal((n, dim)).astype(np.float32), dev)
        cases.append((f"Take w({vocab},{dim}) ids({n})",
                      lambda w=w, ids=ids: run(OPS["Take"], [w, ids], {"axis": 0})))
        cases.append((f"ScatterAdd ({n},{dim}) -> ({vocab},{dim})",
                      lambda ids=ids, dy=dy, vocab=vocab, dim=dim: run(
                          OPS["ScatterAdd"], [ids, dy], {"shape": (vocab, dim), "axis": 0})))
    for nb, classes in ((64, 10), (256, 1000)):
        x = upload(g.standard_normal((nb, classes)).astype(np.float32), dev)
        t = upload(g.integers(0, classes, nb).astype(np.int32), dev)
        cases.append((f"SoftmaxCrossEntropy ({nb},{classes})",
                      lambda x=x, t=t: run(OPS["SoftmaxCrossEntropy"], [x, t])))

    real = bounds.check_indices
    # every module that bound the check by name (the CPU kernels), plus singa.backend
    holders = [m for m in list(sys.modules.values())
               if getattr(m, "check_indices", None) is real]
    print(f"backend {dev.name}; microseconds per op, best of 7 x 200")
    print(f"{'op':44s} {'checked':>10s} {'unchecked':>10s} {'ratio':>7s}")
    for name, fn in cases:
        checked = per_call_us(fn, dev)
        for m in holders:
            m.check_indices = _no_check
        try:
            unchecked = per_call_us(fn, dev)
        finally:
            for m in holders:
                m.check_indices = real
        print(f"{name:44s} {checked:10.1f} {unchecked:10.1f} {checked / unchecked:7.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cpu")
