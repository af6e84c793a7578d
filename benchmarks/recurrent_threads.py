"""Wall time of the CPU's LSTMSeq/GRUSeq kernels and their backward ops, as a graph replay
runs them (numpy's BLAS held single-threaded around the call), on the threads of
``singa_cpu.kernels._threads`` (all cores, or ``--threads N`` forced).

    python benchmarks/recurrent_threads.py [--threads N] [--cases lstm,35,32,256 ...]

Prints per case the minimum and median wall time of ``--reps`` calls and the median process
CPU time (about threads x wall when the split runs on idle cores). A tree without the split
(before it) runs the same script: ``--min-macs`` is then ignored.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from singa_cpu.kernels import _threads, recurrent

DEFAULT_CASES = ["lstm,35,32,256", "gru,35,32,256", "grulbr,35,32,256", "lstm,35,64,256",
                 "lstm,35,8,128"]


def bench(fn, reps):
    fn()
    fn()
    wall, cpu = [], []
    for _ in range(reps):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    wall.sort()
    cpu.sort()
    return wall[0] * 1e3, wall[len(wall) // 2] * 1e3, cpu[len(cpu) // 2] * 1e3


def kernels(kind, t, b, h, lbr):
    """(forward, backward) closures on random float32 inputs of (T, B, H)."""
    rng = np.random.default_rng(0)
    g = 4 if kind == "lstm" else 3
    f32 = np.float32
    xw = rng.standard_normal((t, b, g * h)).astype(f32)
    r = (rng.standard_normal((g * h, h)) / np.sqrt(h)).astype(f32)
    h0, c0 = (rng.standard_normal((b, h)).astype(f32) for _ in range(2))
    rb = rng.standard_normal(3 * h).astype(f32)
    dy = rng.standard_normal((t, b, h)).astype(f32)
    if kind == "lstm":
        outs = [np.empty((t, b, w), f32) for w in (h, h, 4 * h)]
        attrs = {}

        def fwd():
            recurrent.lstm_seq([xw, r, h0, c0], outs, attrs)

        fwd()
        y, c, gates = outs
        bins = [dy, np.zeros_like(dy), gates, c, y, h0, c0, r]
        bouts = [np.empty(s, f32) for s in ((t, b, 4 * h), (4 * h, h), (b, h), (b, h))]

        def bwd():
            recurrent.lstm_seq_backward(bins, bouts, attrs)
    else:
        outs = [np.empty((t, b, w), f32) for w in (h, 3 * h, h)]
        attrs = {"linear_before_reset": lbr}

        def fwd():
            recurrent.gru_seq([xw, r, rb, h0], outs, attrs)

        fwd()
        y, gates, q = outs
        bins = [dy, gates, q, y, h0, r]
        bouts = [np.empty(s, f32) for s in ((t, b, 3 * h), (3 * h, h), (3 * h,), (b, h))]

        def bwd():
            recurrent.gru_seq_backward(bins, bouts, attrs)
    return fwd, bwd


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, help="force this many threads (default: all)")
    p.add_argument("--cases", nargs="+", default=DEFAULT_CASES,
                   help="kind,T,B,H with kind lstm, gru or grulbr (linear_before_reset)")
    p.add_argument("--min-macs", type=int,
                   help="override the split thresholds (PARALLEL_MIN_MACS, STEP_MIN_MACS)")
    p.add_argument("--reps", type=int, default=30)
    args = p.parse_args()
    if args.threads:
        _threads.num_threads = lambda: args.threads
    if args.min_macs is not None and hasattr(recurrent, "PARALLEL_MIN_MACS"):
        recurrent.PARALLEL_MIN_MACS = args.min_macs
        if hasattr(recurrent, "STEP_MIN_MACS"):
            recurrent.STEP_MIN_MACS = args.min_macs
    with _threads.single_threaded_blas():
        print(f"threads {_threads.num_threads()}; ms: wall min / wall median / cpu median")
        for case in args.cases:
            kind, t, b, h = case.split(",")
            fwd, bwd = kernels(kind.replace("lbr", ""), int(t), int(b), int(h), "lbr" in kind)
            f, bw = bench(fwd, args.reps), bench(bwd, args.reps)
            print(f"{case:18s} forward {f[0]:7.2f} {f[1]:7.2f} {f[2]:7.2f}   "
                  f"backward {bw[0]:7.2f} {bw[1]:7.2f} {bw[2]:7.2f}", flush=True)


if __name__ == "__main__":
    main()
