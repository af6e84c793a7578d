"""Distributed training on this machine: DistOpt's gradient synchronisation and weak scaling.

    python benchmarks/dist.py                 # both parts (a few minutes on 2 cores)
    python benchmarks/dist.py --part sync     # only the synchronisation micro-benchmark

Part 1, ``sync`` (2 ranks): the gradients of the benchmark ResNet-18 (CIFAR, 11.2M float32
parameters) synchronised by DistOpt's code path (SINGA's buckets, non-blocking fused
all-reduce, mean) against raw mpi4py ``Allreduce`` of one buffer of the same bytes, in the
same run; plus the blocking fused all-reduce (``buffSize`` 4194304) against one all-reduce per
tensor, float16 on the wire, and sparse top-K at 1% with error feedback; and the cost of the
ranks' agreement check (``Communicator.validate``: one small all-gather per call, done by
DistOpt on its first step only) on the per-tensor all-reduce and on DistOpt's buckets.
Median of ``--reps``.

Part 2, ``scale``: training step time of 2 ranks x 1 thread (DistOpt) against 1 rank x 1
thread (plain SGD) at the same per-rank batch (weak scaling), for the seed CNN (batch 64) and
ResNet-18 (batch 16, 32x32 input), in eager and in graph mode (``--modes``), each with overlap on
and off: in graph mode "on" is the ``dist.overlap`` stage's plan (each bucket's all-reduce
started right after its last gradient, MPI progress between the remaining backward nodes), "off"
the all-reduce after backward. The 1-rank baseline runs in the same mode.

Every configuration runs under ``mpiexec`` from this venv in fresh processes with one thread
per rank (``OMP/OPENBLAS/NUMBA_NUM_THREADS=1``). The machine is shared: compare ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1",
              "MKL_NUM_THREADS": "1"}
BATCH = {"cnn": 64, "resnet18": 16}


def _resnet_grads(dev):
    sys.path.insert(0, HERE)
    import _models
    import numpy as np
    from singa import tensor

    m = _models.singa_model("resnet18")
    x, _ = _models.batch("resnet18", 2)
    tx = tensor.from_numpy(x)
    m.compile([tx], is_train=True, use_graph=False, sequential=False)
    rng = np.random.default_rng(0)
    grads = []
    for p in m.get_params().values():
        g = tensor.from_numpy(rng.standard_normal(p.shape).astype(np.float32))
        g.to_device(dev)
        grads.append((p, g))
    return grads[::-1]  # backward order


def sync_worker(reps):
    import numpy as np
    from mpi4py import MPI
    from singa import device, dist, opt

    dev = device.get_device("cpu")
    comm = dist.get_communicator("mpi")
    comm.validate = False  # DistOpt checks once, not per step
    d = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
    d._checked_params = True
    pairs = _resnet_grads(dev)
    grads = [g for _, g in pairs]
    n_elem = sum(g.size() for g in grads)
    flat = np.random.default_rng(1).standard_normal(n_elem).astype(np.float32)
    # (the raw sums double this buffer per call: float32 does not overflow in these calls)
    world = MPI.COMM_WORLD

    def distopt_sync(half=False, check=False):
        # what DistOpt does after backward (overlap off); the values stay bounded (mean).
        # check=True: what its first step does (every bucket's call compared across ranks)
        works = []
        d._buckets(iter(pairs), 2097152, lambda b: works.append(
            comm.start_all_reduce([g for _, g in b], "mean", half=half, check=check,
                                  inplace=True)))
        for w in works:
            w.wait()

    def checked(fn):
        """``fn`` with the ranks' agreement checked before every call (comm.validate)."""
        def run():
            comm.validate = True
            try:
                fn()
            finally:
                comm.validate = False
        return run

    residuals = {}

    def sparse_sync():
        buckets = []
        d._buckets(iter(pairs), 2097152, buckets.append)
        for k, b in enumerate(buckets):
            gs = [g.data for _, g in b]
            if k not in residuals:
                residuals[k] = d._zeros(sum(g.Size() for g in gs), dev)
            comm.sparse_all_reduce(gs, 0.01, True, residuals[k], check=False)

    cases = {
        "raw mpi4py Allreduce (one buffer)": lambda: world.Allreduce(MPI.IN_PLACE, flat,
                                                                     MPI.SUM),
        "DistOpt sync (buckets, Iallreduce, mean)": distopt_sync,
        "fused_all_reduce (buffSize 4194304), mean": lambda: comm.fused_all_reduce(grads,
                                                                                   "mean"),
        "all_reduce per tensor (unfused), mean": lambda: [comm.all_reduce(g, "mean")
                                                           for g in grads],
        "all_reduce per tensor, mean, calls checked": checked(
            lambda: [comm.all_reduce(g, "mean") for g in grads]),
        "DistOpt sync, buckets checked (first step)": lambda: distopt_sync(check=True),
        "DistOpt sync half (float16 on the wire)": lambda: distopt_sync(True),
        "sparse top-K 1% + error feedback": sparse_sync,
    }
    out = {}
    for name, fn in cases.items():
        fn()  # warm-up
        times = []
        for _ in range(reps):
            world.Barrier()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        # a collective ends when the slowest rank ends it
        out[name] = max(world.allgather(statistics.median(times)))
    if world.Get_rank() == 0:
        print(json.dumps({"elements": n_elem, "tensors": len(grads), "times": out}))


