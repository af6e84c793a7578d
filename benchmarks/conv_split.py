"""Winograd weight gradient: split by Winograd point vs by batch chunk, on the CPU backend.

    python benchmarks/conv_split.py [r18.l3 r18.l4 ...] [--rounds 12]

For each layer of ``nn_kernels.CONV_CASES`` named, the three convolution passes run with the
CPU backend's own choice and with the point split disabled (``winograd._by_points`` returning
0, i.e. batch chunks with per-thread partial sums), interleaved, threads = cores; the report
is the best and the median of ``--rounds`` pairs of calls. Only the weight gradient (bwdW)
takes the point split at training batch sizes; fwd and bwdX are printed as controls (the same
code both ways, so their ratio shows the noise).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import nn_kernels as nk  # noqa: E402
from singa_cpu.kernels import winograd  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("layers", nargs="*", default=["r18.l3", "r18.l4"])
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args(argv)
    own = winograd._by_points
    b = nk.Bench(1)
    for name, _count, xs, wspec, stride, pad in nk.CONV_CASES:
        if name not in args.layers:
            continue
        passes = b.conv_passes(xs, wspec, stride, pad)[3]
        for what, fn in passes.items():
            times = {"chunks": [], "points": []}
            for _ in range(args.rounds):
                for mode, split in (("chunks", lambda n, t: 0), ("points", own)):
                    winograd._by_points = split
                    fn()
                    t0 = time.perf_counter()
                    fn()
                    fn()
                    times[mode].append((time.perf_counter() - t0) / 2)
            winograd._by_points = own
            c, p = times["chunks"], times["points"]
            print(f"{name:12s} {what:5s} chunks best {min(c) * 1e3:7.2f} ms "
                  f"median {statistics.median(c) * 1e3:7.2f}   points best {min(p) * 1e3:7.2f} "
                  f"median {statistics.median(p) * 1e3:7.2f}   points/chunks best "
                  f"{min(p) / min(c):.2f} median {statistics.median(p) / statistics.median(c):.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
