"""The computational graph behind ``Device.exec``: record, analyse, replay, profile.

When a device's graph is enabled, every ``exec(fn, reads, writes, name)`` becomes a
:class:`Node`. Edges come from the blocks each node reads and writes: read-after-write,
write-after-write and write-after-read; a node with no blocks (a sync such as ``"Waiting"``)
orders everything before it before everything after it.

Analysis (lazy, once per recorded graph) fixes an execution order (BFS from the nodes with no
pending inputs, or insertion order when serial) and, for each intermediate block that Python no
longer references, the node after which it can be freed. A replay is then a flat loop over
precomputed ``(fn, blocks to allocate, blocks to free)`` steps. Nothing here is backend-specific.
Rematerialisation (dropping cheap intermediates and recomputing them) is in :mod:`singa._remat`.
"""

from __future__ import annotations

import bisect
import functools
import json
import sys
import time
from collections import deque

from . import _remat, config
from ._ctensor import CTensor
from ._dtype import ITEMSIZE
from .memory import size_class
from .ops._fusion import FUSIONS, ChainStep, ElementwiseChain
from .ops._registry import EMPTY, OPS, KernelCall

__all__ = ["Graph", "Node", "BlockType"]


class BlockType:
    """How a block is used by the graph (SINGA's BlkInfo types)."""

    INPUT = "input"  # read before any write: data from outside the graph
    PARAM = "param"  # an input that the graph also writes (parameters, running stats)
    INTER = "inter"  # written then read inside the graph
    END = "end"  # written and never read inside the graph (outputs)


class Node:
    """One recorded operation."""

    __slots__ = ("id", "fn", "name", "reads", "writes", "preds", "succs", "time_total",
                 "time_count", "remat")

    def __init__(self, nid, fn, name, reads, writes):
        self.id = nid
        self.fn = fn
        self.name = name
        self.reads = reads
        self.writes = writes
        self.preds: set[int] = set()
        self.succs: list[int] = []
        self.time_total = 0.0
        self.time_count = 0
        self.remat = False  # a recompute inserted by the planner (singa._remat)

    def __repr__(self):
        return f"<Node {self.id} {self.name}>"


def _call_closure(fn):
    """Adapt a plain ``fn()`` to the ``(ins, outs, attrs)`` calling convention of a step."""

    def call(_i, _o, _a):
        fn()

    return call


