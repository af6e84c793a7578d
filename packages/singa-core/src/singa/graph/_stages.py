"""The extension point: stages a backend or extension adds to the pipeline at a named point.

A stage is a :class:`GraphStage` record in the :data:`STAGES` table, registered once (at
plugin import, like kernels) with :func:`register_stage`. When a graph is analysed, the stages
of each point whose ``devices`` match the graph's device run in registration order.

Points, in pipeline order (see :mod:`singa.graph` for the whole pipeline):

``AFTER_ORDERING`` — ``fn(plan) -> None``
    ``plan.steps`` holds the recorded nodes in the chosen order, nothing fused or recomputed
    yet; ``plan.planned`` and ``plan.blocks`` say which blocks the arena will hold. The stage
    may rewrite ``plan.steps``: insert nodes (:meth:`Plan.new_node`, blocks it adds with
    :meth:`Plan.add_block`), move or merge nodes. Fusion, rematerialisation and memory
    planning run afterwards and treat its nodes like recorded ones, so a block an inserted
    node touches stays alive (and unshared) until that node has run. Use: singa-dist places
    an all-reduce start right after a gradient's last writer and its wait before the first
    reader (the optimizer); a vendor fusion that is not a pair or a chain.
``AFTER_MEMORY_PLANNING`` — ``fn(plan) -> None``
    ``steps`` are final and every planned block has memory: ``first``/``last``,
    ``groups``, ``placement``, ``arena`` are filled. The stage must not add, remove, reorder
    steps or change their reads and writes; it may replace a step's ``fn`` by one with the
    same effect, and put what it prepares in ``plan.extras[its name]``. Use: registering the
    arena with a communication library, preparing events per step.
``AROUND_REPLAY`` — ``fn(plan, replay, profiled) -> replay``
    ``replay()`` runs every prebuilt call once, in order (``profiled``: timing each node for
    ``SetVerbosity``). The stage returns the callable to run instead, e.g. one that enters a
    stream, or captures the calls once as a CUDA graph and launches it afterwards. Built
    when the plan is (``profiled``: at each profiled run), so nothing is added per node.
    What it makes for the plan (a captured graph) it frees in a callback appended to
    ``plan.on_release``, which runs before the arena it points into is returned.

Invariants every stage keeps (:func:`singa.graph.check_plan` tests the first two):

1. no block is read before it is written: a node comes after the writer of every block it
   reads, and lists every block it reads and writes;
2. no arena overlap of live blocks: nothing changes steps after memory planning;
3. graph == eager: the graph computes bitwise what eager execution of the same program does
   (a stage changes where and when kernels run, not what they compute); a stage that adds
   work eager execution also does (communication) adds the same work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import GraphError

__all__ = ["AFTER_ORDERING", "AFTER_MEMORY_PLANNING", "AROUND_REPLAY", "POINTS", "GraphStage",
           "STAGES", "register_stage", "stages_at"]

AFTER_ORDERING = "after_ordering"
AFTER_MEMORY_PLANNING = "after_memory_planning"
AROUND_REPLAY = "around_replay"
POINTS = (AFTER_ORDERING, AFTER_MEMORY_PLANNING, AROUND_REPLAY)


@dataclass(frozen=True)
class GraphStage:
    """A stage added to graph analysis at ``point`` (one of :data:`POINTS`).

    Parameters
    ----------
    name : str
        Unique name (e.g. ``"dist.allreduce_overlap"``); also its key in ``plan.extras``.
    point : str
        Where it runs: ``"after_ordering"``, ``"after_memory_planning"``, ``"around_replay"``.
    fn : callable
        ``fn(plan)`` at the first two points, ``fn(plan, replay, profiled) -> replay`` around
        replay (see :mod:`singa.graph`).
    devices : tuple of type, optional
        Device classes it applies to (``isinstance``); None: every device.
    doc : str
        One line saying what it does (shown by ``Graph.debug``).
    """

    name: str
    point: str
    fn: Callable[..., Any]
    devices: tuple[type, ...] | None = None
    doc: str = ""

    def applies_to(self, device: object) -> bool:
        """Whether the stage runs on graphs of ``device``: it is an instance of one of
        ``devices``, or ``devices`` is None.

        Parameters
        ----------
        device : Device
            The device of the graph being analysed.

        Returns
        -------
        bool
            True when the stage applies to ``device``.
        """
        return self.devices is None or isinstance(device, self.devices)


#: Registered stages by name, in registration order.
STAGES: dict[str, GraphStage] = {}


def register_stage(stage: GraphStage, replace: bool = False) -> GraphStage:
    """Add ``stage`` to :data:`STAGES`; graphs analysed from now on run it.

    Raises :class:`singa.errors.GraphError` for an unknown point or a name already taken
    (pass ``replace=True`` to redefine a stage of yours, e.g. on module reload).
    """
    if stage.point not in POINTS:
        raise GraphError(f"register_stage({stage.name!r}): unknown point {stage.point!r}; "
                         f"use one of {', '.join(POINTS)}")
    if not callable(stage.fn):
        raise GraphError(f"register_stage({stage.name!r}): fn must be callable, got "
                         f"{type(stage.fn).__name__}")
    if stage.name in STAGES and not replace:
        raise GraphError(f"register_stage: a stage named {stage.name!r} is already "
                         "registered; pick another name or pass replace=True")
    STAGES[stage.name] = stage
    return stage


def stages_at(point: str, device: object) -> list[GraphStage]:
    """The registered stages of ``point`` that apply to ``device``, in registration order."""
    return [s for s in STAGES.values() if s.point == point and s.applies_to(device)]
