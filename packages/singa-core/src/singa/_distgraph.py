"""Graph mode: communication overlapped with computation (what PyTorch DDP does, planned once).

:meth:`singa.dist.Communicator.start_all_reduce` records two nodes per bucket of gradients:
``Dist.AllReduceStart`` (copies the gradients into the bucket's in-flight buffer, starts the
non-blocking all-reduce on it) and ``Dist.AllReduceWait`` (completes it, writes the reduced
values back). Their callables carry ``dist_async = (role, overlap, communicator, token)``. The stage
:func:`overlap`, registered at ``after_ordering`` for every device, then

1. moves every overlapped start as early as its reads and writes allow: right after the last
   node that writes its gradients (or the communication node before it: every ``Dist`` node
   reads and writes the communicator's token, so collectives keep their recorded order, which
   every rank shares). A start of ``overlap=False`` moves as late as they allow instead (the
   all-reduce after backward, the baseline);
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

from .graph import AFTER_ORDERING, GraphStage, register_stage

__all__ = ["overlap", "STAGE"]


def _role(node):
    return getattr(node.fn, "dist_async", None)


def _conflicts(a_reads, a_writes, b) -> bool:
    """Whether node ``b`` must stay on its side of ``a`` (a shared block written by either;
    a node touching no block is a sync point that orders everything)."""
    if not (b.reads or b.writes) or not (a_reads or a_writes):
        return True
    for blk in b.writes:
        if id(blk) in a_reads or id(blk) in a_writes:
            return True
    return any(id(blk) in a_writes for blk in b.reads)


def _ids(node):
    return {id(b) for b in node.reads}, {id(b) for b in node.writes}


def hoist(steps, p) -> int:
    """Move ``steps[p]`` to just after the nearest earlier step it depends on; its new
    position."""
    node = steps[p]
    r, w = _ids(node)
    q = p - 1
    while q >= 0 and not _conflicts(r, w, steps[q]):
        q -= 1
    steps.insert(q + 1, steps.pop(p))
    return q + 1


def sink(steps, p) -> int:
    """Move ``steps[p]`` to just before the nearest later step that depends on it; its new
    position."""
    node = steps[p]
    r, w = _ids(node)
    q = p + 1
    while q < len(steps) and not _conflicts(r, w, steps[q]):
        q += 1
    steps.insert(q - 1, steps.pop(p))
    return q - 1


def overlap(plan) -> None:
    """The ``dist.overlap`` stage: place starts and waits, insert progress nodes (see the
    module docstring)."""
    steps = plan.steps
    if not any(_role(n) for n in steps):
        return
    # starts to hoist, earliest first, so that each sees the ones before it already moved
    for node in [n for n in steps if (_role(n) or ("",))[:2] == ("start", True)]:
        hoist(steps, steps.index(node))
    # waits (and the starts of overlap=False) to sink, latest first
    late = [n for n in steps if _role(n) and (_role(n)[0] == "wait" or not _role(n)[1])]
    for node in reversed(late):
        sink(steps, steps.index(node))
    out = []
    outstanding: dict = {}  # (communicator, token) -> started requests not yet waited
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
