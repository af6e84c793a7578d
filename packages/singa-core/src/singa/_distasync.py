"""Non-blocking all-reduce, and its overlap with computation in graph mode (what PyTorch DDP
does, planned once).

:func:`start_all_reduce` (behind :meth:`singa.dist.Communicator.start_all_reduce`) makes two
device ops per bucket of gradients: ``Dist.AllReduceStart`` (copies the gradients into the
bucket's in-flight buffer, starts the non-blocking all-reduce on it) runs (or is recorded)
now, ``Dist.AllReduceWait`` (completes it, writes the reduced values back) at
:meth:`Work.wait`. Their callables carry ``dist_async = (role, overlap, communicator, token)``.
In graph mode the stage :func:`overlap`, registered at ``after_ordering`` for every device,
then

1. moves every overlapped start as early as its reads and writes allow: right after the last
   node that writes its gradients (or the communication node before it: every ``Dist`` node
   reads and writes the communicator's token, so collectives keep their recorded order, which
   every rank shares). The nodes that write those gradients move as early as theirs allow
   first: the memory-aware order puts weight gradients as late as it can, which would leave
   nothing for the all-reduce to overlap. A start of ``overlap=False`` moves as late as its
   reads and writes allow instead (the all-reduce after backward, the baseline);
2. moves every wait as late as they allow: right before the first node that reads the reduced
   gradients (the optimizer update of that bucket) or the next communication node;
3. inserts a ``Dist.Progress`` node after every other node that runs while a request is
   outstanding: MPI advances a non-blocking collective only inside MPI calls, so these call
   ``Testall`` on the outstanding requests (one cheap call, no hook dispatch).

Nothing here is special-cased in the engine. The in-flight buffer is an ordinary block that
the start writes and the wait reads, so memory planning keeps it alive, and unshared, from the
start to the wait; communication nodes are plain callables, not kernel calls, so fusion never
merges them and rematerialisation never recomputes them or drops a block they touch. A
``Dist.Progress`` node reads the token only (no writes): it orders nothing and closes no
elementwise chain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, cast

import numpy as np

from . import _dtype
from ._ctensor import CTensor
from .graph import AFTER_ORDERING, GraphStage, Node, Plan, register_stage
from .memory import Block

__all__ = ["Work", "start_all_reduce", "overlap", "hoist", "sink", "STAGE"]


#: A communication node's role for :func:`overlap`: ("start" or "wait", whether the
#: all-reduce overlaps computation, the communicator, the communicator's token Block).
DistRole = tuple[str, bool, Any, Block]


class _CommStep(Protocol):
    """A communication node's callable: a plain function (the graph reads the buffers it holds
    from its closure) that carries its :data:`DistRole` as the attribute ``dist_async``."""

    dist_async: DistRole

    def __call__(self) -> None: ...


def _with_role(fn: Callable[[], None], role: DistRole) -> Callable[[], None]:
    """``fn``, with ``role`` set as its ``dist_async`` attribute (see :class:`_CommStep`)."""
    cast(_CommStep, fn).dist_async = role  # a function takes attributes; the cast says which
    return fn


class Work:
    """A started non-blocking collective; :meth:`wait` completes it (idempotent).

    Parameters
    ----------
    comm : singa.dist.Communicator
        The communicator that started it.
    finish : callable
        Completes the collective (exec's its wait node); called once, by the first
        :meth:`wait`.

    Attributes
    ----------
    done : bool
        Whether :meth:`wait` was called.
    """

    def __init__(self, comm: Any, finish: Callable[[], None]):
        self._comm, self._finish, self.done = comm, finish, False

    def wait(self) -> None:
        """Complete the collective: the reduced values are in the tensors passed to
        :func:`start_all_reduce` (in graph mode, once the recorded wait node has run). A second
        call does nothing."""
        if not self.done:
            self.done = True
            self._finish()


def start_all_reduce(comm: Any, cts: Sequence[CTensor], op: str, half: bool, inplace: bool,
                     overlap: bool) -> Work:
    """The two nodes of :meth:`singa.dist.Communicator.start_all_reduce` (arguments checked
    there): the start is exec'd now, the wait when the returned :class:`Work` is waited.

    Parameters
    ----------
    comm : singa.dist.Communicator
        The communicator (``singa.dist`` sits above this module, so it is typed ``Any``).
    cts : sequence of CTensor
        The gradients of one bucket, all on one device.
    op : str
        ``"sum"`` or ``"mean"``.
    half : bool
        Send float16 on the wire (gathered, then summed in float32).
    inplace : bool
        A single full-precision tensor is reduced in place, without an in-flight copy.
    overlap : bool
        In graph mode, the :func:`overlap` stage hoists the start to overlap computation
        (False: it sinks it, the all-reduce after backward).

    Returns
    -------
    Work
        Its :meth:`Work.wait` execs the wait node.
    """
    dev = cts[0].dev
    tok = comm._token(dev)
    n = comm.world_size
    total = sum(c.Size() for c in cts)
    own = inplace and len(cts) == 1 and not half
    # what the request reads and writes while in flight: (elements, dtype code)
    if half:
        specs = [(total, _dtype.kFloat16), (n * total, _dtype.kFloat16)]  # send, recv
    else:
        specs = [] if own else [(total, cts[0].dtype_code)]
    bufs = ([CTensor._new((m,), dev, d) for m, d in specs]
            if specs and comm._device_arrays_usable(dev) else [])
    state: dict[str, Any] = {}

    # both run in the communicator's device context (Communicator._device_context), entered
    # inside rather than by a wrapper: the graph finds the buffers a node holds in its closure
    def start() -> None:
        with comm._device_context(dev):
            staged = [comm._stage(dev, c) for c in cts]
            if bufs:
                arrs = [dev.native(b).reshape(-1) for b in bufs]
            else:
                arrs = [comm._take_host(m, _dtype.NP_DTYPE[d]) for m, d in specs]
            parts = [a.reshape(-1) for a, _ in staged]
            if half:
                send, recv = arrs
                comm._pack_half(send, parts)  # straight into the wire buffer
                reqs = [comm._iallgather(send[lo:hi], recv[n * lo:n * hi].reshape(n, hi - lo))
                        for lo, hi in comm._half_chunks(total)]
            else:
                flat = parts[0] if own else _pack(arrs[0], parts)
                reqs = [comm._iallreduce(flat[s:s + comm.buff_size], "sum")
                        for s in range(0, total, comm.buff_size)]
            state.update(arrs=arrs, staged=staged, parts=parts, reqs=reqs)
            comm._pending.extend(reqs)

    def finish() -> None:
        with comm._device_context(dev):
            for r in state["reqs"]:
                r.wait()
            arrs, parts = state["arrs"], state["parts"]
            div = n if op == "mean" else None  # the mean divides while copying back: one pass
            if half:
                recv = arrs[1]
                for lo, hi in comm._half_chunks(total):
                    acc = comm._scratch(hi - lo, np.float32, "acc")
                    comm._half_accumulate(recv[n * lo:n * hi].reshape(n, hi - lo), acc)
                    _unpack(acc, lo, parts, div)
            elif not own:
                _unpack(arrs[0], 0, parts, div)
            elif div:
                _divide(parts[0], n)
            for c, (a, s) in zip(cts, state["staged"]):
                if s:
                    dev.numpy_into_native(a, dev.native(c))
            if not bufs:
                for a in arrs:
                    comm._give_host(a)
            done = {id(r) for r in state["reqs"]}
            comm._pending[:] = [r for r in comm._pending if id(r) not in done]
            state.clear()

    blocks = [c.block for c in cts]
    inflight = [b.block for b in bufs]
    _with_role(start, ("start", bool(overlap), comm, tok.block))
    _with_role(finish, ("wait", bool(overlap), comm, tok.block))
    dev.exec(start, blocks + [tok.block],
             (blocks if own else []) + inflight + [tok.block], "Dist.AllReduceStart")
    return Work(comm, lambda: dev.exec(
        finish, [tok.block] + blocks + inflight, blocks + [tok.block],
        "Dist.AllReduceWait"))


def _pack(dst: np.ndarray, parts: Sequence[np.ndarray]) -> np.ndarray:
    """Copy the flat arrays ``parts`` one after the other into ``dst`` (converting to its
    dtype); returns ``dst``."""
    pos = 0
    for p in parts:
        dst[pos:pos + p.size] = p
        pos += p.size
    return dst


def _unpack(src: np.ndarray, lo: int, parts: Sequence[np.ndarray],
            div: int | None = None) -> None:
    """The inverse of :func:`_pack` for the slice ``src`` of the packed vector that starts at
    element ``lo``: each part receives the elements of it that ``src`` covers (divided by
    ``div`` when given: the bits of copying, then dividing in place)."""
    pos, hi = 0, lo + src.size
    for p in parts:
        a, b = max(pos, lo), min(pos + p.size, hi)
        if a < b:
            if div is None:
                p[a - pos:b - pos] = src[a - lo:b - lo]
            elif np.issubdtype(p.dtype, np.integer):
                np.floor_divide(src[a - lo:b - lo], div, out=p[a - pos:b - pos])
            else:
                np.divide(src[a - lo:b - lo], p.dtype.type(div), out=p[a - pos:b - pos])
        pos += p.size
        if pos >= hi:
            break


def _divide(a: np.ndarray, n: int) -> None:
    if np.issubdtype(a.dtype, np.integer):
        a //= n
    else:
        a /= a.dtype.type(n)


# ---------------------------------------------------------------------- the graph stage
def _role(node: Node) -> DistRole | None:
    """The :data:`DistRole` of a communication node, None for any other."""
    return getattr(node.fn, "dist_async", None)


def _conflicts(a_reads: set[int], a_writes: set[int], b: Node) -> bool:
    """Whether node ``b`` must stay on its side of ``a`` (a shared block written by either;
    a node touching no block is a sync point that orders everything)."""
    if not (b.reads or b.writes) or not (a_reads or a_writes):
        return True
    for blk in b.writes:
        if id(blk) in a_reads or id(blk) in a_writes:
            return True
    return any(id(blk) in a_writes for blk in b.reads)


def _ids(node: Node) -> tuple[set[int], set[int]]:
    return {id(b) for b in node.reads}, {id(b) for b in node.writes}


def _move(steps: list[Node], p: int, direction: int) -> int:
    """Move ``steps[p]`` towards ``direction`` (-1: earlier, +1: later) until it is next to
    the nearest step it conflicts with (or at the end of the plan); returns its new position."""
    r, w = _ids(steps[p])
    q = p + direction
    while 0 <= q < len(steps) and not _conflicts(r, w, steps[q]):
        q += direction
    # after the pop, the conflicting step stands at q (moving earlier) or q - 1 (later)
    steps.insert(q - direction, steps.pop(p))
    return q - direction


def hoist(steps: list[Node], p: int) -> int:
    """Move ``steps[p]`` to just after the nearest earlier step it depends on.

    Parameters
    ----------
    steps : list of Node
        A plan's steps, changed in place.
    p : int
        The position of the node to move.

    Returns
    -------
    int
        Its new position.
    """
    return _move(steps, p, -1)


def sink(steps: list[Node], p: int) -> int:
    """Move ``steps[p]`` to just before the nearest later step that depends on it; the
    parameters and return value are :func:`hoist`'s."""
    return _move(steps, p, +1)


def overlap(plan: Plan) -> None:
    """The ``dist.overlap`` stage: place starts and waits, insert progress nodes (see the
    module docstring).

    Parameters
    ----------
    plan : Plan
        The plan after ordering; its ``steps`` are replaced.
    """
    steps = plan.steps
    if not any(_role(n) for n in steps):
        return
    # starts to hoist, earliest first, so that each sees the ones before it already moved;
    # first the nodes that write its gradients (an order chosen for the least memory puts
    # weight gradients last, which would leave nothing to overlap)
    starts = [(n, role) for n in steps
              if (role := _role(n)) is not None and role[:2] == ("start", True)]
    for node, role in starts:
        grads = {id(b) for b in node.reads} - {id(role[3])}
        for w in [m for m in steps[:steps.index(node)]
                  if not _role(m) and any(id(b) in grads for b in m.writes)]:
            hoist(steps, steps.index(w))
        hoist(steps, steps.index(node))
    # waits (and the starts of overlap=False) to sink, latest first
    late = [n for n in steps if (role := _role(n)) and (role[0] == "wait" or not role[1])]
    for node in reversed(late):
        sink(steps, steps.index(node))
    out: list[Node] = []
    # (communicator, token) -> started requests not yet waited
    outstanding: dict[tuple[Any, Block], int] = {}
    for node in steps:
        out.append(node)
        role = _role(node)
        if role is not None:
            key = (role[2], role[3])
            outstanding[key] = outstanding.get(key, 0) + (1 if role[0] == "start" else -1)
            continue
        for (comm, token), count in outstanding.items():
            if count > 0:
                out.append(plan.new_node(comm.progress, [token], [], "Dist.Progress"))
    plan.steps = out


STAGE = register_stage(GraphStage(
    "dist.overlap", AFTER_ORDERING, overlap,
    doc="all-reduce starts after the gradients' last writer, waits before the first reader, "
        "MPI progress between the nodes in between"), replace=True)
