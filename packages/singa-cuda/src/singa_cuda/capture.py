"""CUDA graphs: a graph-mode replay captured once and launched as one CUDA graph per step.

A replay of a training step issues every kernel from Python: ResNet-18's step on an H100 is
~1100 launches, and its wall time (11 ms) is the host's, not the GPU's (7.3 ms of kernels;
docs/cuda.md). With ``SINGA_CUDA_GRAPHS=1`` the ``cuda.graphs`` stage (``around_replay``, see
:mod:`singa.graph`) runs the first :data:`WARMUP` replays of a plan as usual (kernels compile,
cuDNN builds its plans, the pool grows), captures the next one on the device's stream
(``cudaStreamBeginCapture``, relaxed mode) and from then on launches the captured graph: one
``cudaGraphLaunch`` per run of kernels, the ``"Waiting"`` sync nodes between them run as
before. The kernels are the replay's own, on the same arrays: the results are bitwise the
uncaptured replay's.

What makes that safe:

- **Addresses.** The replay's arrays never move (the arena and every block a step touches
  live as long as the plan). Workspaces and temporaries the kernels take from the pool while
  capturing are kept by a :class:`singa.memory.Reservation` until the plan is released, so
  no tensor made between launches is given memory the graph writes.
- **Host state.** A kernel that reads host state when it runs would repeat the captured
  value at every launch: the random ops (:data:`HOST_STATE_OPS`, whose Philox call counter
  is read at run time) keep their plan uncaptured, and so does any node that runs host code
  (a collective of singa-dist, a host fallback). Optimizer hyper-parameters and step counters
  live in device tensors, which a launch reads.
- **Failure.** Anything the capture refuses (a synchronous copy, a library that cannot be
  captured) raises inside the capture; the capture is dropped, a ``RuntimeWarning`` names the
  cause once, and the plan replays uncaptured from then on.

Off by default (``SINGA_CUDA_GRAPHS``): whether it holds on a GPU is checked by
``tools/gpu_check.py`` (the GPU tests of ``tests/test_capture_gpu.py`` and the ``bench-graphs``
step). ``plan.extras["cuda.graphs"]`` is the plan's :class:`CapturedReplay`: its ``state``
and ``why`` say what happened.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

#: Replays run uncaptured before the capture: the first compiles kernels and builds cuDNN
#: plans, the second still finds the pool short of some temporaries' size classes.
WARMUP = 2
#: Ops whose kernels read host state when they run (the device's Philox call counter).
HOST_STATE_OPS = frozenset({"Gaussian", "Uniform", "Bernoulli"})
#: The sync node ``Device.Sync`` records (``Model`` records one at the end of each step).
SYNC = "Waiting"
STAGE_NAME = "cuda.graphs"

_PARTS = re.compile(r"[+\[\],]")


def segments(calls: list) -> tuple[list[tuple[str, Any]], str]:
    """Split a plan's prebuilt ``calls`` into what is captured and what runs on the host.

    Returns ``(segments, "")`` with segments ``("kernels", [call, ...])`` and
    ``("sync", call)`` in order, or ``([], why)`` when the plan cannot be captured.
    """
    segs: list[tuple[str, Any]] = []
    run: list = []
    for call in calls:
        node = call[4]
        if call[1] is None:  # a plain function, not a kernel call
            if node.name != SYNC:
                return [], (f"node {node.name!r} runs host code, not a kernel call (a "
                            "collective or a host fallback)")
            if run:
                segs.append(("kernels", run))
                run = []
            segs.append(("sync", call))
            continue
        host = HOST_STATE_OPS.intersection(_PARTS.split(node.name))
        if host:
            return [], (f"node {node.name!r} draws random numbers from a counter read on the "
                        "host at every run: a captured graph would repeat its draws")
        run.append(call)
    if run:
        segs.append(("kernels", run))
    if not any(kind == "kernels" for kind, _ in segs):
        return [], "no kernel calls"
    return segs, ""


class CapturedReplay:
    """The replay of one plan through CUDA graphs: uncaptured for :data:`WARMUP` runs, then
    captured once and launched. ``state``: ``"warm-up"``, ``"captured"``, ``"failed"``
    (``why`` says what the capture refused) or ``"released"``."""

    def __init__(self, plan, replay: Callable[[], None], segs: list):
        self.plan = plan
        self.replay = replay
        self.segs = segs
        self.runs = 0
        self.graphs: list | None = None
        self.reservation = None
        self.state = "warm-up"
        self.why = ""

    def __call__(self) -> None:
        if self.graphs is not None:
            self._launch()
            return
        self.runs += 1
        if self.state != "warm-up" or self.runs <= WARMUP:
            self.replay()
            return
        self._capture()

    def _capture(self) -> None:
        dev = self.plan.device
        stream = dev.stream
        res = dev.pool.reserve()
        graphs: list = []
        try:
            with dev.cuda_device, res:
                for kind, item in self.segs:
                    graphs.append(None if kind == "sync" else _capture_calls(stream, item))
        except Exception as exc:  # the capture refused something: replay as before
            res.release()
            self.state, self.why = "failed", f"{type(exc).__name__}: {exc}"
            warnings.warn(f"singa-cuda: capturing a graph-mode step as a CUDA graph failed "
                          f"({self.why}); this graph replays without CUDA graphs. Set "
                          "SINGA_CUDA_GRAPHS=0 to skip the attempt.", RuntimeWarning,
                          stacklevel=4)
            self.replay()
            return
        except BaseException:  # an interrupt: nothing captured stays reserved
            res.release()
            raise
        self.graphs, self.reservation, self.state = graphs, res, "captured"
        self._launch()  # the capture recorded this step's work without running it

    def _launch(self) -> None:
        from ._errors import translate

        dev = self.plan.device
        stream = dev.stream
        try:
            with dev.cuda_device:
                for (_kind, item), graph in zip(self.segs, self.graphs or ()):
                    if graph is None:
                        item[0](item[1], item[2], item[3])  # the sync node
                    else:
                        graph.launch(stream)
        except Exception as exc:
            raise translate(exc, "launching a captured graph-mode step (SINGA_CUDA_GRAPHS=0 "
                                 "replays it kernel by kernel)") from exc

    def release(self) -> None:
        """Drop the captured graphs and give their reserved memory back to the pool (the
        plan's ``on_release``: before its arena goes back)."""
        self.graphs = None
        if self.reservation is not None:
            self.reservation.release()
            self.reservation = None
        self.state = "released"


def _capture_calls(stream, calls: list):
    """One CUDA graph of ``calls`` run on ``stream``, which captures them."""
    stream.begin_capture()
    try:
        for f, i, o, a, _node in calls:
            f(i, o, a)
    except BaseException:
        try:  # end the capture the error invalidated; its graph is discarded
            stream.end_capture()
        except Exception:
            pass
        raise
    return stream.end_capture()


def around_replay(plan, replay: Callable[[], None], profiled: bool) -> Callable[[], None]:
    """The ``cuda.graphs`` stage: ``replay`` itself when ``SINGA_CUDA_GRAPHS`` is off, the
    run is profiled (each node timed) or the plan cannot be captured (see :func:`segments`);
    else a :class:`CapturedReplay` of it."""
    from singa import config

    if profiled or not config.get("SINGA_CUDA_GRAPHS"):
        return replay
    segs, why = segments(plan.calls)
    if not segs:
        plan.extras[STAGE_NAME] = _Uncaptured(why)
        return replay
    captured = CapturedReplay(plan, replay, segs)
    plan.extras[STAGE_NAME] = captured
    plan.on_release.append(captured.release)
    return captured


class _Uncaptured:
    """``plan.extras["cuda.graphs"]`` of a plan :func:`segments` refused."""

    state = "uncapturable"

    def __init__(self, why: str):
        self.why = why


def register(device_class: type) -> None:
    """Register the ``cuda.graphs`` stage for ``device_class`` (once; called when the first
    CudaGPU is created, so that loading the plugin imports nothing of the stage)."""
    from singa.graph import STAGES, GraphStage, register_stage

    if STAGE_NAME not in STAGES:
        register_stage(GraphStage(STAGE_NAME, "around_replay", around_replay,
                                  devices=(device_class,),
                                  doc="capture the replay once as CUDA graphs "
                                      "(SINGA_CUDA_GRAPHS=1)"))
