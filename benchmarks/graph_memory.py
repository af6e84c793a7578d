"""Peak MemPool bytes per training step: eager vs graph (BFS and serial).

    python benchmarks/graph_memory.py [--models cnn resnet18] [--batches 16 32] [--explain]

The loop is the usual user loop (``out, loss = model(tx, ty)`` each step). After warm-up the
pool's peak is reset, one step runs, and the peak is read: it covers parameters, optimizer state,
activations, gradients and (graph mode) the planned arena. ``--explain`` also prints, for each
graph, what is live at its peak node: the arena, the blocks outside it, and the arena's blocks
grouped by the op that wrote them and the ops that still read them.
"""

from __future__ import annotations

import argparse
import collections
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import _models  # noqa: E402
from singa import device, tensor  # noqa: E402
from singa.graph._memory import lifetimes  # noqa: E402

MIB = 1 << 20


def explain(graph) -> None:
    """Print what is live at the graph's peak node (see the module docstring)."""
    steps = graph.plan.steps
    blocks = graph.plan.blocks
    first, last = lifetimes(steps)
    spans = {r: (min(first[k] for k in ms), max(last[k] for k in ms))
             for r, ms in graph.plan.groups.items()}
    live = [0] * (len(steps) + 1)
    for r, (lo, hi) in spans.items():
        live[lo] += blocks[r].nbytes
        live[hi + 1] -= blocks[r].nbytes
    for p in range(1, len(live)):
        live[p] += live[p - 1]
    pk = max(range(len(steps)), key=live.__getitem__)
    name = [n.name + (" (recompute)" if n.remat else "") for n in steps]
    writer, readers = {}, collections.defaultdict(set)
    for p, n in enumerate(steps):
        for b in n.writes:
            writer.setdefault(id(b), p)
        for b in n.reads:
            if p >= pk:
                readers[id(b)].add(name[p])
    outside = collections.Counter()
    for k, b in graph.recording.blocks.items():
        if k not in graph.plan.planned:
            outside[graph.recording.block_type[k]] += b.cls or b.nbytes
    drops = graph.plan.remat_drops
    dropped = sum(blocks[d.block].nbytes for d in drops) / MIB
    print(f"    recomputed: {len(drops)} blocks, {dropped:.1f} MiB, "
          f"{len(steps) - len(graph.recording.nodes)} extra nodes")
    print(f"    peak at node {pk}/{len(steps)} ({name[pk]}): arena "
          f"{sum(n for _, n in graph.plan.arena) / MIB:.1f} MiB, live there {live[pk] / MIB:.1f}; "
          "outside the arena: " + ", ".join(f"{t} {v / MIB:.1f}" for t, v in outside.items()))
    rows = collections.Counter()
    for r, (lo, hi) in spans.items():
        if lo <= pk <= hi:
            k = next((k for k in graph.plan.groups[r] if first[k] <= pk <= last[k]), r)
            src = name[writer[k]] if k in writer else "?"
            rows[(src, ", ".join(sorted(readers[k])) or "-")] += blocks[r].nbytes
    for (src, rd), v in rows.most_common(8):
        print(f"    {v / MIB:8.2f} MiB written by {src}, still read by {rd}")


def peak_bytes(name, batch_size, mode, dev, warmup=2, show=False):
    x, y = _models.batch(name, batch_size)
    m = _models.singa_model(name)
    tx = tensor.Tensor(x.shape, dev, tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    tx.copy_from_numpy(x)
    ty.copy_from_numpy(y)
    m.compile([tx], is_train=True, use_graph=mode != "eager", sequential=mode == "serial")
    out = loss = None
    for _ in range(warmup):
        out, loss = m(tx, ty)
    dev.reset_peak_memory_stats()
    out, loss = m(tx, ty)
    float(tensor.to_numpy(loss)[0])
    peak = dev.memory_stats()["peak_bytes"]
    if show and m._graph is not None:
        print(f"  {name} batch {batch_size} {mode}:")
        explain(m._graph)
    del out, loss, m
    dev.ResetGraph()
    gc.collect()
    return peak


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["cnn", "resnet18"])
    ap.add_argument("--batches", nargs="+", type=int, default=[16, 32])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--explain", action="store_true", help="what is live at each graph's peak")
    args = ap.parse_args(argv)
    dev = device.get_device(args.device)
    print(f"device {dev.name}; peak pool MiB during one training step")
    print(f"{'model':<9} {'batch':>5} {'eager':>9} {'graph bfs':>10} {'graph ser':>10} "
          f"{'reduction bfs':>14} {'reduction ser':>14}")
    for name in args.models:
        for bs in args.batches:
            e = peak_bytes(name, bs, "eager", dev)
            b = peak_bytes(name, bs, "bfs", dev, show=args.explain)
            s = peak_bytes(name, bs, "serial", dev, show=args.explain)
            mib = MIB
            print(f"{name:<9} {bs:>5} {e / mib:9.1f} {b / mib:10.1f} {s / mib:10.1f} "
                  f"{100 * (1 - b / e):13.1f}% {100 * (1 - s / e):13.1f}%")


if __name__ == "__main__":
    main()
