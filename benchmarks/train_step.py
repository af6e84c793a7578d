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

    return step


def torch_trainer(name, batch_size):
    sys.path.insert(0, HERE)
    import _models
    import torch

    torch.set_num_threads(os.cpu_count())
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


def worker(config, name, device_name, steps, warmup):
    """Run in a fresh process: time ``steps`` steps after ``warmup``, print them as JSON."""
    bs = BATCH[name]
    step = torch_trainer(name, bs) if config == "torch" else \
        singa_trainer(name, config == "graph", device_name, bs)
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    print(json.dumps(times))


def run_config(config, name, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", config, "--models", name,
           "--device", args.device, "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn", "resnet18"])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--worker", choices=["eager", "graph", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        name = args.models[0]
        worker(args.worker, name, args.device, STEPS[name], args.warmup)
        return
    configs = ["eager", "graph"] + ([] if args.no_torch else ["torch"])
    print(f"device {args.device}, {os.cpu_count()} cores; per configuration {args.reps} fresh "
          f"processes (alternating), each timing a block of steps after {args.warmup} warm-up")
    print(f"{'model':<9} {'batch':>5} {'eager s':>9} {'graph s':>9} {'torch s':>9} "
          f"{'eager/torch':>11} {'graph/torch':>11} {'eager/graph':>11} {'target':>6}")
    for name in args.models:
        times = {c: [] for c in configs}
        for _ in range(args.reps):
            for c in configs:
                times[c].extend(run_config(c, name, args))
        t = {c: statistics.median(v) for c, v in times.items()}
        line = f"{name:<9} {BATCH[name]:>5} {t['eager']:9.4f} {t['graph']:9.4f}"
        if "torch" in t:
            line += (f" {t['torch']:9.4f} {t['eager'] / t['torch']:11.2f} "
                     f"{t['graph'] / t['torch']:11.2f} {t['eager'] / t['graph']:11.2f} "
                     f"{TARGET[name]:>6.1f}")
        print(line, flush=True)


if __name__ == "__main__":
    main()
