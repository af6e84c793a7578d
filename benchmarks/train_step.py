"""Seconds per training step: SINGA (eager and graph) vs PyTorch, side by side in one run.

    python benchmarks/train_step.py [--models mlp cnn resnet18] [--steps 20] [--device cpu]

Same model, same SGD (momentum 0.9, weight decay 1e-5), same batch, threads = cores. Reports
the median step time of each and the ratios SINGA/PyTorch (the machine is shared and noisy:
compare ratios from the same run). Targets (eager): <= 1.5 for cnn and resnet18, <= 2.0 for mlp.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import _models  # noqa: E402
from singa import device, tensor  # noqa: E402

BATCH = {"mlp": 64, "cnn": 64, "resnet18": 32}
TARGET = {"mlp": 2.0, "cnn": 1.5, "resnet18": 1.5}


def time_singa(name, steps, warmup, use_graph, dev, batch_size):
    x, y = _models.batch(name, batch_size)
    m = _models.singa_model(name)
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    m.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _out, loss = m(tx, ty)
        loss_value = float(tensor.to_numpy(loss)[0])  # forces completion on async devices
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), loss_value


def time_torch(name, steps, warmup, batch_size):
    import torch

    torch.set_num_threads(os.cpu_count())
    x, y = _models.batch(name, batch_size)
    net, sgd = _models.torch_model(name)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y.astype("int64"))
    lossf = torch.nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        sgd.zero_grad()
        loss = lossf(net(tx), ty)
        loss.backward()
        sgd.step()
        loss_value = loss.item()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), loss_value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mlp", "cnn", "resnet18"])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)
    dev = device.get_device(args.device)
    print(f"device {dev.name}, {os.cpu_count()} cores, {args.steps} timed steps "
          f"after {args.warmup} warm-up")
    header = (f"{'model':<9} {'batch':>5} {'eager s':>9} {'graph s':>9} {'torch s':>9} "
              f"{'eager/torch':>11} {'graph/torch':>11} {'eager/graph':>11} {'target':>6}")
    print(header)
    for name in args.models:
        bs = BATCH[name]
        steps = args.steps if name != "resnet18" else max(5, args.steps // 4)
        eager, _ = time_singa(name, steps, args.warmup, False, dev, bs)
        graph, _ = time_singa(name, steps, args.warmup, True, dev, bs)
        if args.no_torch:
            print(f"{name:<9} {bs:>5} {eager:9.4f} {graph:9.4f}")
            continue
        torch_s, _ = time_torch(name, steps, args.warmup, bs)
        print(f"{name:<9} {bs:>5} {eager:9.4f} {graph:9.4f} {torch_s:9.4f} "
              f"{eager / torch_s:11.2f} {graph / torch_s:11.2f} {eager / graph:11.2f} "
              f"{TARGET[name]:>6.1f}")


if __name__ == "__main__":
    main()
