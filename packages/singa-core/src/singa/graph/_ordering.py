"""Stage 2, ordering: the order in which the recorded nodes run.

Serial: insertion order (``RunGraph(serial=True)``). Otherwise the one of two topological
orders with the smaller planned peak: breadth-first from the nodes with no pending inputs
(SINGA's order), and a memory-aware list schedule (:func:`memory_order`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from ..memory import Block
from ._memory import max_live
from ._plan import Plan
from ._recording import Node

__all__ = ["order", "bfs_order", "memory_order"]


def order(plan: Plan) -> None:
    """Fill ``plan.order`` and ``plan.steps`` (the recorded nodes in that order)."""
    nodes = plan.recording.nodes
    if plan.serial:
        chosen = list(range(len(nodes)))
    else:
        bfs = bfs_order(nodes)
        mem = memory_order(nodes, bfs, plan.planned, plan.blocks)
        chosen = min((bfs, mem), key=lambda o: max_live([nodes[i] for i in o], plan.planned,
                                                         plan.blocks))
    plan.order = chosen
    plan.steps = [nodes[i] for i in chosen]


def bfs_order(nodes: Sequence[Node]) -> list[int]:
    """Breadth-first topological order of ``nodes`` (ids), from those with no predecessor."""
    indeg = [len(n.preds) for n in nodes]
    queue = deque(i for i, d in enumerate(indeg) if d == 0)
    out: list[int] = []
    while queue:
        i = queue.popleft()
        out.append(i)
        for s in nodes[i].succs:
            indeg[s] -= 1
            if indeg[s] == 0:
                queue.append(s)
    if len(out) != len(nodes):  # cannot happen for recorded graphs (a DAG)
        raise RuntimeError("scheduler: dependency cycle in the recorded graph")
    return out


def memory_order(nodes: Sequence[Node], base: Sequence[int], planned: set[int],
                 blocks: dict[int, Block]) -> list[int]:
    """A topological order that keeps the peak of live intermediates low.

    List scheduling: of the nodes whose predecessors have run, take one that does not
    raise the peak reached so far (the bytes it newly makes live fit under it) and, of
    those, the one that frees the most (then the earliest in ``base``); if every ready
    node raises the peak, the one that raises it least. This postpones a large output
    (a weight gradient at the start of the backward pass) until the activations kept
    for the backward pass have been freed, instead of adding it to them.
    """
    rank = {i: p for p, i in enumerate(base)}
    size = {k: blocks[k].nbytes for k in planned}
    touch: list[set[int]] = []
    remaining: dict[int, int] = {}
    for n in nodes:
        ks = {id(b) for b in n.reads + n.writes if id(b) in planned}
        touch.append(ks)
        for k in ks:
            remaining[k] = remaining.get(k, 0) + 1
    live: set[int] = set()
    indeg = [len(n.preds) for n in nodes]
    ready = [i for i, d in enumerate(indeg) if d == 0]
    out: list[int] = []
    cur = peak = 0
    while ready:
        best: tuple[tuple[int, int, int], int, int, int] | None = None
        for j, i in enumerate(ready):
            new = freed = 0
            for k in touch[i]:
                if k not in live:
                    new += size[k]
                if remaining[k] == 1:
                    freed += size[k]
            key = (0, new - freed, rank[i]) if cur + new <= peak else (1, new, rank[i])
            if best is None or key < best[0]:
                best = (key, j, new, freed)
        assert best is not None  # ready is not empty
        _, j, new, freed = best
        i = ready.pop(j)
        out.append(i)
        peak = max(peak, cur + new)
        cur += new - freed
        for k in touch[i]:
            remaining[k] -= 1
            if remaining[k]:
                live.add(k)
            else:
                live.discard(k)
        for s in nodes[i].succs:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if len(out) != len(nodes):  # cannot happen for recorded graphs (a DAG)
        raise RuntimeError("scheduler: dependency cycle in the recorded graph")
    return out
