"""The graph of one device: recording, then the pipeline of stages that makes a plan, replay.

:meth:`Graph.analyze` is the whole pipeline, written out in order with each stage's switch.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .. import config
from .._device import Device, set_graph_class
from ..memory import Block
from . import _fusion, _memory, _ordering, _remat, _replay
from ._plan import Plan, check_plan
from ._profiling import Profiler
from ._recording import BlockType, Node, NodeFn, Recording
from ._stages import AFTER_MEMORY_PLANNING, AFTER_ORDERING, stages_at

__all__ = ["Graph"]

_PLACEABLE = (BlockType.INTER, BlockType.END)


class Graph:
    """Nodes recorded on one device (``Device.exec`` inside ``with device.record(graph):``),
    the plan made from them, and its replays (:meth:`run`).

    ``recording`` is what was recorded; ``plan`` the current :class:`Plan` (None before the
    first run). One plan exists at a time: it owns the arena.
    """

    def __init__(self, device: Device):
        self.device = device
        self.reset()

    def __del__(self) -> None:
        try:
            self._release()
        except Exception:  # interpreter shutdown
            pass

    def reset(self) -> None:
        """Forget the recording, the plan (its arena goes back to the pool) and the timings."""
        if hasattr(self, "recording"):
            self._release()
        self.recording = Recording()
        self.plan: Plan | None = None
        self._plans: dict[bool, Plan] = {}
        self.iteration = 0
        self.profiler = Profiler()

    # ------------------------------------------------------------------ 1. recording
    def add_operation(self, fn: NodeFn, reads: Sequence[Block], writes: Sequence[Block],
                      name: str = "") -> Node:
        """Record one ``Device.exec`` call; a plan made before it is dropped."""
        node = self.recording.add(fn, reads, writes, name)
        if self._plans:
            self._plans.clear()
            self._release()
        return node

    # ------------------------------------------------------------------ 2-6. the pipeline
    def analyze(self, serial: bool) -> Plan:
        """Make the plan of the recorded graph: every stage, in order.

        The blocks the plan may place are the intermediates and outputs Python cannot reach
        (stage 1 recorded the rest). Then, numbered as the modules are:

        2. ordering: insertion order if ``serial``, else the one of BFS and the memory-aware
           order with the smaller peak;
           ▸ the stages registered ``after_ordering`` (:func:`register_stage`);
        3. fusion of pairs and chains, unless ``SINGA_GRAPH_FUSE=0``;
        4. rematerialisation while the arena is above the device's budget
           (``SINGA_GRAPH_RECOMPUTE``: ``auto``, ``1`` always, ``0`` never);
        5. memory planning: lifetimes, in-place groups, arena placement;
           ▸ the stages registered ``after_memory_planning``;
        6. replay: prebuilt calls, ▸ wrapped by the ``around_replay`` stages.

        If any of it raises, the arena goes back to the pool and no plan is kept.
        """
        self._release()
        self.plan = None  # its fused calls hold the graph's CTensors: python_held counts them
        rec = self.recording
        plan = Plan(rec, self.device, serial, blocks=dict(rec.blocks))
        held = rec.python_held()
        plan.planned = {k for k, t in rec.block_type.items()
                        if t in _PLACEABLE and k not in held}
        try:
            _ordering.order(plan)
            self._run_stages(AFTER_ORDERING, plan)
            if config.get("SINGA_GRAPH_FUSE"):
                _fusion.fuse(plan)
            recompute = config.get("SINGA_GRAPH_RECOMPUTE")
            if recompute != "never":
                budget = 0 if recompute == "always" else self.device.graph_memory_budget()
                _remat.rematerialize(plan, budget)
            _memory.plan_memory(plan)
            self._run_stages(AFTER_MEMORY_PLANNING, plan)
            plan.calls = _replay.prebuild(plan)
            plan.replay = _replay.wrap(plan, _replay.replay_fn(plan.calls, plan.device),
                                      False)
        except BaseException:
            _memory.release(plan)
            raise
        self.plan = plan
        return plan

    def _run_stages(self, point: str, plan: Plan) -> None:
        for stage in stages_at(point, self.device):
            stage.fn(plan)

    def check(self) -> None:
        """Raise :class:`singa.errors.GraphError` unless the current plan keeps the stage
        invariants (see :func:`singa.graph.check_plan`)."""
        if self.plan is not None:
            check_plan(self.plan)

    # ------------------------------------------------------------------ 7. replay
    def run(self, serial: bool = False) -> None:
        """Replay the recorded graph once (analysing it first if needed), with the calling
        context's recording paused; it becomes the graph ``dev.PrintTimeProfiling()``
        reports on."""
        dev = self.device
        dev._last_run_graph = self
        with dev.record(None):  # a stage or wrapper that execs must not record into a graph
            plan = self._plans.get(serial)
            if plan is None:  # one plan at a time: it owns the arena
                self._plans.clear()
                plan = self._plans[serial] = self.analyze(serial)
            if dev._verbosity > 0 and self.iteration >= dev._skip_iteration:
                timed = functools.partial(self.profiler.replay, plan.calls, dev,
                                          self.iteration)
                _replay.wrap(plan, timed, True)()
            else:
                assert plan.replay is not None  # analyze always sets it
                plan.replay()
        self.iteration += 1

    def _release(self) -> None:
        if self.plan is not None:
            _memory.release(self.plan)

    # ------------------------------------------------------------------ 8. reports
    def profiling_report(self) -> str:
        """SINGA's time-profiling report of the replays so far."""
        return self.profiler.report(self.device, self.plan.steps if self.plan else
                                    self.recording.nodes)

    def export_chrome_trace(self, path: str) -> None:
        """Write the profiled node timings in Chrome trace-event JSON (Perfetto opens it)."""
        self.profiler.export_chrome_trace(self.device, path)

    def debug(self) -> str:
        """Per-node and per-block tables (SINGA's Graph::Debug)."""
        return self.recording.debug()


set_graph_class(Graph)  # what Device.EnableGraph records into (the device never imports us)
