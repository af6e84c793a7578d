"""Timing shared by the side-by-side kernel benchmarks (``nn_kernels.py``, ``conv_layers.py``),
and what their reports share: the CPU's name and a product's error against float64."""

from __future__ import annotations

import platform
import statistics
import time


def median_pair(ours, theirs, repeat, rounds=3, pause=0.05, clock=time.perf_counter,
                stat=statistics.median):
    """``stat`` (the median by default) of the seconds per call of each callable.

    Calls run in blocks (``repeat // rounds`` calls of one library, then of the other,
    ``rounds`` times) after two warm-up calls each (numba compilation, workspaces, caches),
    with a ``pause`` before every block: each library's idle worker threads (torch's OpenMP,
    OpenBLAS, onnxruntime) may spin for a while after a call, and must not be timed against
    the other library.
    """
    for _ in range(2):
        ours()
        theirs()
    a, b = [], []
    per_block = max(1, repeat // rounds)
    for _ in range(rounds):
        for fn, acc in ((ours, a), (theirs, b)):
            time.sleep(pause)
            fn()
            for _ in range(per_block):
                t = clock()
                fn()
                acc.append(clock() - t)
    return stat(a), stat(b)


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo``, else the machine's architecture."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def rel_err(c, ref) -> float:
    """Largest |c - ref| over the largest |ref| (the kit's measure for accumulations), ``c``
    widened to float64 first."""
    import numpy as np

    return float(np.abs(np.asarray(c, np.float64) - ref).max() / max(np.abs(ref).max(), 1e-300))
