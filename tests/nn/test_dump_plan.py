"""tools/dump_plan.py: the canonical text of a graph plan is the same for two builds of the
same model (block ids are canonical, not addresses) and covers every step and node of the
plan it prints (oracle: the Plan object itself)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("dump_plan", ROOT / "tools" / "dump_plan.py")
dump_plan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(dump_plan)

_STEP = re.compile(r"^(\d+) (\S+) node=(\d+|new)( remat)? r=(\S+) w=(\S+)( free=(\S+))?$")


def test_the_dump_is_deterministic_and_covers_the_plan():
    net, x, y = dump_plan.build("cnn", 2)
    net(x, y)
    plan, rec = net._graph.plan, net._graph.recording
    text = dump_plan.canonical_plan(net._graph)
    assert dump_plan.dump("cnn", 2) == text  # a second model: other addresses, same text

    lines = text.splitlines()
    assert lines[0] == f"serial {plan.serial}"
    order = [int(i) for i in lines[2].removeprefix("order ").split()]
    assert order == plan.order and sorted(order) == list(range(len(rec.nodes)))
    steps = [m for m in map(_STEP.match, lines[lines.index("steps") + 1:]) if m]
    assert [m[2] for m in steps] == [n.name for n in plan.steps]
    assert [int(m[1]) for m in steps] == list(range(len(plan.steps)))
    # every recorded node is a step or inside a fused one; fused ones carry their names
    recorded = [int(m[3]) for m in steps if m[3] != "new"]
    fused = [re.sub(r"^Elementwise\[(.*)\]$", r"\1", m[2]) for m in steps
             if m[3] == "new" and not m[4]]
    assert len(set(recorded)) == len(recorded)
    assert len(recorded) + sum(len(re.split(r"[+,]", f)) for f in fused) == len(rec.nodes)
    # each block read or written has a line, and is freed at its last use
    blocks = {ln.split()[0]: ln for ln in lines[lines.index("blocks") + 1:lines.index("groups")]}
    used = {b for m in steps for b in (m[5] + "," + m[6]).split(",") if b != "-"}
    assert used <= set(blocks) and len(blocks) == len(plan.blocks)
    for m in steps:
        for b in (m[8] or "").split(","):
            if b:
                assert f"last={m[1]} " in blocks[b] + " "
