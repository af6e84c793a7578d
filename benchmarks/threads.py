"""What handing work to a second core costs on this machine, and what it does to the MLP.

    python benchmarks/threads.py [--repeat 200] [--json PATH]

Issue 31's eager MLP step missed eager <= 1.5x PyTorch at two threads on a 2-vCPU AMD Zen 3
host while its one-thread work was well inside (1.15x): the second core bought it little. Two
tables answer why, on whatever machine runs this:

* **Handoffs**, microseconds per round trip, medians: a lock ping-pong between two Python
  threads (the floor of any section of Python worker threads: a futex wake of a thread whose
  core may be halted, then the GIL); an empty section of the CPU backend's own pool
  (``_threads.run_ranges``, every core one empty range), the way it splits big products and
  convolution chunks; an empty ``prange`` loop of numba's threading layer as the backend
  configures it (``workqueue``: sleeping workers; ``omp``, whose workers spin, cost 2-16 us
  on the Zen 3 host of docs/benchmarks.md but takes the cores from the GEMMs); a two-part
  product of 2x2 matrices on the backend's GEMM team (``_team``: helpers that spin without
  the GIL for a while after each product, then sleep; a part no helper has claimed is run by
  the caller). Each is timed back to back and with a 1 ms pause of the caller before every
  call (the worker's core goes idle, as between the ops of a training step).
* **The MLP's eight products** (784-512-512-10, batch 64: forward, and the weight and input
  gradients with their transposed operands as the step makes them): one thread; split by the
  backend's pool; split by the backend's GEMM team (``_threads.matmul``, what a step runs);
  numpy's BLAS on its own threads (all
  cores; its idle workers then spin for about 0.1 s, which the backend avoids because that
  takes the cores from the next convolution's chunks); and ``torch.mm`` on all cores where
  PyTorch is installed. Each with its largest error relative to a float64 product.
* With ``--step MODEL ...`` (``mlp``, ``cnn``, ``resnet18``: train_step.py's models), the
  training step with big products split on the GEMM team against the pool, in one process,
  alternating blocks of ``--step-size`` steps (``--blocks`` each; eager, then graph): median
  milliseconds per step and the median of the paired ratios, and how many products went to
  the team.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import cpu_name, rel_err  # noqa: E402  (stdlib only)

# name, (m, k, n), which operand is a transposed view: C[m, n] = A[m, k] @ B[k, n]
MLP_PRODUCTS = [
    ("fc1 forward", (64, 784, 512), ""),
    ("fc2 forward", (64, 512, 512), ""),
    ("fc3 forward", (64, 512, 10), ""),
    ("fc1 dW = x^T dy", (784, 64, 512), "a"),
    ("fc2 dW", (512, 64, 512), "a"),
    ("fc3 dW", (512, 64, 10), "a"),
    ("fc2 dx = dy W^T", (64, 512, 512), "b"),
    ("fc3 dx", (64, 10, 512), "b"),
]


def _median_us(fn, repeat: int, pause: float = 0.0) -> float:
    for _ in range(10):
        fn()
    times = []
    for _ in range(repeat):
        if pause:
            end = time.perf_counter() + pause  # busy: a sleep would idle this core too
            while time.perf_counter() < end:
                pass
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def ping_pong():
    """A round trip between this thread and a helper blocked on a lock."""
    go, back = threading.Lock(), threading.Lock()
    go.acquire()
    back.acquire()

    def helper():
        while True:
            go.acquire()
            back.release()

    threading.Thread(target=helper, daemon=True, name="threads-bench-ping").start()

    def round_trip():
        go.release()
        back.acquire()

    return round_trip


def handoffs(repeat: int):
    """Rows (what, us back to back, us after a 1 ms pause)."""
    import numpy as np
    from singa_cpu.kernels import _threads
    from singa_cpu.kernels._parallel import _prefer_workqueue

    rows = []
    rt = ping_pong()
    rows.append(("lock ping-pong, 2 Python threads", _median_us(rt, repeat),
                 _median_us(rt, repeat, 1e-3)))

    def empty_section():
        _threads.run_ranges(lambda lo, hi: None, _threads.num_threads())

    n = _threads.num_threads()
    rows.append((f"backend pool: empty section, {n} threads", _median_us(empty_section, repeat),
                 _median_us(empty_section, repeat, 1e-3)))
    _prefer_workqueue()
    import numba

    @numba.njit(parallel=True, nogil=True)
    def loop(x):
        for i in numba.prange(x.shape[0]):
            x[i] += 1.0

    x = np.zeros(numba.get_num_threads(), np.float32)
    loop(x)
    layer = numba.threading_layer()
    rows.append((f"numba prange ({layer}), {numba.get_num_threads()} threads",
                 _median_us(lambda: loop(x), repeat), _median_us(lambda: loop(x), repeat, 1e-3)))
    from singa_cpu.kernels import _team

    team = _team.team(1)
    if team is not None:
        a = np.ones((2, 2), np.float32)
        out = np.empty((2, 2), np.float32)
        spans = _threads.split_spans(2, 2)

        def product():
            team.matmul(a, a, out, spans, True)

        rows.append(("GEMM team: 2-part product, 1 helper", _median_us(product, repeat),
                     _median_us(product, repeat, 1e-3)))
    return rows


def _operands(rng, m, k, n, transposed):
    import numpy as np

    a = (rng.standard_normal((k, m), dtype=np.float32).T if transposed == "a"
         else rng.standard_normal((m, k), dtype=np.float32))
    b = (rng.standard_normal((n, k), dtype=np.float32).T if transposed == "b"
         else rng.standard_normal((k, n), dtype=np.float32))
    return a, b


#: Seconds to wait after a way whose idle threads spin (BLAS's own, torch's OpenMP) before
#: timing the next: OpenBLAS's workers spin ~0.1 s after a call and would share the cores
#: with the next way's threads.
SETTLE_S = 0.3


def products(repeat: int, ways: dict, shapes=MLP_PRODUCTS, spinning=(), settle=SETTLE_S):
    """Rows (name, (m, k, n), {way: (us, err)}) for ``ways``: name -> fn(a, b, out);
    ``settle`` seconds of sleep after each way named in ``spinning``."""
    import numpy as np
    from singa_cpu.kernels import _threads

    rng = np.random.default_rng(0)
    rows = []
    for name, (m, k, n), transposed in shapes:
        a, b = _operands(rng, m, k, n, transposed)
        with _threads.single_threaded_blas():  # BLAS's own threads would spin afterwards
            ref = a.astype(np.float64) @ b.astype(np.float64)
        res = {}
        for way, fn in ways.items():
            out = np.empty((m, n), np.float32)
            res[way] = (_median_us(lambda fn=fn, a=a, b=b, out=out: fn(a, b, out), repeat),
                        rel_err(out, ref))
            if way in spinning:
                time.sleep(settle)
        rows.append((name, (m, k, n), res))
    return rows


def product_ways():
    """The ways of :func:`products`: one thread, the backend's pool and team, then the ways
    whose idle threads spin (BLAS's threads, torch), and the set of the latter."""
    import numpy as np
    from singa_cpu.kernels import _threads

    blas = _threads._find_blas()
    cores = _threads.num_threads()

    def one_thread(a, b, out):
        with _threads.single_threaded_blas():
            np.matmul(a, b, out=out)

    def blas_threads(a, b, out):  # the count is process-wide: set, call, set back
        with _threads.single_threaded_blas():
            blas[1](cores)
            try:
                np.matmul(a, b, out=out)
            finally:
                blas[1](1)

    def split(use_team):
        def run(a, b, out):
            saved, _threads.USE_TEAM = _threads.USE_TEAM, use_team
            try:
                _threads.matmul(a, b, out)
            finally:
                _threads.USE_TEAM = saved
        return run

    ways = {"1 thread": one_thread, f"backend pool ({cores})": split(False),
            f"backend team ({cores})": split(True)}
    spinning = set()
    if blas:
        ways[f"BLAS threads ({cores})"] = blas_threads
        spinning.add(f"BLAS threads ({cores})")
    try:
        import torch
    except ImportError:
        return ways, spinning
    torch.set_num_threads(cores)

    def torch_mm(a, b, out, _cache={}):  # noqa: B006  (the tensors of one shape, made once)
        key = (a.shape, a.strides, b.shape, b.strides)
        if key not in _cache:
            _cache.clear()
            _cache[key] = (torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(out))
        ta, tb, tout = _cache[key]
        torch.mm(ta, tb, out=tout)

    ways[f"torch.mm ({cores})"] = torch_mm
    spinning.add(f"torch.mm ({cores})")
    return ways, spinning


def step_ab(model: str, use_graph: bool, blocks: int, steps: int):
    """(ms per step with the pool, with the team, median paired ratio team/pool, products the
    team took per step) of train_step.py's ``model``, alternating blocks in this process."""
    import train_step
    from singa_cpu.kernels import _team, _threads

    step = train_step.singa_trainer(model, use_graph, "cpu", train_step.BATCH[model])
    for _ in range(3):
        step()
    taken = []
    real = _team.Team.matmul

    def counted(self, *args):
        done = real(self, *args)
        taken.append(done)
        return done

    times = {False: [], True: []}
    saved = _threads.USE_TEAM
    _team.Team.matmul = counted
    try:
        for b in range(blocks):
            for use in ((True, False) if b % 2 else (False, True)):
                _threads.USE_TEAM = use
                step()
                t = time.perf_counter()
                for _ in range(steps):
                    step()
                times[use].append((time.perf_counter() - t) / steps * 1e3)
    finally:
        _threads.USE_TEAM = saved
        _team.Team.matmul = real
    ratio = statistics.median(t / p for t, p in zip(times[True], times[False]))
    per_step = sum(taken) / (blocks * (steps + 1))
    return (statistics.median(times[False]), statistics.median(times[True]), ratio, per_step)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--json", help="also write the tables to this file")
    ap.add_argument("--step", nargs="+", default=[], choices=["mlp", "cnn", "resnet18"],
                    help="also time these training steps with the GEMM team against the pool")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--step-size", type=int, default=20)
    args = ap.parse_args(argv)
    cpu = cpu_name()
    print(f"cpu {cpu!r}, {os.cpu_count()} cores")
    hand = handoffs(args.repeat)
    print(f"{'handoff (round trip)':<44} {'back to back us':>15} {'after 1 ms us':>13}")
    for what, hot, idle in hand:
        print(f"{what:<44} {hot:15.1f} {idle:13.1f}")
    ways, spinning = product_ways()
    rows = products(max(20, args.repeat // 4), ways, spinning=spinning)
    print(f"\n{'MLP product':<18} {'m x k x n':>12} " + " ".join(f"{w:>22}" for w in ways))
    totals = dict.fromkeys(ways, 0.0)
    for name, (m, k, n), res in rows:
        cells = []
        for w in ways:
            us, err = res[w]
            totals[w] += us
            cells.append(f"{us:9.0f} us ({err:.0e})")
        print(f"{name:<18} {f'{m}x{k}x{n}':>12} " + " ".join(f"{c:>22}" for c in cells))
    print(f"{'sum':<18} {'':>12} " + " ".join(f"{totals[w]:12.0f} us{'':8}" for w in ways))
    steps = []
    if args.step:
        print(f"\n{'training step':<18} {'pool ms':>9} {'team ms':>9} {'team/pool':>10} "
              f"{'team products/step':>19}")
    for model in args.step:
        for use_graph in (False, True):
            pool, team, ratio, taken = step_ab(model, use_graph, args.blocks, args.step_size)
            what = f"{model} {'graph' if use_graph else 'eager'}"
            steps.append({"step": what, "pool_ms": pool, "team_ms": team, "ratio": ratio,
                          "team_products_per_step": taken})
            print(f"{what:<18} {pool:9.2f} {team:9.2f} {ratio:10.3f} {taken:19.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"cpu": cpu, "handoffs_us": hand,
                       "products": [{"name": r[0], "mkn": r[1], "ways": r[2]} for r in rows],
                       "steps": steps}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
