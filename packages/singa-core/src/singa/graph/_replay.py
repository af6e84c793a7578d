"""Stage 6, replay: prebuilt kernel calls run in order, wrapped by the ``around_replay`` stages.

A replay is a flat loop over ``(fn, ins, outs, attrs, node)`` tuples prepared once per plan:
native arrays resolved, kernels bound to them where the backend can (the ``bind`` kernel
attribute), nothing allocated, no Python autograd work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._device import Device
from .._kernelguard import FAULTS, kernel_failure
from ..errors import GraphError, SingaError
from ..ops._registry import KernelCall
from ._plan import Call, Plan
from ._recording import NodeFn
from ._stages import AROUND_REPLAY, stages_at

__all__ = ["prebuild", "replay_fn", "wrap"]


def _call_closure(fn: NodeFn) -> Callable[[Any, Any, Any], None]:
    """Adapt a plain ``fn()`` to the ``(ins, outs, attrs)`` calling convention of a step."""

    def call(_i: Any, _o: Any, _a: Any) -> None:
        fn()

    return call


def prebuild(plan: Plan) -> list[Call]:
    """``(callable, ins, outs, attrs, node)`` for every step, natives resolved once; a kernel
    with a ``bind`` attribute is replaced by what ``bind`` returns for those natives (see
    :mod:`singa.ops._registry`)."""
    nat = plan.device.native
    calls: list[Call] = []
    for node in plan.steps:
        fn = node.fn
        if isinstance(fn, KernelCall):
            kernel, ins, outs = fn.fn, [nat(x) for x in fn.ins], [nat(o) for o in fn.outs]
            bind = getattr(kernel, "bind", None)
            if bind is not None:
                bound = bind(ins, outs, fn.attrs)
                if bound is not None:
                    if not callable(bound):
                        raise GraphError(
                            f"the {node.name} kernel's bind returned {type(bound).__name__}, "
                            "not a kernel(ins, outs, attrs) or None")
                    kernel = bound
            calls.append((kernel, ins, outs, fn.attrs, node))
        else:
            calls.append((_call_closure(fn), None, None, None, node))
    return calls


def replay_fn(calls: list[Call], device: Device | None = None) -> Callable[[], None]:
    """The plain replay: every call once, in order. A kernel's exception becomes the singa
    error :func:`singa._kernelguard.kernel_failure` gives, naming the node's op."""

    def replay() -> None:
        node = None
        try:
            for f, i, o, a, node in calls:  # noqa: B007 (node names the failing step)
                f(i, o, a)
        except SingaError:
            raise
        except FAULTS as exc:
            raise kernel_failure(exc, node.name if node is not None else "", device) from exc

    return replay


def wrap(plan: Plan, replay: Callable[[], None], profiled: bool) -> Callable[[], None]:
    """``replay`` wrapped by the ``around_replay`` stages of the plan's device, the first
    registered outermost."""
    for stage in reversed(stages_at(AROUND_REPLAY, plan.device)):
        replay = stage.fn(plan, replay, profiled)
        if not callable(replay):
            raise GraphError(f"graph stage {stage.name!r} (around_replay) returned "
                             f"{type(replay).__name__}, not the replay callable to run")
    return replay
