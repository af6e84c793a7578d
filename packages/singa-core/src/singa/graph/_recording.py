"""Stage 1, recording: ``Device.exec`` calls become nodes, their blocks become edges.

While a graph records (``with dev.record(graph):``, or SINGA's ``EnableGraph``), every
``exec(fn, reads, writes, name)`` becomes a :class:`Node`. Edges come from the blocks each
node reads and writes: read-after-write, write-after-write and write-after-read; a node with
no blocks (a sync such as ``"Waiting"``) orders everything before it before everything after
it. Each block gets a :class:`BlockType` from the order of its first read and write.
:class:`Recording` is what the later stages start from; it is never changed by them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._ctensor import CTensor
from ..memory import Block
from ..ops._fusion import whole

if TYPE_CHECKING:
    from ..ops._registry import KernelCall

__all__ = ["BlockType", "Node", "Recording", "held_ctensors", "take_views", "whole"]

#: What a node runs: a :class:`singa.ops.KernelCall` or any zero-argument callable.
NodeFn = Callable[[], Any]


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

    def __init__(self, nid: int, fn: NodeFn, name: str, reads: tuple[Block, ...],
                 writes: tuple[Block, ...]):
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

    def __repr__(self) -> str:
        return f"<Node {self.id} {self.name}>"


def held_ctensors(fn: NodeFn) -> list[CTensor]:
    """CTensors a node's callable holds (the graph's own references to blocks)."""
    held = getattr(fn, "ctensors", None)
    if held is not None:
        return list(held)
    found: list[CTensor] = []
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


def take_views(nodes: Iterable[Node]) -> list[CTensor]:
    """Point every node's callable at views of its own: each CTensor it holds (as
    :func:`held_ctensors` finds them: a KernelCall's ``ins``/``outs``, a closure's cells and the
    lists or tuples in them) is replaced by a new view of the same block, shape, strides and
    offset; one view per original, so nodes that shared a CTensor share its view. The
    originals are no longer referenced by the graph. Returns the views.

    Containers are replaced, not changed in place: a list the caller also holds keeps the
    caller's CTensors (which then count as held outside the graph).
    """
    views: dict[int, CTensor] = {}
    # keeps every original alive, so that ids stay unique, until return
    originals: list[CTensor] = []

    def own(ct: CTensor) -> CTensor:
        v = views.get(id(ct))
        if v is None:
            originals.append(ct)
            v = views[id(ct)] = ct._view_as(ct.dims, ct.strides, ct.offset)
        return v

    def owned(x: Any) -> Any:
        if isinstance(x, CTensor):
            return own(x)
        if isinstance(x, (list, tuple)) and any(isinstance(y, CTensor) for y in x):
            return type(x)(own(y) if isinstance(y, CTensor) else y for y in x)
        return x

    for n in nodes:
        fn = n.fn
        if getattr(fn, "ctensors", None) is not None:  # a KernelCall
            call = cast("KernelCall", fn)
            call.ins, call.outs = owned(call.ins), owned(call.outs)
            continue
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            new = owned(v)
            if new is not v:
                cell.cell_contents = new
    return list(views.values())  # returning lets the originals go


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

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.blocks: dict[int, Block] = {}
        self.block_type: dict[int, str] = {}
        self._last_writer: dict[int, int] = {}
        self._readers: dict[int, list[int]] = {}
        self._last_sync: int | None = None

    def add(self, fn: NodeFn, reads: Sequence[Block], writes: Sequence[Block],
            name: str = "") -> Node:
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

        The graph first takes its own views (:func:`take_views`): every CTensor a node holds
        is replaced by a new view of the same block, and the originals are let go. A block is
        then reachable from Python exactly when a CTensor other than the graph's views is
        alive on it, that is when its ``ref_count`` (the count of live CTensors viewing it)
        exceeds the graph's views of it: an explicit holder count, whatever CPython's
        reference counts include. An original kept alive only by a reference cycle counts as
        held until the collector frees it (conservative). No plan of this graph may be alive
        when this runs: its fused calls would hold views the count takes for the graph's.
        """
        views = take_views(self.nodes)
        on_block: dict[int, int] = {}
        for v in views:
            k = id(v.block)
            on_block[k] = on_block.get(k, 0) + 1
        return {k for k, blk in self.blocks.items() if blk.ref_count > on_block.get(k, 0)}

    def debug(self) -> str:
        """Per-node and per-block tables (SINGA's Graph::Debug)."""
        rows = ["node  name  preds  succs"]
        for n in self.nodes:
            rows.append(f"{n.id}  {n.name}  {sorted(n.preds)}  {n.succs}")
        rows.append("block  type  nbytes")
        for k, b in self.blocks.items():
            rows.append(f"{k:#x}  {self.block_type[k]}  {b.nbytes}")
        return "\n".join(rows)
