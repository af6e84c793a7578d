"""Stage 1, recording: ``Device.exec`` calls become nodes, their blocks become edges.

While a graph records (``with dev.record(graph):``, or SINGA's ``EnableGraph``), every
``exec(fn, reads, writes, name)`` becomes a :class:`Node`. Edges come from the blocks each
node reads and writes: read-after-write, write-after-write and write-after-read; a node with
no blocks (a sync such as ``"Waiting"``) orders everything before it before everything after
it. Each block gets a :class:`BlockType` from the order of its first read and write.
:class:`Recording` is what the later stages start from; it is never changed by them.
"""

from __future__ import annotations

import sys

from .._ctensor import CTensor
from .._dtype import ITEMSIZE

__all__ = ["BlockType", "Node", "Recording", "held_ctensors", "whole"]


class BlockType:
    """How a block is used by the graph (SINGA's BlkInfo types)."""

    INPUT = "input"  # read before any write: data from outside the graph
    PARAM = "param"  # an input that the graph also writes (parameters, running stats)
    INTER = "inter"  # written then read inside the graph
    END = "end"  # written and never read inside the graph (outputs)


class Node:
    """One operation of the graph: recorded, or made by a stage (fused, recompute, inserted).

    ``fn`` is a :class:`singa.ops.KernelCall` or any zero-argument callable; ``reads`` and
    ``writes`` are every Block it reads and writes (a partial write lists the block in both).
    ``preds``/``succs`` (node ids) are set for recorded nodes only.
    """

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
        self.remat = False  # a recompute inserted by rematerialisation

    def __repr__(self):
        return f"<Node {self.id} {self.name}>"


def held_ctensors(fn) -> list:
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


def whole(ct) -> bool:
    """Whether CTensor ``ct`` is a contiguous view of all of its block."""
    return ct.contig and ct.off == 0 and ct.size * ITEMSIZE[ct.dt] == ct.block.nbytes


class Recording:
    """The recorded graph: nodes in insertion order, their blocks and the blocks' types.

    Attributes
    ----------
    nodes : list of Node
        Node ``i`` has id ``i``; ``preds``/``succs`` are its dependencies.
    blocks : dict
        ``id(block) -> Block`` for every block a node reads or writes (keeps them alive).
    block_type : dict
        ``id(block) -> BlockType`` value.
    """

    def __init__(self):
        self.nodes: list[Node] = []
        self.blocks: dict[int, object] = {}
        self.block_type: dict[int, str] = {}
        self._last_writer: dict[int, int] = {}
        self._readers: dict[int, list[int]] = {}
        self._last_sync: int | None = None

    def add(self, fn, reads, writes, name: str = "") -> Node:
        """Append one exec'd operation and its dependency edges."""
        nid = len(self.nodes)
        node = Node(nid, fn, name, tuple(reads), tuple(writes))
        self.nodes.append(node)
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

    def python_held(self) -> set[int]:
        """Ids of blocks that Python code outside the graph can still reach.

        A block is reachable if a CTensor the graph does not hold views it (its ``ref_count``
        exceeds the graph's distinct CTensors on it), or if something besides the graph's
        nodes references one of the graph's CTensors (e.g. a Tensor returned to the user).
        The latter is counted with CPython reference counts: every slot of a node that holds
        the CTensor is one reference; anything beyond those is outside the graph. So no plan
        of this graph may be alive when this runs (its fused calls hold the same CTensors).
        """
        cts: dict[int, CTensor] = {}
        slots: dict[int, int] = {}
        by_block: dict[int, set[int]] = {}
        ct = None
        for n in self.nodes:
            for ct in held_ctensors(n.fn):
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

    def debug(self) -> str:
        """Per-node and per-block tables (SINGA's Graph::Debug)."""
        rows = ["node  name  preds  succs"]
        for n in self.nodes:
            rows.append(f"{n.id}  {n.name}  {sorted(n.preds)}  {n.succs}")
        rows.append("block  type  nbytes")
        for k, b in self.blocks.items():
            rows.append(f"{k:#x}  {self.block_type[k]}  {b.nbytes}")
        return "\n".join(rows)
