"""float32 LSTMSeq/GRUSeq on the CPU: the compiled loop over the steps against the per-step GEMM.

``singa_cpu.kernels.recurrent`` runs a float32 ``LSTMSeq``/``GRUSeq`` as one numba function
over all steps (``_lstm_seq32``/``_gru_seq32``, the recurrent product by ``_rows_dot32``) when
its batch is at most ``MAX_LOOP_BATCH``'s bound for its hidden size, otherwise per step
numpy's GEMM and a numba pass over the gates. This script times both paths of the forward
kernel on the same arrays for every cell, hidden size and batch asked, forcing each path by
setting ``MAX_LOOP_BATCH`` for the call; the backward ops have no loop (per step one GEMM
and a numba pass at every batch), so only the forward kernels are timed.

Usage::

    python benchmarks/recurrent_loop.py [--cells lstm gru gru_lbr] \\
        [--hidden 64 128 256 512 1024] [--batches 1 2 4 8 12 16 24 32 48 64 128] \\
        [--steps 64] [--reps 7] [--min-sample 0.01] [--json out.json]

Each case calls the kernel directly (``recurrent.lstm_seq(ins, outs, attrs)``; its setup,
such as the GEMM path's transposed copy of the weights, included) on preallocated outputs.
After a warm-up call of each path (compilation), ``--reps`` rounds alternate the two paths
(loop first in even rounds, GEMM first in odd ones); a sample is the calling thread's CPU
time (``time.thread_time``: both paths run on the calling thread alone, the GEMM under
``single_threaded_blas``, the loop serial, the batch split across threads held off, so other
processes' time on a shared core is left out) of enough calls to take ``--min-sample``
seconds, the same count for both paths. Prints per case both medians in ms per call and their
ratio loop / GEMM (< 1: the loop is faster; ``*`` marks the path the module picks), then
per cell and hidden size the batches where the loop is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from singa_cpu.kernels import recurrent

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import cpu_name  # noqa: E402

CELLS = ("lstm", "gru", "gru_lbr")
HIDDEN = (64, 128, 256, 512, 1024)
BATCHES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128)
PATH_CUTOFFS = {"loop": ((0, 1 << 30),), "gemm": ((0, 0),)}  # MAX_LOOP_BATCH forcing each path


def uses_loop(b, h):
    """Whether the module as configured runs a float32 call of batch ``b`` as the loop."""
    return recurrent._runs_as_loop(np.dtype(np.float32), b, h)


def case(cell, t, b, h, seed=0):
    """(kernel, ins, outs, attrs) for one float32 forward call of ``cell``."""
    rng = np.random.default_rng(seed)
    g = 4 if cell == "lstm" else 3
    xw = rng.standard_normal((t, b, g * h), np.float32)
    r = (rng.standard_normal((g * h, h), np.float32) / np.sqrt(h)).astype(np.float32)
    h0 = rng.standard_normal((b, h), np.float32)
    if cell == "lstm":
        outs = [np.empty((t, b, h), np.float32), np.empty((t, b, h), np.float32),
                np.empty((t, b, 4 * h), np.float32)]
        return recurrent.lstm_seq, [xw, r, h0, h0.copy()], outs, {}
    rb = rng.standard_normal(3 * h, np.float32)
    outs = [np.empty((t, b, h), np.float32), np.empty((t, b, 3 * h), np.float32),
            np.empty((t, b, h), np.float32)]
    return recurrent.gru_seq, [xw, r, rb, h0], outs, {"linear_before_reset": cell == "gru_lbr"}


def _call(path, kernel, ins, outs, attrs, n):
    """``n`` calls on ``path``, on the calling thread: the batch split across threads
    (``PARALLEL_MIN_MACS``) is held off, as thread_time measures this thread only."""
    saved = (recurrent.MAX_LOOP_BATCH, getattr(recurrent, "PARALLEL_MIN_MACS", None),
             getattr(recurrent, "STEP_MIN_MACS", None))
    recurrent.MAX_LOOP_BATCH = PATH_CUTOFFS[path]
    recurrent.PARALLEL_MIN_MACS = recurrent.STEP_MIN_MACS = 1 << 62
    try:
        for _ in range(n):
            kernel(ins, outs, attrs)
    finally:
        recurrent.MAX_LOOP_BATCH, recurrent.PARALLEL_MIN_MACS, recurrent.STEP_MIN_MACS = saved


def time_case(cell, t, b, h, reps, min_sample):
    """Median ms per call of each path, ``reps`` alternating rounds."""
    kernel, ins, outs, attrs = case(cell, t, b, h)
    warm = {}
    for path in PATH_CUTOFFS:
        _call(path, kernel, ins, outs, attrs, 1)  # compiles
        start = time.thread_time()
        _call(path, kernel, ins, outs, attrs, 1)
        warm[path] = time.thread_time() - start
    n = max(1, round(min_sample / max(min(warm.values()), 1e-6)))
    samples = {path: [] for path in PATH_CUTOFFS}
    order = list(PATH_CUTOFFS)
    for rnd in range(reps):
        for path in order if rnd % 2 == 0 else order[::-1]:
            start = time.thread_time()
            _call(path, kernel, ins, outs, attrs, n)
            samples[path].append((time.thread_time() - start) / n)
    return {path: 1e3 * statistics.median(s) for path, s in samples.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cells", nargs="+", choices=CELLS, default=list(CELLS))
    p.add_argument("--hidden", nargs="+", type=int, default=list(HIDDEN))
    p.add_argument("--batches", nargs="+", type=int, default=list(BATCHES))
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--reps", type=int, default=7, help="alternating rounds per case")
    p.add_argument("--min-sample", type=float, default=0.01,
                   help="seconds of calls per timed sample (same call count both paths)")
    p.add_argument("--json", help="write the rows to this file")
    args = p.parse_args(argv)
    print(f"# {cpu_name()}, numpy {np.__version__}, "
          f"{args.steps} steps, float32, forward, thread_time medians of {args.reps} rounds")
    print("| cell | hidden | batch | loop ms | GEMM ms | loop / GEMM |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = []
    for cell in args.cells:
        for h in args.hidden:
            for b in args.batches:
                ms = time_case(cell, args.steps, b, h, args.reps, args.min_sample)
                mark = ("*", "") if uses_loop(b, h) else ("", "*")
                ratio = ms["loop"] / ms["gemm"]
                print(f"| {cell} | {h} | {b} | {ms['loop']:.3f}{mark[0]} | "
                      f"{ms['gemm']:.3f}{mark[1]} | {ratio:.2f} |", flush=True)
                rows.append(dict(cell=cell, hidden=h, batch=b, steps=args.steps,
                                 loop_ms=ms["loop"], gemm_ms=ms["gemm"], ratio=ratio,
                                 rule_loop=bool(uses_loop(b, h))))
    print("\nbatches where the loop is faster (loop / GEMM < 1):")
    for cell in args.cells:
        for h in args.hidden:
            faster = [r["batch"] for r in rows
                      if r["cell"] == cell and r["hidden"] == h and r["ratio"] < 1]
            print(f"  {cell:8s} hidden {h:5d}: {faster}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