def _held_ctensors(fn) -> list:
    """CTensors a node's callable holds (the graph's own references to blocks)."""
    held = getattr(fn, "ctensors", None)
    if held is not None:
        return list(held)
    found = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            v = cell.cell_contents
        except ValueError:
            continue
        if isinstance(v, CTensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(x for x in v if isinstance(x, CTensor))
    return found


def _whole(ct) -> bool:
    """Whether CTensor ``ct`` is a contiguous view of all of its block."""
    return ct.contig and ct.off == 0 and ct.size * ITEMSIZE[ct.dt] == ct.block.nbytes


class Graph:
    """Nodes recorded on one device, their dependencies, and the replay plan."""

    def __init__(self, device):
        self.device = device
        self.reset()

    def __del__(self):
        try:
            self._release_arena()
        except Exception:  # interpreter shutdown
            pass

    def reset(self) -> None:
        if hasattr(self, "blocks"):
            self._release_arena()
        self.nodes: list[Node] = []
        self.blocks: dict[int, object] = {}  # id -> Block (keeps them alive)
        self.pblocks: dict[int, object] = {}  # the blocks a plan uses: these + recomputed
        self.block_type: dict[int, str] = {}
        self._last_writer: dict[int, int] = {}
        self._readers: dict[int, list[int]] = {}
        self._last_sync: int | None = None
        self._plans: dict[bool, list] = {}
        self.order: list[int] = []
        self.steps: list[Node] = []
        self.remat_drops: list = []
        self.iteration = 0
        self.trace_events: list[dict] = []
        self.wall_time = 0.0
        self.wall_count = 0

    # ------------------------------------------------------------------ building
    def add_operation(self, fn, reads, writes, name: str = "") -> Node:
        nid = len(self.nodes)
        node = Node(nid, fn, name, tuple(reads), tuple(writes))
        self.nodes.append(node)
        if self._plans:
            self._plans.clear()
            self._release_arena()
        preds = node.preds
        if not reads and not writes:  # sync op: after everything since the previous sync
            start = self._last_sync + 1 if self._last_sync is not None else 0
            preds.update(range(start, nid))
            if self._last_sync is not None:
                preds.add(self._last_sync)
            self._last_sync = nid
        else:
            if self._last_sync is not None:
                preds.add(self._last_sync)
            for b in node.reads:
                k = id(b)
                if k not in self.blocks:
                    self.blocks[k] = b
                    self.block_type[k] = BlockType.INPUT
                elif self.block_type[k] == BlockType.END:
                    self.block_type[k] = BlockType.INTER
                w = self._last_writer.get(k)
                if w is not None:
                    preds.add(w)
                self._readers.setdefault(k, []).append(nid)
            for b in node.writes:
                k = id(b)
                if k not in self.blocks:
                    self.blocks[k] = b
                    self.block_type[k] = BlockType.END
                elif self.block_type[k] == BlockType.INPUT:
                    self.block_type[k] = BlockType.PARAM
                w = self._last_writer.get(k)
                if w is not None:
                    preds.add(w)
                for r in self._readers.get(k, ()):
                    preds.add(r)
                self._last_writer[k] = nid
                self._readers[k] = []
        preds.discard(nid)
        for p in preds:
            self.nodes[p].succs.append(nid)
        return node

    # ------------------------------------------------------------------ analysis
    def _bfs_order(self) -> list[int]:
        indeg = [len(n.preds) for n in self.nodes]
        queue = deque(i for i, d in enumerate(indeg) if d == 0)
        order = []
        while queue:
            i = queue.popleft()
            order.append(i)
            for s in self.nodes[i].succs:
                indeg[s] -= 1
                if indeg[s] == 0:
                    queue.append(s)
        if len(order) != len(self.nodes):  # cannot happen for recorded graphs (a DAG)
            raise RuntimeError("scheduler: dependency cycle in the recorded graph")
        return order

    def _python_held(self) -> set[int]:
        """Ids of blocks that Python code outside the graph can still reach.

        A block is reachable if a CTensor the graph does not hold views it (its ``ref_count``
        exceeds the graph's distinct CTensors on it), or if something besides the graph's
        nodes references one of the graph's CTensors (e.g. a Tensor returned to the user).
        The latter is counted with CPython reference counts: every slot of a node that holds
        the CTensor is one reference; anything beyond those is outside the graph.
        """
        cts: dict[int, CTensor] = {}
        slots: dict[int, int] = {}
        by_block: dict[int, set[int]] = {}
        ct = None
        for n in self.nodes:
            for ct in _held_ctensors(n.fn):
                k = id(ct)
                cts[k] = ct
                slots[k] = slots.get(k, 0) + 1
                by_block.setdefault(id(ct.block), set()).add(k)
        held = set()
        for k, blk in self.blocks.items():
            if blk.ref_count > len(by_block.get(k, ())):
                held.add(k)
        del ct  # the inner loop's variable must not count as a reference
        for k in list(cts):
            # references: the graph's slots + this dict's value + getrefcount's argument
            if sys.getrefcount(cts[k]) - slots[k] - 2 > 0:
                held.add(id(cts[k].block))
        return held

    def analyze(self, serial: bool) -> list:
        """Fix the execution order, plan the memory of intermediates, precompute the calls.

        Intermediate blocks that Python cannot reach get memory from a private arena: each
        lives from its first write to its last use in the chosen order, and blocks whose
        lifetimes do not overlap share memory. This is the recycling SINGA does at run time
        (free after the last reader, reuse on the next write), decided once instead of on
        every replay, so a replay allocates nothing and every kernel call is prebuilt with its
        native arrays. Three further savings: an elementwise op may write its output over an
        input it reads for the last time (:meth:`_inplace_groups`), outside serial mode the
        order is the one of BFS and :meth:`_memory_order` with the smaller peak, and cheap
        intermediates may be dropped and recomputed where that lowers the peak
        (:meth:`_rematerialize`, unless ``SINGA_GRAPH_RECOMPUTE=0``). Before that, pairs of
        nodes the device has a fused kernel for run as one (:meth:`_fuse`), and runs of
        elementwise updates as one compiled loop (:meth:`_fuse_chains`), unless
        ``SINGA_GRAPH_FUSE=0``. ``self.steps`` is the sequence of nodes a replay runs:
        ``self.order`` with fused nodes merged and recompute nodes inserted.
        """
        self._release_arena()
        self.steps, self.remat_drops = [], []  # their kernel calls hold the graph's CTensors
        self.pblocks = dict(self.blocks)
        held = self._python_held()
        planned = {k for k, t in self.block_type.items()
                   if t in (BlockType.INTER, BlockType.END) and k not in held}
        if serial:
            order = list(range(len(self.nodes)))
        else:
            bfs = self._bfs_order()
            order = min((bfs, self._memory_order(bfs, planned)),
                        key=lambda o: self._max_live(self._seq(o), planned))
        seq = self._seq(order)
        fused_away: set[int] = set()
        if config.get("SINGA_GRAPH_FUSE"):
            seq, fused_away = self._fuse(seq, planned)
            planned = planned - fused_away
            seq = self._fuse_chains(seq, planned)
        if config.get("SINGA_GRAPH_RECOMPUTE"):
            seq, planned = self._rematerialize(seq, planned)
        first, last = self._lifetimes(seq)
        self.groups = self._inplace_groups(seq, planned, first, last)
        self._plan_arena(planned, first, last)
        for k, b in self.blocks.items():
            if b.data is None and k not in fused_away:  # persistent blocks get memory now
                b.allocate(zero=self.block_type[k] in (BlockType.INPUT, BlockType.PARAM))
        self.order = order
        self.steps = seq
        self.planned = planned
        return [self._prebuild(n) for n in seq]

    def _fuse(self, seq, planned) -> tuple[list[Node], set[int]]:
        """``seq`` with pairs of nodes merged into calls of fused kernels, and the ids of the
        intermediate blocks that thereby disappear (see :mod:`singa.ops._fusion`).

        Node A (op ``first``, which may itself be a fused node) and node B (op ``second``) are
        merged when the device has the fused kernel for their dtype, A's single output is a
        whole block that A alone writes and B reads as its input ``link`` (a whole view of the
        same shape and dtype, and none of B's other inputs), and no node between them writes
        what A reads. Without ``keep`` the output must be planned and B its only reader: it
        disappears. With ``keep`` B must be its first reader: it is still written, for the
        later ones. The merged node runs at B's position. Passes repeat until nothing merges,
        so that a fused node can be the first op of a further fusion.
        """
        kernels = self.device.kernels
        by_first: dict[str, list] = {}
        for fd in FUSIONS.values():
            if fd.name in kernels:
                by_first.setdefault(fd.first, []).append(fd)
        gone: set[int] = set()
        while by_first:
            seq, more = self._fuse_pass(seq, planned - gone, by_first, kernels)
            if more is None:
                break
            gone |= more
        return seq, gone

    def _fuse_pass(self, seq, planned, by_first, kernels):
        """One pass of :meth:`_fuse`: the new sequence and the blocks gone, or (seq, None)
        when nothing merged."""
        readers: dict[int, list[int]] = {}
        writers: dict[int, list[int]] = {}
        for p, n in enumerate(seq):
            for b in n.reads:
                readers.setdefault(id(b), []).append(p)
            for b in n.writes:
                writers.setdefault(id(b), []).append(p)
        out = list(seq)
        merged: set[int] = set()  # positions of nodes taken into a fusion
        removed: set[int] = set()  # positions of the first nodes (their call is merged)
        gone: set[int] = set()
        for p, a in enumerate(seq):
            for fd in by_first.get(a.name, ()):
                q = self._fusable(fd, p, a, seq, planned, readers, writers, merged)
                if q is None:
                    continue
                b = seq[q]
                fn, contig, dtypes = kernels[fd.name]
                ins = [*a.fn.ins, *(x for j, x in enumerate(b.fn.ins) if j != fd.link)]
                if (dtypes is not None and a.fn.outs[0].dt not in dtypes) or (
                        contig and not all(x.contig for x in ins)):
                    continue
                k = id(a.fn.outs[0].block)
                reads = [*a.reads, *(x for x in b.reads if id(x) != k)]
                outs = [*a.fn.outs, *b.fn.outs] if fd.keep else list(b.fn.outs)
                writes = (*a.writes, *b.writes) if fd.keep else b.writes
                attrs = {**a.fn.attrs, "second": b.fn.attrs} if b.fn.attrs else a.fn.attrs
                call = KernelCall(self.device, fn, ins, outs, attrs)
                out[q] = Node(a.id, call, fd.name, tuple(reads), writes)
                merged.update((p, q))
                removed.add(p)
                if not fd.keep:
                    gone.add(k)
                break
        if not merged:
            return seq, None
        return [n for p, n in enumerate(out) if p not in removed], gone

    def _fuse_chains(self, seq, planned) -> list[Node]:
        """``seq`` with runs of elementwise ops merged into compiled chains (see
        :class:`singa.ops.ElementwiseChain`), where the device compiles them.

        Walking the order, each elementwise node (an op the compiler chains, one output, every
        operand a whole contiguous block of the output's size and dtype, or one element)
        whose output is not planned (a parameter, optimizer state, a tensor Python holds)
        joins the open groups of its size and dtype that it depends on (merging them), or
        opens one. Planned outputs stay out of chains so that in-place reuse and
        rematerialisation, which decide per op, keep every option they had. A group
        closes at the first node that is not a member but reads what the group writes or
        writes what it reads or writes (the group's members will run later, at its last
        member's place, so nothing may come between them and such a node). A block read as a
        broadcast scalar is read once, before the loop: a node may not join a group that
        writes it, nor one that reads it so, if it writes it. A group of two or more nodes
        becomes one node; each element then goes through every step in order.
        """
        compiler = self.device.chain_compiler()
        if compiler is None:
            return seq
        groups: list[dict] = []  # every group ever opened, in order of opening
        open_groups: list[dict] = []
        for p, n in enumerate(seq):
            key = self._chain_key(n, compiler, planned)
            reads = {id(b) for b in n.reads}
            writes = {id(b) for b in n.writes}
            # blocks read as broadcast scalars: a chain reads those once, before its loop
            scalars = {id(x.block) for x in n.fn.ins if x.size == 1} if key and key[0] > 1 \
                else set()
            sync = not n.reads and not n.writes
            joined = None
            still_open = []
            for g in open_groups:
                conflict = sync or bool(reads & g["writes"]) or bool(
                    writes & (g["reads"] | g["writes"]))
                if not conflict:
                    still_open.append(g)
                elif (key is not None and g["key"] == key and not scalars & g["writes"]
                      and not writes & g["scalars"]):
                    if joined is None:  # n depends on the group: it continues it
                        joined = g
                        still_open.append(g)
                    elif not (g["scalars"] & joined["writes"] or joined["scalars"] & g["writes"]):
                        # n depends on two groups: one group, members in order
                        for field in ("reads", "writes", "scalars"):
                            joined[field] |= g[field]
                        joined["members"] = sorted(joined["members"] + g["members"])
                        g["members"] = []
                # else: the group closes before n
            open_groups = still_open
            if key is None:
                continue
            if joined is None:
                joined = {"key": key, "members": [], "reads": set(), "writes": set(),
                          "scalars": set()}
                groups.append(joined)
                open_groups.append(joined)
            joined["members"].append(p)
            joined["reads"] |= reads
            joined["writes"] |= writes
            joined["scalars"] |= scalars
        replace: dict[int, Node] = {}
        dropped: set[int] = set()
        for g in groups:
            if len(g["members"]) < 2:
                continue
            members = [seq[p] for p in g["members"]]
            replace[g["members"][-1]] = self._chain_node(members, g["key"][1], compiler)
            dropped.update(g["members"][:-1])
        return [replace.get(p, n) for p, n in enumerate(seq) if p not in dropped]

    @staticmethod
    def _chain_key(node, compiler, planned):
        """``(elements, dtype)`` if ``node`` may join an elementwise chain, else None."""
        fn = node.fn
        if (not isinstance(fn, KernelCall) or node.name not in compiler.ops
                or len(fn.outs) != 1 or len(node.writes) != 1):
            return None
        out = fn.outs[0]
        if out.dt not in compiler.dtypes or not _whole(out) or id(out.block) in planned:
            return None
        n = out.size
        for x in fn.ins:
            if x.dt != out.dt or (x.size == 1 < n and x.block is out.block):
                return None
            if x.size == n and n > 1 and not (_whole(x) and x.shp == out.shp):
                return None
            if x.size not in (1, n):
                return None
        return (n, out.dt)

    def _chain_node(self, members, dtype, compiler) -> Node:
        """One node running ``members`` (elementwise nodes, in order) as a compiled chain."""
        operands: list = []
        index: dict = {}
        scalar: list[bool] = []

        def operand(x, full):
            key = id(x.block) if full else ("scalar", id(x))
            if key not in index:
                index[key] = len(operands)
                operands.append(x)
                scalar.append(not full)
            return index[key]

        n = members[0].fn.outs[0].size
        steps = []
        for m in members:
            ins = tuple(operand(x, x.size == n) for x in m.fn.ins)
            steps.append(ChainStep(m.name, ins, operand(m.fn.outs[0], True)))
        chain = ElementwiseChain(tuple(steps), tuple(scalar), dtype)
        call = KernelCall(self.device, compiler.compile(chain), operands, [], EMPTY)
        reads: dict[int, object] = {}
        writes: dict[int, object] = {}
        for m in members:
            reads.update((id(b), b) for b in m.reads)
            writes.update((id(b), b) for b in m.writes)
        return Node(members[-1].id, call, chain.name, tuple(reads.values()),
                    tuple(writes.values()))

    @staticmethod
    def _fusable(fd, p, a, seq, planned, readers, writers, merged) -> int | None:
        """Position of the node that ``a`` (at ``p``) fuses with under ``fd``, or None."""
        if p in merged or not isinstance(a.fn, KernelCall) or len(a.fn.outs) != 1:
            return None
        xa = a.fn.outs[0]
        k = id(xa.block)
        reads_k = readers.get(k, ())
        if not _whole(xa) or len(a.writes) != 1 or writers.get(k) != [p] or not reads_k:
            return None
        if not fd.keep and (k not in planned or len(reads_k) != 1):
            return None
        q = next((r for r in reads_k if r > p), None)  # A's first reader (a parameter A
        if q is None:                                   # overwrites may be read before A)
            return None
        b = seq[q]
        if (q in merged or b.name != fd.second or not isinstance(b.fn, KernelCall)
                or fd.link >= len(b.fn.ins) or (b.fn.attrs and "second" in a.fn.attrs)):
            return None
        xb = b.fn.ins[fd.link]
        if (xb.block is not xa.block or not _whole(xb) or xb.shp != xa.shp or xb.dt != xa.dt
                or any(x.block is xa.block for j, x in enumerate(b.fn.ins) if j != fd.link)
                or xa.block in b.writes):
            return None
        for blk in a.reads:
            if any(p < w < q for w in writers.get(id(blk), ())):
                return None
        return q

    def _seq(self, order) -> list[Node]:
        return [self.nodes[i] for i in order]

    def _rematerialize(self, seq, planned):
        """``seq`` and ``planned`` with cheap long-lived intermediates recomputed.

        :func:`singa._remat.plan` picks blocks to drop from the live-bytes profile of ``seq``;
        the result is kept only if the planner's own measure, the most bytes live at one node
        (in-place reuse counted), went down.
        """
        profile = self._live_profile(seq, planned)
        drops = _remat.plan(seq, planned, self.pblocks, profile)
        if not drops:
            return seq, planned
        new_seq, new_blocks = _remat.apply(seq, drops, Node)
        new_planned = planned | set(new_blocks)
        self.pblocks.update(new_blocks)
        if self._max_live(new_seq, new_planned) >= max(profile, default=0):
            return seq, planned
        self.remat_drops = drops
        return new_seq, new_planned

    def _lifetimes(self, seq) -> tuple[dict[int, int], dict[int, int]]:
        """Positions in ``seq`` (nodes in execution order) of the first and last node touching
        each block."""
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for pos, n in enumerate(seq):
            for b in n.reads + n.writes:
                k = id(b)
                first.setdefault(k, pos)
                last[k] = pos
        return first, last

    def _max_live(self, seq, planned) -> int:
        """Largest sum of bytes of planned blocks alive at one node of ``seq`` (in-place
        reuse counted): the least memory an arena for that order can have."""
        return max(self._live_profile(seq, planned), default=0)

    def _live_profile(self, seq, planned) -> list[int]:
        """Bytes of planned blocks alive at each position of ``seq`` (in-place reuse
        counted)."""
        first, last = self._lifetimes(seq)
        groups = self._inplace_groups(seq, planned, first, last)
        change = [0] * (len(seq) + 1)
        for members in groups.values():
            nbytes = self.pblocks[members[0]].nbytes
            change[min(first[k] for k in members)] += nbytes
            change[max(last[k] for k in members) + 1] -= nbytes
        cur = 0
        live = []
        for c in change[:-1]:
            cur += c
            live.append(cur)
        return live

    def _inplace_input(self, node, planned, dies) -> int | None:
        """The block (id) whose memory ``node``'s output can take over, or None.

        The op must allow it (``OpDef.inplace``), the input must be dead after this node
        (``dies(k)``), planned (never a block Python can reach), and viewed exactly like the
        output: same shape and dtype, contiguous, covering the whole block. Every read of that
        block by the node must be such a view, so that element i is read only at index i.
        """
        fn = node.fn
        if not isinstance(fn, KernelCall) or len(fn.outs) != 1:
            return None
        op = OPS.get(node.name)
        if op is None or not op.inplace:
            return None
        out = fn.outs[0]
        ob = out.block
        if id(ob) not in planned or ob in node.reads or not _whole(out):
            return None
        for j in op.inplace:
            if j >= len(fn.ins):
                continue
            x = fn.ins[j]
            xb = x.block
            k = id(xb)
            if (k in planned and xb is not ob and xb.nbytes == ob.nbytes and x.dt == out.dt
                    and x.shp == out.shp and dies(k) and xb not in node.writes
                    and all(_whole(v) and v.shp == out.shp for v in fn.ins if v.block is xb)):
                return k
        return None

    def _inplace_groups(self, seq, planned, first, last) -> dict[int, list[int]]:
        """Planned blocks grouped by the memory they share in place: ``{root: members}``.

        A node's output joins the group of an input it reads for the last time when
        :meth:`_inplace_input` allows it; a group's lifetime is the union of its members'.
        """
        root = {k: k for k in planned}
        for pos, n in enumerate(seq):
            if not n.writes or first.get(id(n.writes[0])) != pos:
                continue
            k = self._inplace_input(n, planned, lambda k, pos=pos: last[k] == pos)
            if k is not None:
                root[id(n.writes[0])] = root[k]
        groups: dict[int, list[int]] = {}
        for k in planned:
            groups.setdefault(root[k], []).append(k)
        return groups

    def _memory_order(self, base, planned) -> list[int]:
        """A topological order that keeps the peak of live intermediates low.

        List scheduling: of the nodes whose predecessors have run, take one that does not
        raise the peak reached so far (the bytes it newly makes live fit under it) and, of
        those, the one that frees the most (then the earliest in ``base``); if every ready
        node raises the peak, the one that raises it least. This postpones a large output
        (a weight gradient at the start of the backward pass) until the activations kept
        for the backward pass have been freed, instead of adding it to them.
        """
        nodes = self.nodes
        rank = {i: p for p, i in enumerate(base)}
        size = {k: self.blocks[k].nbytes for k in planned}
        touch = []
        remaining: dict[int, int] = {}
        for n in nodes:
            ks = {id(b) for b in n.reads + n.writes if id(b) in planned}
            touch.append(ks)
            for k in ks:
                remaining[k] = remaining.get(k, 0) + 1
        live: set[int] = set()
        indeg = [len(n.preds) for n in nodes]
        ready = [i for i, d in enumerate(indeg) if d == 0]
        order = []
        cur = peak = 0
        while ready:
            best = None
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
            _, j, new, freed = best
            i = ready.pop(j)
            order.append(i)
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
        if len(order) != len(nodes):  # cannot happen for recorded graphs (a DAG)
            raise RuntimeError("scheduler: dependency cycle in the recorded graph")
        return order

    def _plan_arena(self, planned, first, last) -> None:
        """Give every planned block memory that no block with an overlapping lifetime uses.

        Blocks of one in-place group (``self.groups``) are placed as one and share one buffer
        object. With an allocator that can hand out sub-buffers (``Allocator.sub``), groups
        are packed at offsets of one arena (greedy by size: each takes the lowest offset free
        of every lifetime-overlapping group already placed). Otherwise whole buffers
        ("slots", one size class each) are shared, best fit.
        """
        span = {}
        for r, members in self.groups.items():
            span[r] = (min(first[k] for k in members), max(last[k] for k in members))
        if hasattr(self.device.pool.allocator, "sub"):
            self._place_offsets(span)
        else:
            self._place_slots(span)
        pool = self.device.pool
        placement = {}
        for r, (region, off) in self.placement.items():
            b = self.pblocks[r]
            buf = self.arena[region][0]
            data = buf if off is None else pool.allocator.sub(buf, off, b.nbytes)
            for k in self.groups[r]:
                m = self.pblocks[k]
                m.free_data()
                m.data = data
                m.cls = 0  # arena memory: detached (not returned to the pool) on release
                placement[k] = (region, off)
        self.placement = placement

    def _place_offsets(self, span) -> None:
        """Pack groups at offsets of one arena; the best of a few greedy orders.

        Each greedy pass takes the groups largest first and puts each at the lowest offset
        free of every lifetime-overlapping group placed before it; ties between equal sizes
        are broken by start, end or length of the lifetime, which leave different gaps. The
        pass with the smallest arena wins (on ResNet-18 it is within 0.01 MiB of the most
        bytes live at one node, the least any placement can reach).
        """
        size = {r: (self.pblocks[r].nbytes + 255) // 256 * 256 or 256 for r in span}
        ties = (lambda r: span[r][0], lambda r: -span[r][1],
                lambda r: span[r][0] - span[r][1])
        best = None
        for tie in ties:
            placed: list[tuple[int, int, int, int]] = []  # (offset, end, first, last)
            placement = {}
            top = 0
            for r in sorted(span, key=lambda r: (-size[r], tie(r))):
                lo, hi = span[r]
                busy = sorted((o, e) for o, e, f, la in placed if f <= hi and lo <= la)
                off = 0
                for o, e in busy:
                    if off + size[r] <= o:
                        break
                    off = max(off, e)
                placed.append((off, off + size[r], lo, hi))
                placement[r] = (0, off)
                top = max(top, off + size[r])
            if best is None or top < best[0]:
                best = (top, placement)
        top, placement = best if best else (0, {})
        self.arena = [self.device.pool.malloc_exact(top)] if placement else []
        self.placement = placement

    def _place_slots(self, span) -> None:
        starts: dict[int, list[int]] = {}
        for r, (lo, _hi) in span.items():
            starts.setdefault(lo, []).append(r)
        free: list[tuple[int, int]] = []  # (class bytes, slot index), kept sorted
        ends: dict[int, list[int]] = {}
        placement = {}
        slot_cls: list[int] = []
        for pos in range(max(starts, default=-1) + 1):
            for r in sorted(starts.get(pos, ()), key=lambda r: -self.pblocks[r].nbytes):
                cls = size_class(self.pblocks[r].nbytes)
                j = bisect.bisect_left(free, (cls, -1))
                if j < len(free):
                    slot = free.pop(j)[1]
                else:
                    slot = len(slot_cls)
                    slot_cls.append(cls)
                placement[r] = (slot, None)
                ends.setdefault(span[r][1], []).append(slot)
            for slot in ends.pop(pos, ()):  # dies after this node: reusable by later writers
                bisect.insort(free, (slot_cls[slot], slot))
        pool = self.device.pool
        self.arena = [pool.malloc_exact(cls) for cls in slot_cls]
        self.placement = placement

    def shares_memory(self, k1: int, k2: int) -> bool:
        """Whether planned blocks ``k1`` and ``k2`` (ids) were given overlapping memory."""
        (r1, o1), (r2, o2) = self.placement[k1], self.placement[k2]
        if r1 != r2:
            return False
        if o1 is None:
            return True
        return o1 < o2 + self.pblocks[k2].nbytes and o2 < o1 + self.pblocks[k1].nbytes

    def _release_arena(self) -> None:
        for k in getattr(self, "placement", {}):
            self.pblocks[k].data = None
        pool = self.device.pool
        for buf, nbytes in getattr(self, "arena", ()):
            pool.free_exact(buf, nbytes)
        self.arena, self.placement = [], {}

    def _prebuild(self, node):
        """``(callable, ins, outs, attrs)`` for one node, natives resolved once."""
        fn = node.fn
        if isinstance(fn, KernelCall):
            nat = self.device.native
            return (fn.fn, [nat(x) for x in fn.ins], [nat(o) for o in fn.outs], fn.attrs,
                    node)
        return (_call_closure(fn), None, None, None, node)

    # ------------------------------------------------------------------ execution
    def run(self, serial: bool = False) -> None:
        plan = self._plans.get(serial)
        if plan is None:  # one plan at a time: it owns the arena
            self._plans.clear()
            plan = self._plans[serial] = self.analyze(serial)
        dev = self.device
        if dev._verbosity > 0 and self.iteration >= dev._skip_iteration:
            self._run_profiled(plan)
        else:
            for f, i, o, a, _node in plan:
                f(i, o, a)
        self.iteration += 1

    def _run_profiled(self, plan) -> None:
        dev = self.device
        t_iter = time.perf_counter()
        cursor = (t_iter - _T0) * 1e6
        for f, i, o, a, node in plan:
            if node.name == "Waiting":
                f(i, o, a)
                dt = 0.0
            else:
                dt = dev._timed_call(functools.partial(f, i, o, a))
                node.time_total += dt
                node.time_count += 1
            if len(self.trace_events) < 200000:
                self.trace_events.append({"name": node.name or "op", "ph": "X", "pid": 0,
                                          "tid": dev.name, "ts": cursor, "dur": dt * 1e6,
                                          "args": {"node": node.id,
                                                   "iteration": self.iteration}})
            cursor += dt * 1e6
        dev.synchronize()
        self.wall_time += time.perf_counter() - t_iter
        self.wall_count += 1

    # ------------------------------------------------------------------ reports
    def profiling_report(self) -> str:
        dev = self.device
        v = dev._verbosity
        lines = ["Time Profiling:"]
        if v <= 0:
            lines.append("(profiling is off: call dev.SetVerbosity(1), (2) or (3) before "
                         "training in graph mode)")
            return "\n".join(lines)
        if self.wall_count == 0:
            lines.append(f"(nothing timed yet: the first {dev._skip_iteration} graph runs are "
                         "skipped, see SetSkipIteration)")
            return "\n".join(lines)
        steps = self.steps or self.nodes
        if v == 1:
            fwd = 0.0
            for n in steps:
                if "Backward" in n.name:
                    break
                if n.time_count:
                    fwd += n.time_total / n.time_count
            total = self.wall_time / self.wall_count
            lines.append(f"Forward Propagation Time : {fwd:.6f} sec")
            lines.append(f"Backward Propagation Time : {max(total - fwd, 0.0):.6f} sec")
        else:
            for n in steps:
                if v == 3 and "Dist" not in n.name:
                    continue
                avg = n.time_total / n.time_count if n.time_count else 0.0
                tag = " (recompute)" if n.remat else ""
                lines.append(f"OP_ID{n.id}. {n.name}{tag} : {avg:.6f} sec")
        return "\n".join(lines)

    def export_chrome_trace(self, path: str) -> None:
        """Write the profiled node timings in Chrome trace-event JSON (Perfetto opens it)."""
        doc = {"traceEvents": self.trace_events, "displayTimeUnit": "ms",
               "otherData": {"device": self.device.name, "iterations": self.wall_count}}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)

    def debug(self) -> str:
        """Per-node and per-block tables (SINGA's Graph::Debug)."""
        rows = ["node  name  preds  succs"]
        for n in self.nodes:
            rows.append(f"{n.id}  {n.name}  {sorted(n.preds)}  {n.succs}")
        rows.append("block  type  nbytes")
        for k, b in self.blocks.items():
            rows.append(f"{k:#x}  {self.block_type[k]}  {b.nbytes}")
        return "\n".join(rows)


_T0 = time.perf_counter()
