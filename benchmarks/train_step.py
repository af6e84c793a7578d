"""Seconds per training step: SINGA (eager and graph) vs PyTorch, side by side in one run.

    python benchmarks/train_step.py [--models mlp cnn resnet18] [--reps 3] [--device cpu]

Same model, same SGD (momentum 0.9, weight decay 1e-5), same batch, threads = cores. Each
measurement is a fresh process that warms up and then times a block of steps; the three
configurations (SINGA eager, SINGA graph, PyTorch) alternate, ``--reps`` times each, so that
load changes on the shared machine hit all of them alike, and no process's idle threads
(OpenBLAS, OpenMP) spin against another's. The report is the median step time of each and the
ratios. Targets (eager): <= 1.5 for cnn and resnet18, <= 2.0 for mlp; graph replay >= 1.3x
faster than eager on mlp and cnn, never slower on resnet18.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = {"mlp": 64, "cnn": 64, "resnet18": 32}
STEPS = {"mlp": 40, "cnn": 20, "resnet18": 5}
TARGET = {"mlp": 2.0, "cnn": 1.5, "resnet18": 1.5}


def singa_trainer(name, use_graph, device_name, batch_size):
    sys.path.insert(0, HERE)
    import _models
    from singa import device, tensor

    dev = device.get_device(device_name)
    x, y = _models.batch(name, batch_size)
    m = _models.singa_model(name)
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=use_graph, sequential=False)

    def step():
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _out, loss = m(tx, ty)
        return float(tensor.to_numpy(loss)[0])  # forces completion on async devices

    step.device = dev  # the worker reads its pool's peak after the timed steps
    return step


def torch_trainer(name, batch_size):
    sys.path.insert(0, HERE)
    import _models
    import torch

    torch.set_num_threads(int(os.environ.get("SINGA_BENCH_THREADS", os.cpu_count())))
    x, y = _models.batch(name, batch_size)
    net, sgd = _models.torch_model(name)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype("int64"))
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        sgd.zero_grad()
        loss = lossf(net(tx), ty)
        loss.backward()
        sgd.step()
        return loss.item()

    return step


def worker(config, name, device_name, steps, warmup, clock=time.perf_counter):
    """Run in a fresh process: time ``steps`` steps after ``warmup``, print them as JSON."""
    bs = BATCH[name]
    step = torch_trainer(name, bs) if config == "torch" else \
        singa_trainer(name, config == "graph", device_name, bs)
    for _ in range(warmup):
        step()
    dev = getattr(step, "device", None)
    if dev is not None:
        dev.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        t0 = clock()
        step()
        times.append(clock() - t0)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    pool = dev.memory_stats()["peak_bytes"] if dev is not None else None
    print(json.dumps({"times": times, "rss": peak_rss, "pool": pool}))


def run_config(config, name, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", config, "--models", name,
           "--device", args.device, "--warmup", str(args.warmup), "--clock", args.clock]
    env = dict(os.environ)
    if args.threads:  # numpy's BLAS (and so our kernel threads) and torch's intra-op threads
        env.update(OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
                   SINGA_BENCH_THREADS=str(args.threads))
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


MB = 1e6


def memory_line(name, mem):
    """Peak RSS (whole process: interpreter, libraries, JIT code, caches) and peak pool bytes
    (tensors only) per configuration: the largest over its processes."""
    cells = []
    for c, runs in mem.items():
        rss = max(r["rss"] for r in runs) / MB
        pool = [r["pool"] for r in runs if r["pool"] is not None]
        cells.append(f"{c} rss {rss:.0f} MB" + (f" (pool {max(pool) / MB:.0f} MB)" if pool else ""))
    return f"{'':<9} memory: " + ", ".join(cells)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn", "resnet18"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for both frameworks (default: all cores)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: the process's CPU time per step, which other processes on a "
                         "shared machine can only inflate (use with --threads 1)")
    ap.add_argument("--worker", choices=["eager", "graph", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        name = args.models[0]
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        worker(args.worker, name, args.device, STEPS[name], args.warmup, clock)
        return
    configs = ["eager", "graph"] + ([] if args.no_torch else ["torch"])
    print(f"device {args.device}, {os.cpu_count()} cores, threads {args.threads or 'all'}, "
          f"{args.clock} clock; per configuration {args.reps} fresh "
          f"processes (alternating), each timing a block of steps after {args.warmup} warm-up")
    print(f"{'model':<9} {'batch':>5} {'eager s':>9} {'graph s':>9} {'torch s':>9} "
          f"{'eager/torch':>11} {'graph/torch':>11} {'eager/graph':>11} {'target':>6}")
    for name in args.models:
        times = {c: [] for c in configs}
        mem = {c: [] for c in configs}
        for _ in range(args.reps):
            for c in configs:
                run = run_config(c, name, args)
                times[c].extend(run["times"])
                mem[c].append(run)
        t = {c: statistics.median(v) for c, v in times.items()}
        line = f"{name:<9} {BATCH[name]:>5} {t['eager']:9.4f} {t['graph']:9.4f}"
        if "torch" in t:
            line += (f" {t['torch']:9.4f} {t['eager'] / t['torch']:11.2f} "
                     f"{t['graph'] / t['torch']:11.2f} {t['eager'] / t['graph']:11.2f} "
                     f"{TARGET[name]:>6.1f}")
        print(line)
        print(memory_line(name, mem), flush=True)


if __name__ == "__main__":
    main()
