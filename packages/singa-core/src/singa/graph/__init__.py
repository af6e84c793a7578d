"""Graph mode: ``Device.exec`` calls recorded once, planned by a pipeline of stages, replayed.

The pipeline (:meth:`Graph.analyze` writes it out; each stage is one module)::

    Device.exec ──► 1 recording      _recording   nodes + read/write edges, block types
                                       │  Recording
                    2 ordering       _ordering    serial: insertion order
                                       │          else: min(BFS, memory-aware) by peak
                      ▸ after_ordering            registered stages (may rewrite steps)
                    3 fusion         _fusion      pairs + chains      SINGA_GRAPH_FUSE
                    4 remat          _remat       drop + recompute    SINGA_GRAPH_RECOMPUTE
                    5 memory         _memory      lifetimes, in-place groups, arena
                      ▸ after_memory_planning     registered stages (steps fixed)
                    6 replay         _replay      prebuilt calls in a flat loop
                      ▸ around_replay             registered wrappers of the loop
                    7 profiling      _profiling   per-node times, SINGA report, Chrome trace

Stages 2 to 6 read and refine one :class:`Plan` (order, steps, planned blocks, lifetimes,
in-place groups, placement, arena, calls). A backend or extension adds a stage at one of the
three marked points with :func:`register_stage` (see :mod:`singa.graph._stages` for what each
point promises and what a stage must keep); :func:`check_plan` verifies a plan's invariants.

Example: a stage that counts replays on every device::

    from singa.graph import GraphStage, register_stage

    def count(plan, replay, profiled):
        def counted():
            plan.extras["count"] = plan.extras.get("count", 0) + 1
            replay()
        return counted

    register_stage(GraphStage("count", "around_replay", count))
"""

from __future__ import annotations

from ._pipeline import Graph
from ._plan import Plan, check_plan
from ._recording import BlockType, Node, Recording
from ._stages import (
                      AFTER_MEMORY_PLANNING,
                      AFTER_ORDERING,
                      AROUND_REPLAY,
                      POINTS,
                      STAGES,
                      GraphStage,
                      register_stage,
)

__all__ = ["Graph", "Node", "BlockType", "Recording", "Plan", "check_plan", "GraphStage",
           "register_stage", "STAGES", "POINTS", "AFTER_ORDERING", "AFTER_MEMORY_PLANNING",
           "AROUND_REPLAY"]
