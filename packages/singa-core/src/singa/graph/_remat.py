"""Stage 4, rematerialisation: drop long-lived intermediates, recompute them exactly.

A training step keeps many activations from the forward pass until the backward pass reads
them; where they are all alive at once the arena reaches its peak. Some of them are outputs of
cheap, deterministic ops (``OpDef.recompute``: elementwise ops, batch norm) whose inputs are
kept anyway: a ReLU output ``r = relu(bn(x))`` is kept for ``ReLUBackward`` and the next
convolution's weight gradient, while the convolution output ``x`` is kept for
``BatchNormBackward``. Such a block can be freed after its last forward use and recomputed,
bitwise identically, just before its first backward use: the same kernels on the same input
values (state outputs such as running statistics go to scratch memory, ``OpDef.state``).

:func:`choose` chooses what to drop with the planner's own numbers, the bytes of planned blocks
live at each position of the order (in-place reuse counted): repeatedly, of the blocks live but
unused across the peak position, drop the one whose recomputation lowers the peak the most
(ties: the fewest positions at the peak, then the fewest bytes the recompute touches), and
keep the shortest prefix of choices that reaches the lowest peak, or the first one at or
below the memory budget the stage is given (the device's :meth:`Device.graph_memory_budget`
under ``SINGA_GRAPH_RECOMPUTE=auto``, 0 under ``1``): a graph whose arena fits the budget is
left as it is, since every recompute costs time. :func:`apply` builds the new
sequence of nodes: recompute nodes inserted before the first later use, later readers rewired
to the recomputed block. Nothing here is backend-specific: recompute nodes are kernel calls
like any other, placed in the same arena. :func:`rematerialize` is the stage: it keeps the
result only if the planned peak went down. Switch: ``SINGA_GRAPH_RECOMPUTE``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from ..memory import Block
from ..ops._fusion import node_op
from ..ops._registry import KernelCall
from ._memory import live_profile, max_live
from ._plan import Plan
from ._recording import Node

__all__ = ["Drop", "rematerialize", "choose", "apply"]

#: Longest chain of recomputed nodes for one dropped block (e.g. BatchNormTrain -> Add -> ReLU).
MAX_CHAIN = 4

#: Most bytes a recompute may read and write per byte it frees. Recomputing a ReLU output from
#: the convolution output before its batch norm touches 4x its size (BN reads x, writes y; ReLU
#: reads y, writes r); the saved statistics of that batch norm (C values) are never worth a
#: second pass over x.
MAX_COST_PER_BYTE = 8


@dataclass
class Drop:
    """One rematerialised block: freed after position ``lo``, recomputed before ``hi``."""

    block: int  # id of the dropped block
    lo: int  # its last use before the gap
    hi: int  # its first use after the gap: the recompute runs just before this node
    steps: list[tuple[int, int]] = field(default_factory=list)  # (original node's position,
    #                                                             block id)
    cost: int = 0  # bytes the recompute reads and writes


def _recomputable(node):
    """The op of ``node`` if it may run again for one of its outputs, else None.

    Its callable must be a plain kernel call whose read and written blocks are exactly its
    inputs' and outputs': no partial write, and no output over an input except a declared
    state pair (``OpDef.state``).
    """
    fn = node.fn
    if not isinstance(fn, KernelCall):
        return None
    op = node_op(node.name)
    if op is None or not op.recompute or op.random:
        return None
    ins = [x.block for x in fn.ins]
    outs = [o.block for o in fn.outs]
    if len({id(b) for b in outs}) != len(outs) or len(node.reads) != len(ins):
        return None
    state = dict((o, i) for i, o in op.state)
    for o, b in enumerate(outs):
        for j, x in enumerate(ins):
            if x is b and state.get(o) != j:
                return None
    return op


def rematerialize(plan: Plan, budget: int = 0) -> None:
    """Rewrite ``plan.steps`` with cheap long-lived intermediates recomputed, while the most
    bytes of planned blocks live at one node is above ``budget``.

    :func:`choose` picks blocks to drop from the live-bytes profile of the steps; the result is
    kept only if memory planning's own measure, the most bytes live at one node (in-place
    reuse counted), went down. The recomputed blocks join ``plan.planned``.
    """
    seq, planned = plan.steps, plan.planned
    profile = live_profile(seq, planned, plan.blocks)
    drops = choose(seq, planned, plan.blocks, profile, budget)
    if not drops:
        return
    new_seq, new_blocks = apply(seq, drops, Node)
    new_planned = planned | set(new_blocks)
    if max_live(new_seq, new_planned, {**plan.blocks, **new_blocks}) >= max(profile, default=0):
        return
    plan.blocks.update(new_blocks)
    plan.steps, plan.planned, plan.remat_drops = new_seq, new_planned, drops


class _Planner:
    def __init__(self, seq, planned, blocks, profile, budget=0):
        self.seq = seq
        self.budget = budget
        self.planned = planned
        self.blocks = blocks
        self.profile = np.asarray(profile, dtype=np.int64)
        self.uses: dict[int, list[int]] = {}  # planned block -> sorted positions touching it
        self.writes: dict[int, list[int]] = {}  # any block -> positions writing it
        self.kernel_only: dict[int, bool] = {}  # planned block: only kernel calls touch it
        for pos, n in enumerate(seq):
            kernel = isinstance(n.fn, KernelCall)
            for b in n.reads + n.writes:
                k = id(b)
                if k in planned:
                    us = self.uses.setdefault(k, [])
                    if not us or us[-1] != pos:
                        us.append(pos)
                    self.kernel_only[k] = self.kernel_only.get(k, True) and kernel
            for b in n.writes:
                self.writes.setdefault(id(b), []).append(pos)
        self.dropped: dict[int, Drop] = {}

    def _alive(self, k, hi) -> bool:
        us = self.uses[k]
        if us[-1] < hi:
            return False
        d = self.dropped.get(k)
        return d is None or not (d.lo < hi <= d.hi)

    def _changed(self, k, lo, hi) -> bool:
        """Whether block ``k`` is written strictly between positions ``lo`` and ``hi``."""
        ws = self.writes.get(k, ())
        j = bisect.bisect_right(ws, lo)
        return j < len(ws) and ws[j] < hi

    def _chain(self, k, hi, drop, made, depth) -> bool:
        """Append to ``drop.steps`` the nodes that recompute block ``k`` before ``hi``."""
        ws = self.writes.get(k, ())
        if len(ws) != 1:
            return False
        p = ws[0]
        node = self.seq[p]
        op = _recomputable(node)
        if op is None:
            return False
        state_in = {i for i, _o in op.state}
        for j, x in enumerate(node.fn.ins):
            a = id(x.block)
            if j in state_in:  # read only for a state output, which goes to scratch
                if a in self.planned:
                    return False
                continue
            if self._changed(a, p, hi):
                return False
            if a not in self.planned or a in made or self._alive(a, hi):
                continue
            if depth + 1 >= MAX_CHAIN or not self._chain(a, hi, drop, made, depth + 1):
                return False
        drop.steps.append((p, k))
        made.add(k)
        fn = node.fn
        drop.cost += sum(x.block.nbytes for x in fn.ins) + sum(o.block.nbytes for o in fn.outs)
        return True

    def _extra(self, drop) -> int:
        """Bytes the recompute needs beyond the recomputed block itself (in-place counted)."""
        made = {k: i for i, (_p, k) in enumerate(drop.steps)}
        last_read = {}
        for i, (p, _k) in enumerate(drop.steps):
            for x in self.seq[p].fn.ins:
                if id(x.block) in made:
                    last_read[id(x.block)] = i
        live: dict[int, int] = {}
        most = 0
        for i, (p, k) in enumerate(drop.steps):
            node = self.seq[p]
            op = node_op(node.name)
            size = self.blocks[k].nbytes
            for j in op.inplace:
                x = node.fn.ins[j] if j < len(node.fn.ins) else None
                if (x is not None and id(x.block) in live and last_read.get(id(x.block)) == i
                        and x.block.nbytes == size and len(node.fn.outs) == 1):
                    live.pop(id(x.block))
                    break
            live[k] = size
            scratch = sum(o.block.nbytes for o in node.fn.outs if id(o.block) != k)
            most = max(most, sum(live.values()) + scratch)
            for a in [a for a in live if last_read.get(a, i) <= i and a != drop.block]:
                live.pop(a)
        return max(most - self.blocks[drop.block].nbytes, 0)

    def _candidate(self, k, peak_pos):
        if k in self.dropped or not self.kernel_only.get(k):
            return None
        us = self.uses[k]
        j = bisect.bisect_right(us, peak_pos)
        if j == 0 or j == len(us) or us[j - 1] == peak_pos:
            return None
        lo, hi = us[j - 1], us[j]
        if hi - lo < 2:
            return None
        drop = Drop(k, lo, hi)
        if not self._chain(k, hi, drop, set(), 0):
            return None
        if drop.cost > MAX_COST_PER_BYTE * self.blocks[k].nbytes:
            return None
        return drop

    def run(self) -> list[Drop]:
        prof = self.profile
        if not len(prof) or int(prof.max()) <= self.budget:  # fits: nothing to drop
            return []
        chosen: list[Drop] = []
        best = (int(prof.max()), 0)
        cur = (int(prof.max()), int((prof == prof.max()).sum()))
        while True:
            peak_pos = int(prof.argmax())
            pick = None
            for k in self.uses:
                drop = self._candidate(k, peak_pos)
                if drop is None:
                    continue
                new = prof.copy()
                new[drop.lo + 1:drop.hi] -= self.blocks[k].nbytes
                new[drop.hi] += self._extra(drop)
                top = int(new.max())
                key = (top, int((new == top).sum()), drop.cost)
                if pick is None or key < pick[0]:
                    pick = (key, drop, new)
            if pick is None or pick[0][:2] >= cur:
                break
            key, drop, prof = pick
            cur = key[:2]
            self.dropped[drop.block] = drop
            chosen.append(drop)
            made = {k for _p, k in drop.steps}
            for p, _k in drop.steps:  # the recompute reads its inputs at hi: keep them there
                for x in self.seq[p].fn.ins:
                    a = id(x.block)
                    if a in self.planned and a not in made:
                        bisect.insort(self.uses[a], drop.hi)
            if key[0] < best[0]:
                best = (key[0], len(chosen))
            if key[0] <= self.budget:
                break
        return chosen[:best[1]]


def choose(seq: Sequence[Node], planned: set[int], blocks: dict[int, Block],
           profile: Sequence[int], budget: int = 0) -> list[Drop]:
    """Which planned blocks to drop and recompute, for nodes ``seq`` in execution order.

    ``profile[p]`` is the bytes of planned blocks live at position ``p``. A block qualifies
    when a single node writes it, only kernel calls touch it, and its writer can run again
    (:func:`_recomputable`) on inputs that are unchanged at the recompute point and still
    alive there, persistent (outside the arena), or themselves recomputable (up to
    :data:`MAX_CHAIN` nodes). Choosing stops once the peak is at or below ``budget`` bytes
    (0: as low as recomputes bring it). Returns the drops in the order they were chosen.
    """
    return _Planner(seq, planned, blocks, profile, budget).run()


def _view_on(ct, blk):
    """A CTensor viewing ``blk`` exactly as ``ct`` views its own block."""
    t = ct._view_as(ct.dims, ct.strides, ct.offset)
    t.block.ref_count -= 1
    blk.ref_count += 1
    t.block = blk
    return t


def apply(seq: Sequence[Node], drops: list[Drop],
          node_cls: Callable[..., Node]) -> tuple[list[Node], dict[int, Block]]:
    """The nodes to run with ``drops`` applied, and the new blocks ``{id: Block}`` they use.

    Each drop's recompute nodes (new nodes of class ``node_cls``, flagged ``remat``) run just
    before its ``hi``: they write the recomputed block into a new block, intermediate
    recomputed blocks into new blocks of their own, and every other output (saved statistics,
    running state) into new scratch blocks. Every node from ``hi`` on that reads the dropped
    block is replaced by a copy that reads the new block.
    """
    new_blocks: dict[int, Block] = {}
    views: dict[tuple[int, int], object] = {}

    def fresh(b):
        nb = Block(b.nbytes, b.pool)
        new_blocks[id(nb)] = nb
        return nb

    def view(ct, blk):
        key = (id(ct), id(blk))
        v = views.get(key)
        if v is None:
            v = views[key] = (ct, _view_on(ct, blk))  # ct kept: its id stays unique
        return v[1]

    by_block = {d.block: d for d in drops}
    # every node a drop recomputes is a KernelCall (_recomputable)
    replace = {d.block: fresh(_block_by_id(cast(KernelCall, seq[d.steps[-1][0]].fn).outs,
                                           d.block))
               for d in drops}
    inserts: dict[int, list] = {}
    for d in drops:
        local = {d.block: replace[d.block]}
        nodes = []
        for p, k in d.steps:
            node = seq[p]
            fn = cast(KernelCall, node.fn)
            op = node_op(node.name)
            if k not in local:
                local[k] = fresh(_block_by_id(fn.outs, k))
            state_in = {i for i, _o in op.state}
            ins = []
            for j, x in enumerate(fn.ins):
                b = None
                if j not in state_in:
                    b = local.get(id(x.block))
                    od = by_block.get(id(x.block))
                    if b is None and od is not None and od.hi < d.hi:
                        b = replace[od.block]  # dropped earlier and recomputed by now
                ins.append(view(x, b) if b is not None else x)
            outs = []
            for o in fn.outs:
                target = local[k] if id(o.block) == k else fresh(o.block)
                outs.append(view(o, target))
            call = KernelCall(fn.dev, fn.fn, ins, outs, fn.attrs)
            rn = node_cls(node.id, call, node.name, tuple(x.block for x in ins),
                          tuple(o.block for o in outs))
            rn.remat = True
            nodes.append(rn)
        inserts.setdefault(d.hi, []).extend(nodes)

    active: dict[int, Block] = {}
    starts: dict[int, list] = {}
    for d in drops:
        starts.setdefault(d.hi, []).append(d)
    out: list[Node] = []
    for pos, node in enumerate(seq):
        for d in starts.get(pos, ()):
            active[d.block] = replace[d.block]
        out.extend(inserts.get(pos, ()))
        if active and any(id(b) in active for b in node.reads):
            fn = cast(KernelCall, node.fn)  # only kernel calls touch a dropped block
            ins = [view(x, active[id(x.block)]) if id(x.block) in active else x
                   for x in fn.ins]
            call = KernelCall(fn.dev, fn.fn, ins, fn.outs, fn.attrs)
            rn = node_cls(node.id, call, node.name,
                          tuple(active.get(id(b), b) for b in node.reads), node.writes)
            out.append(rn)
        else:
            out.append(node)
    return out, new_blocks


def _block_by_id(cts, k):
    for ct in cts:
        if id(ct.block) == k:
            return ct.block
    raise KeyError(k)