def step_worker(model_name, overlap, steps, warmup, graph):
    """One configuration's median step; ``overlap`` None: every rank trains alone with the
    plain optimizer (no DistOpt), the floor two concurrent 1-thread trainings set here."""
    sys.path.insert(0, HERE)
    import _models
    from singa import device, dist, opt, tensor

    dev = device.get_device("cpu")
    comm = dist.get_communicator("mpi")
    bs = BATCH[model_name]
    m = _models.singa_model(model_name)
    if comm.world_size > 1 and overlap is not None:
        m.set_optimizer(opt.DistOpt(m.optimizer, communicator=comm, overlap=overlap))
    x, y = _models.batch(model_name, bs, seed=comm.rank)
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    tx.copy_from_numpy(x)
    m.compile([tx], is_train=True, use_graph=graph, sequential=False)
    m.train()
    times = []
    for i in range(warmup + steps):
        comm.barrier()
        t0 = time.perf_counter()
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _out, loss = m(tx, ty)
        tensor.to_numpy(loss)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    every = comm._allgather_object(med)
    if comm.rank == 0:
        print(json.dumps({"step": max(every)}))


def launch(n, args):
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec"
    env = {**os.environ, **ONE_THREAD}
    cmd = [exe, "-n", str(n), sys.executable, os.path.abspath(__file__), *args]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stdout}\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["sync", "scale", "all"], default="all")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--scale-reps", type=int, default=3,
                    help="rounds of the weak-scaling configurations (alternating)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["cnn", "resnet18"])
    ap.add_argument("--modes", nargs="+", choices=["eager", "graph"], default=["eager", "graph"])
    ap.add_argument("--worker", choices=["sync", "step"], help=argparse.SUPPRESS)
    ap.add_argument("--overlap", choices=["on", "off", "none"], default="on",
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker == "sync":
        return sync_worker(args.reps)
    if args.worker == "step":
        overlap = {"on": True, "off": False, "none": None}[args.overlap]
        return step_worker(args.models[0], overlap, args.steps, args.warmup,
                           args.modes[0] == "graph")

    if args.part in ("sync", "all"):
        r = launch(2, ["--worker", "sync", "--reps", str(args.reps)])
        t = r["times"]
        raw = t["raw mpi4py Allreduce (one buffer)"]
        print(f"sync of ResNet-18 gradients on 2 ranks: {r['elements']} float32 elements in "
              f"{r['tensors']} tensors ({r['elements'] * 4 / 2**20:.1f} MiB), median of "
              f"{args.reps}")
        print(f"{'what':<44} {'ms':>8} {'x raw':>7}")
        for name, v in t.items():
            print(f"{name:<44} {v * 1e3:8.2f} {v / raw:7.2f}")
    if args.part in ("scale", "all"):
        print(f"\nweak scaling, 1 thread per rank, median step of {args.steps} after "
              f"{args.warmup} warm-up (slowest rank); {args.scale_reps} rounds of the four "
              "configurations, alternating, median of the rounds. 'no sync': 2 ranks each "
              "training alone (no DistOpt), what two concurrent 1-thread trainings cost on "
              "this host without any communication")
        print(f"{'model':<9} {'mode':<6} {'batch/rank':>10} {'1 rank s':>9} {'2 ranks s':>10} "
              f"{'ratio':>6} {'overlap':>8}")
        for name in args.models:
            for mode in args.modes:
                common = ["--models", name, "--modes", mode, "--steps", str(args.steps),
                          "--warmup", str(args.warmup)]
                runs = {"one": [], "on": [], "off": [], "none": []}
                for _ in range(args.scale_reps):  # the host's speed drifts: alternate
                    runs["one"].append(launch(1, ["--worker", "step", *common])["step"])
                    for ov in ("on", "off", "none"):
                        runs[ov].append(launch(2, ["--worker", "step", "--overlap", ov,
                                                   *common])["step"])
                one = statistics.median(runs["one"])
                for ov in ("on", "off", "none"):
                    two = statistics.median(runs[ov])
                    print(f"{name:<9} {mode:<6} {BATCH[name]:>10} {one:9.4f} {two:10.4f} "
                          f"{two / one:6.2f} {'no sync' if ov == 'none' else ov:>8}",
                          flush=True)

if __name__ == "__main__":
    main()
