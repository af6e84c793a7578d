"""Dump the graph plan of one graph-mode train step as canonical text.

Builds a zoo model from ``examples/cnn/model`` (the seed CNN or ResNet-18), compiles it with
``use_graph=True``, runs one ``train_one_batch`` (which records, plans and replays) and
prints the plan: the node order, each step's op name, the blocks it reads and writes, where
each block is first written and freed, the block types, in-place groups, arena placement,
and what fusion and rematerialisation did. Block ids are canonicalised (numbered by first
appearance in the recording), so two runs of the same code print the same text; two
versions of singa print the same text exactly when they make the same plan.

    python tools/dump_plan.py cnn > cnn.plan
    python tools/dump_plan.py resnet18 --batch 2 > resnet18.plan
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

_EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "cnn")

#: name -> (zoo module, factory, channels, classes)
MODELS = {
    "cnn": ("cnn", "create_model", 1, 10),
    "resnet18": ("resnet", "resnet18", 3, 10),
}


def build(name: str, batch: int, seed: int = 0):
    """``(model, x, y)``: the compiled graph-mode model and its input placeholders."""
    sys.path.insert(0, os.path.abspath(_EXAMPLES))
    try:
        import importlib

        zoo = importlib.import_module(f"model.{MODELS[name][0]}")
    finally:
        sys.path.pop(0)
    from singa import device, opt, tensor

    _, factory, channels, classes = MODELS[name]
    dev = device.get_default_device()
    dev.SetRandSeed(seed)
    net = getattr(zoo, factory)(num_channels=channels, num_classes=classes)
    size = net.input_size
    rng = np.random.default_rng(seed)
    x = tensor.from_numpy(rng.standard_normal((batch, channels, size, size)).astype(np.float32))
    y = tensor.from_numpy(rng.integers(0, classes, batch).astype(np.int32))
    x.to_device(dev)
    y.to_device(dev)
    net.set_optimizer(opt.SGD(lr=0.01, momentum=0.9))
    net.compile([x], is_train=True, use_graph=True, sequential=False)
    return net, x, y


def canonical_plan(graph) -> str:
    """The plan of ``graph`` (after at least one run) as text with canonical block ids."""
    plan, rec = graph.plan, graph.recording
    ids: dict[int, str] = {}

    def bid(k: int) -> str:
        if k not in ids:
            ids[k] = f"b{len(ids)}"
        return ids[k]

    for n in rec.nodes:  # recording order first, so plan changes never renumber blocks
        for b in (*n.reads, *n.writes):
            bid(id(b))
    for n in plan.steps:
        for b in (*n.reads, *n.writes):
            bid(id(b))

    def blist(blocks) -> str:
        return ",".join(bid(id(b)) for b in blocks) or "-"

    out = [f"serial {plan.serial}", f"recorded {len(rec.nodes)} nodes, {len(plan.steps)} steps",
           "order " + " ".join(map(str, plan.order)), "steps"]
    frees: dict[int, list[str]] = {}
    for k, pos in plan.last.items():
        frees.setdefault(pos, []).append(bid(k))
    for pos, n in enumerate(plan.steps):
        origin = str(n.id) if n.id < len(rec.nodes) and rec.nodes[n.id] is n else "new"
        line = (f"{pos} {n.name} node={origin}{' remat' if n.remat else ''} "
                f"r={blist(n.reads)} w={blist(n.writes)}")
        if pos in frees:
            line += " free=" + ",".join(sorted(frees[pos], key=lambda s: int(s[1:])))
        out.append(line)
    out.append("blocks")
    for k in sorted(plan.blocks, key=lambda k: int(bid(k)[1:])):
        kind = rec.block_type.get(k, "plan")
        where = plan.placement.get(k)
        out.append(f"{bid(k)} {kind} {plan.blocks[k].nbytes}B"
                   f"{' planned' if k in plan.planned else ''}"
                   f"{' fused_away' if k in plan.fused_away else ''}"
                   f" first={plan.first.get(k, '-')} last={plan.last.get(k, '-')}"
                   f"{f' at={where[0]}:{where[1]}' if where is not None else ''}")
    out.append("groups")
    for root, members in sorted(((bid(r), sorted(bid(m) for m in ms))
                                 for r, ms in plan.groups.items()),
                                key=lambda rm: int(rm[0][1:])):
        out.append(f"{root}: {' '.join(members)}")
    out.append("arena " + " ".join(str(nbytes) for _, nbytes in plan.arena))
    out.append("remat")
    for d in plan.remat_drops:
        out.append(f"{bid(d.block)} lo={d.lo} hi={d.hi} cost={d.cost} "
                   f"steps={[(p, bid(k)) for p, k in d.steps]}")
    return "\n".join(out) + "\n"


def dump(name: str, batch: int, seed: int = 0) -> str:
    """Build ``name``, run one graph-mode train step and return its canonical plan."""
    net, x, y = build(name, batch, seed)
    net(x, y)
    return canonical_plan(net._graph)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    sys.stdout.write(dump(args.model, args.batch, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
