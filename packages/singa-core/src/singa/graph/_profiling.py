"""Stage 7, profiling: per-node times of replays, SINGA's report and a Chrome trace.

When the device's verbosity is above 0 (``SetVerbosity``) and the first ``SetSkipIteration``
runs are over, a replay times each node with the device's clock (``Device._timed_call``,
which synchronises) and appends a trace event per node.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Sequence
from typing import Any

from .._device import Device
from .._kernelguard import FAULTS, kernel_failure
from ..errors import SingaError
from ._plan import Call
from ._recording import Node

__all__ = ["Profiler"]

_T0 = time.perf_counter()
_MAX_EVENTS = 200000


class Profiler:
    """Timings accumulated over profiled replays of one graph (nodes keep their own sums)."""

    def __init__(self) -> None:
        self.trace_events: list[dict[str, Any]] = []
        self.wall_time = 0.0
        self.wall_count = 0

    def replay(self, calls: list[Call], device: Device, iteration: int) -> None:
        """Run ``calls`` once, timing each node (sync nodes ``"Waiting"`` run untimed)."""
        t_iter = time.perf_counter()
        cursor = (t_iter - _T0) * 1e6
        events = self.trace_events
        node = None
        try:
            for f, i, o, a, node in calls:
                if node.name == "Waiting":
                    f(i, o, a)
                    dt = 0.0
                else:
                    dt = device._timed_call(functools.partial(f, i, o, a))
                    node.time_total += dt
                    node.time_count += 1
                if len(events) < _MAX_EVENTS:
                    events.append({"name": node.name or "op", "ph": "X", "pid": 0,
                                   "tid": device.name, "ts": cursor, "dur": dt * 1e6,
                                   "args": {"node": node.id, "iteration": iteration}})
                cursor += dt * 1e6
        except SingaError:
            raise
        except FAULTS as exc:  # as the plain replay (singa.graph._replay.replay_fn)
            raise kernel_failure(exc, node.name if node is not None else "", device) from exc
        device.synchronize()
        self.wall_time += time.perf_counter() - t_iter
        self.wall_count += 1

    def report(self, device: Device, steps: Sequence[Node]) -> str:
        """SINGA's time-profiling report: level 1 forward/backward totals, 2 every node,
        3 the distributed (``Dist``) nodes."""
        v = device._verbosity
        lines = ["Time Profiling:"]
        if v <= 0:
            lines.append("(profiling is off: call dev.SetVerbosity(1), (2) or (3) before "
                         "training in graph mode)")
            return "\n".join(lines)
        if self.wall_count == 0:
            lines.append(f"(nothing timed yet: the first {device._skip_iteration} graph runs "
                         "are skipped, see SetSkipIteration)")
            return "\n".join(lines)
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

    def export_chrome_trace(self, device: Device, path: str) -> None:
        """Write the profiled node timings in Chrome trace-event JSON (Perfetto opens it)."""
        doc = {"traceEvents": self.trace_events, "displayTimeUnit": "ms",
               "otherData": {"device": device.name, "iterations": self.wall_count}}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(doc, fh)
