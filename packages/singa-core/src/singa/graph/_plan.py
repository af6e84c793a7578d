"""The plan: what every stage after recording reads and refines, and the checks it must pass.

A :class:`Plan` starts from a :class:`~singa.graph.Recording` and the blocks the graph may
place (intermediates Python cannot reach). Ordering fills ``order`` and ``steps``; fusion and
rematerialisation rewrite ``steps``; memory planning fills ``first``/``last``, ``groups``,
``placement`` and ``arena``; replay fills ``calls``. :func:`check_plan` verifies the
invariants every stage keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._device import Device
from ..errors import GraphError
from ..memory import Block
from ._recording import Node, NodeFn, Recording

if TYPE_CHECKING:
    from ._remat import Drop

__all__ = ["Plan", "check_plan"]

#: One prebuilt step of a replay: ``(kernel, native ins, native outs, attrs, node)``; a step
#: whose callable is a plain ``fn()`` has None for ins, outs and attrs.
Call = tuple[Callable[..., Any], list[Any] | None, list[Any] | None, dict[str, Any] | None, Node]


@dataclass(eq=False)
class Plan:
    """One execution plan of a recorded graph (one per ``serial`` flag; it owns the arena).

    Attributes
    ----------
    recording : Recording
        The recorded graph (nodes, blocks, block types). Read-only for every stage.
    device : Device
        The device the graph runs on.
    serial : bool
        Insertion order (True) or the dependency-respecting order of least memory (False).
    planned : set of int
        Ids of the blocks whose memory the plan owns (placed in the arena): intermediates
        and outputs Python cannot reach, minus blocks fused away, plus recomputed blocks and
        any a stage adds with :meth:`add_block`. Every other block keeps its own memory.
    blocks : dict
        ``id -> Block`` for every block ``steps`` touch (recorded ones and the plan's own).
    order : list of int
        Recorded node ids in the order ordering chose.
    steps : list of Node
        The nodes a replay runs, in order: ``order`` with fused nodes merged, recompute and
        stage nodes inserted. Stages at ``after_ordering`` may rewrite it (keeping the
        invariants of :func:`check_plan`); after memory planning it is fixed.
    fused_away : set of int
        Ids of intermediate blocks that fusion removed (never written, never allocated).
    remat_drops : list
        The blocks rematerialisation dropped and recomputes (:class:`singa.graph._remat.Drop`).
    first, last : dict
        ``id -> position in steps`` of the first and last node touching each block.
    groups : dict
        Planned blocks sharing memory in place: ``{root id: [member ids]}``.
    placement : dict
        ``id -> (region, offset)`` of each planned block: region ``i`` of ``arena``, at byte
        ``offset`` (None: the whole region, when the allocator cannot hand out sub-buffers).
    arena : list
        ``(buffer, nbytes)`` regions the plan took from the device's pool.
    calls : list
        Prebuilt ``(callable, ins, outs, attrs, node)`` per step (natives resolved once).
    replay : callable
        What a replay runs: the loop over ``calls``, wrapped by the ``around_replay`` stages.
    extras : dict
        Free space for stages, keyed by stage name (e.g. communication handles, streams).
    on_release : list
        Callables a stage adds to free what it made for this plan (a captured CUDA graph,
        events); run, last added first, before the arena goes back to the pool (the plan is
        replaced, the graph reset or a node recorded).
    """

    recording: Recording
    device: Device
    serial: bool
    planned: set[int] = field(default_factory=set)
    blocks: dict[int, Block] = field(default_factory=dict)
    order: list[int] = field(default_factory=list)
    steps: list[Node] = field(default_factory=list)
    fused_away: set[int] = field(default_factory=set)
    remat_drops: list[Drop] = field(default_factory=list)
    first: dict[int, int] = field(default_factory=dict)
    last: dict[int, int] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)
    placement: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    arena: list[tuple[Any, int]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    replay: Callable[[], None] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    on_release: list[Callable[[], Any]] = field(default_factory=list)
    _next_id: int = 0

    def new_node(self, fn: NodeFn, reads: Iterable[Block], writes: Iterable[Block],
                 name: str) -> Node:
        """A node for a stage to insert into ``steps``: ``fn()`` (or a KernelCall) reading
        and writing the given Blocks. Its id follows the recorded ones. Blocks it touches
        that the plan does not know yet must be added with :meth:`add_block` first."""
        nid = max(self._next_id, len(self.recording.nodes))
        self._next_id = nid + 1
        return Node(nid, fn, name, tuple(reads), tuple(writes))

    def add_block(self, block: Block, planned: bool = False) -> None:
        """Make ``block`` known to the plan. ``planned`` blocks get arena memory from memory
        planning (alive from their first to their last use in ``steps``); the others are
        allocated by memory planning if they have no memory yet."""
        self.blocks[id(block)] = block
        if planned:
            self.planned.add(id(block))

    def shares_memory(self, k1: int, k2: int) -> bool:
        """Whether planned blocks ``k1`` and ``k2`` (ids) were given overlapping memory."""
        (r1, o1), (r2, o2) = self.placement[k1], self.placement[k2]
        if r1 != r2:
            return False
        if o1 is None:
            return True
        assert o2 is not None  # a region is either whole (None) or packed at offsets
        return o1 < o2 + self.blocks[k2].nbytes and o2 < o1 + self.blocks[k1].nbytes


def check_plan(plan: Plan) -> None:
    """Raise :class:`singa.errors.GraphError` unless ``plan`` keeps the stage invariants.

    1. **No block read before it is written**: the first step touching a planned block
       writes it (arena memory holds another block's bytes before that).
    2. **Every block a step touches is known**: in ``plan.blocks``.
    3. **No arena overlap of live blocks**: two planned blocks of different in-place groups
       whose lifetimes (first to last step touching them) overlap do not share memory.

    The remaining one, "graph == eager bitwise", is checked by running both
    (``tests/nn/test_graph_equivalence.py``). Cost: quadratic in the groups alive at once;
    meant for tests and debugging, not for every analysis.
    """
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for pos, n in enumerate(plan.steps):
        written = {id(b) for b in n.writes}
        for b in n.reads + n.writes:
            k = id(b)
            if k not in plan.blocks:
                raise GraphError(f"graph plan: step {pos} ({n.name}) touches a block the plan "
                                 "does not know; a stage adding blocks must call "
                                 "Plan.add_block first")
            if k not in first:
                first[k] = pos
                if k in plan.planned and k not in written:
                    raise GraphError(f"graph plan: step {pos} ({n.name}) reads planned block "
                                     f"{k:#x} before any step writes it; a stage must insert "
                                     "a node after the writer of every block it reads")
            last[k] = pos
    root = {k: r for r, ms in plan.groups.items() for k in ms}
    spans = sorted((first[k], last[k], k) for k in plan.planned if k in first)
    live: list[tuple[int, int]] = []  # (last, id) of blocks whose span is still open
    for lo, hi, k in spans:
        live = [(h, j) for h, j in live if h >= lo]
        for _h, j in live:
            if root.get(j, j) != root.get(k, k) and plan.shares_memory(j, k):
                raise GraphError(f"graph plan: blocks {j:#x} and {k:#x} are alive at once "
                                 "but share arena memory; a stage after memory planning "
                                 "must not move, add or remove steps")
        live.append((hi, k))
