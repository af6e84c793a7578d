"""Where a training step's time goes on a GPU: host (Python) against device (kernels).

    python benchmarks/cuda_profile.py [--models cnn resnet18] [--batch cnn=64 resnet18=128]
                                      [--steps 10] [--top 20] [--device cuda:0] [--by-node]

For this framework's graph-mode step and PyTorch's eager step of the same model (the models of
``train_step.py``), after warm-up: the wall time per step; the GPU kernel time per step and the
kernels that take it, read by CUPTI through ``torch.profiler`` (it records every kernel of the
process: cupy's, cuBLAS's and cuDNN's too); and, for this framework, the Python functions that
take the host's time (cProfile). A step whose kernel time is well below its wall time is bound
by the host: launches and Python, not arithmetic. ``--by-node`` also replays the graph's
prebuilt calls with each inside a ``torch.profiler.record_function`` named for its node, and
lists the kernels each op's nodes launch (CUPTI ties a launch to the range open on the
launching thread), to find which op a kernel such as ``cupy_copy`` comes from.
"""

from __future__ import annotations

import argparse
import bisect
import cProfile
import io
import os
import pstats
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_step  # noqa: E402  (the same steps the benchmark times)


def kernel_table(step, steps: int, top: int) -> tuple[float, str]:
    """(kernel seconds per step, the ``top`` kernels by total device time)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        return 0.0, "    (no CUDA device: kernels are not recorded)"
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    if not events:
        return 0.0, "    (no CUDA kernel was recorded)"
    attr = "self_device_time_total" if hasattr(events[0], "self_device_time_total") \
        else "self_cuda_time_total"
    total_us = sum(getattr(e, attr) for e in events)
    events.sort(key=lambda e: -getattr(e, attr))
    lines = [f"    {getattr(e, attr) / steps / 1e3:8.3f} ms {e.count // steps:5d}x  {e.key[:90]}"
             for e in events[:top]]
    return total_us / steps / 1e6, "\n".join(lines)


def node_kernel_table(dev, steps: int, top: int) -> str:
    """The kernels each op's graph nodes launch: device ms per step and launches per step, by
    (node name, kernel), largest first, from ``steps`` replays of the last graph's calls.

    Each call runs inside a ``record_function`` range named for its node and waits for the
    device before the range ends, so every kernel it launched starts within the range on the
    trace's common clock (CUPTI kernel records carry no Python context of their own)."""
    import json
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    plan = dev._last_run_graph.plan
    calls = [(f, i, o, a, f"{n.name}{' (recompute)' if getattr(n, 'remat', False) else ''}")
             for f, i, o, a, n in plan.calls]
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            for f, i, o, a, label in calls:
                with record_function(f"node:{label}"):
                    f(i, o, a)
                    dev.synchronize()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
        prof.export_chrome_trace(tmp.name)
        with open(tmp.name) as f:
            events = json.load(f).get("traceEvents", [])
    ranges = sorted((e["ts"], e["ts"] + e.get("dur", 0), e["name"][5:]) for e in events
                    if e.get("cat") == "user_annotation" and e.get("name", "").startswith("node:"))
    starts = [r[0] for r in ranges]
    by: dict[tuple[str, str], list] = {}
    for e in events:
        if e.get("cat") != "kernel":
            continue
        j = bisect.bisect_right(starts, e["ts"]) - 1
        node = ranges[j][2] if j >= 0 and e["ts"] <= ranges[j][1] else "(outside any node)"
        row = by.setdefault((node, e["name"]), [0, 0.0])
        row[0] += 1
        row[1] += e.get("dur", 0.0)  # microseconds
    if not by:
        return "    (no kernel was recorded)"
    rows = sorted(by.items(), key=lambda kv: -kv[1][1])
    return "\n".join(
        f"    {us / steps / 1e3:8.3f} ms {n / steps:6.1f}x  {node[:34]:34s} {kern[:60]}"
        for (node, kern), (n, us) in rows[:top])


def host_table(step, steps: int, top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    body = out.getvalue().splitlines()
    start = next((i for i, ln in enumerate(body) if "ncalls" in ln), 0)
    return "\n".join("    " + ln for ln in body[start:start + top + 1])


def wall(step, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - t0) / steps


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["cnn", "resnet18"])
    ap.add_argument("--batch", nargs="+", default=["cnn=64", "resnet18=128"])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--by-node", action="store_true",
                    help="also list the kernels each graph node's op launches")
    args = ap.parse_args(argv)
    batch = dict(train_step.BATCH)
    for b in args.batch:
        name, n = b.split("=")
        batch[name] = int(n)
    for name in args.models:
        runs = {"singa graph": train_step.singa_trainer(name, True, args.device, batch[name]),
                "torch eager": train_step.torch_trainer(name, args.device, batch[name])}
        for label, step in runs.items():
            for _ in range(args.warmup):
                step()
            per_step = wall(step, args.steps)
            gpu, kernels = kernel_table(step, args.steps, args.top)
            print(f"== {name} batch {batch[name]}, {label}: wall {per_step * 1e3:.2f} ms/step, "
                  f"kernels {gpu * 1e3:.2f} ms/step ({gpu / per_step:.0%} of wall)")
            print("  top kernels (device time per step, launches per step):")
            print(kernels)
            if label.startswith("singa"):
                print("  host time by Python function (cProfile, all steps):")
                print(host_table(step, args.steps, args.top))
                if args.by_node:
                    from singa import device

                    print("  kernels by graph node (device time per step, launches per step):")
                    print(node_kernel_table(device.get_device(args.device), args.steps,
                                            3 * args.top))
            sys.stdout.flush()


if __name__ == "__main__":
    main()
