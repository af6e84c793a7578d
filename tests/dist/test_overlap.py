"""Graph-mode overlap: the ``dist.overlap`` stage (``singa._distasync``) against its oracles.

Oracles: eager DistOpt and graph mode syncing after backward (bitwise: overlap moves where the
communication runs, never what it computes), 1-rank training on the joined batch (float32 /
float16 tolerance), the plan's node list (where starts, waits and progress nodes are), and the
memory plan (the in-flight buffer of every all-reduce is alive, unshared, from start to wait).
A planted bug (a wait that forgets its in-flight buffer) shows that these checks fail when
the planner recycles an in-flight buffer.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import rank_data
from dist_helpers import batches, make, step, values
from singa import opt, tensor
from singa.graph import (
    AFTER_ORDERING,
    STAGES,
    GraphStage,
    Node,
    check_plan,
    register_stage,
)

B = 6
STEPS = 3
THRESHOLD = 20  # several buckets for the test net


def _shard(x, comm):
    return x[comm.rank * B:(comm.rank + 1) * B]


def _train(comm, dev, graph, overlap, mode="backward_and_update", seed=21):
    data = batches(STEPS, B * comm.world_size, seed=seed)
    dist = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9), communicator=comm, overlap=overlap)
    net, tx, ty = make(dev, dist, B, graph)
    for x, y in data:
        step(net, tx, ty, _shard(x, comm), _shard(y, comm), mode, {"threshold": THRESHOLD})
    return net, values(net)


def _role(node):
    return getattr(node.fn, "dist_async", None)


def _pairs(steps):
    """``(start position, wait position, in-flight block ids)`` per all-reduce, in order."""
    starts = [p for p, n in enumerate(steps) if _role(n) and _role(n)[0] == "start"]
    waits = [p for p, n in enumerate(steps) if _role(n) and _role(n)[0] == "wait"]
    assert len(starts) == len(waits) > 1
    out = []
    for s, w in zip(starts, waits):
        node = steps[s]
        tok = id(_role(node)[3])
        inflight = {id(b) for b in node.writes} - {id(b) for b in node.reads} - {tok}
        out.append((s, w, inflight))
    return out


def _writes(node):
    return {id(b) for b in node.writes}


def _reads(node):
    return {id(b) for b in node.reads}


@pytest.mark.parametrize("mode,tol", [("backward_and_update", 1e-5),
                                      ("backward_and_update_half", 3e-3)])
def test_graph_overlap_is_bitwise_graph_sync_and_eager_and_equals_one_rank(comm, dev, mode,
                                                                           tol):
    runs = {(g, ov): _train(comm, dev, g, ov, mode)[1]
            for g, ov in ((True, True), (True, False), (False, True))}
    want = runs[(True, True)]
    for key, got in runs.items():
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b, err_msg=str(key))
    # the oracle: one process on the joined batch
    ref, rx, ry = make(dev, opt.SGD(lr=0.1, momentum=0.9), B * comm.world_size)
    for x, y in batches(STEPS, B * comm.world_size, seed=21):
        step(ref, rx, ry, x, y)
    for a, b in zip(want, values(ref)):
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.fixture
def placed():
    """The plan's steps as the dist.overlap stage leaves them (before fusion merges the
    optimizer's elementwise updates into chains that run at their last member's place)."""
    seen = []
    stage = register_stage(GraphStage("test.placed", AFTER_ORDERING,
                                      lambda plan: seen.append(list(plan.steps))))
    yield seen
    STAGES.pop(stage.name)


def test_starts_run_before_the_rest_of_backward_waits_before_the_update(comm, dev, placed):
    _train(comm, dev, True, True)
    steps = placed[-1]
    pairs = _pairs(steps)
    compute = [p for p, n in enumerate(steps) if not n.name.startswith("Dist.")]
    grad_writes = set().union(*(_reads(steps[s]) for s, _w, _f in pairs))
    last_grad = max(p for p in compute if _writes(steps[p]) & grad_writes)
    # the first bucket starts while backward still computes later buckets' gradients
    assert pairs[0][0] < last_grad, [n.name for n in steps]
    for k, (s, w, _f) in enumerate(pairs):
        node = steps[s]
        # right after the last writer of its gradients, or after the previous start
        before = [p for p in range(s) if _writes(steps[p]) & _reads(node)
                  or (k and p == pairs[k - 1][0])]
        assert all(steps[p].name == "Dist.Progress" for p in range(max(before) + 1, s))
        # right before the first reader of the reduced gradients, or the next wait
        grads = _reads(node) - {id(_role(node)[3])}
        after = [p for p in range(w + 1, len(steps)) if _reads(steps[p]) & grads
                 or (k + 1 < len(pairs) and p == pairs[k + 1][1])]
        assert all(steps[p].name == "Dist.Progress" for p in range(w + 1, min(after)))
    # MPI progress after every compute node while a request is outstanding
    for p in compute:
        if any(s < p < w for s, w, _f in pairs):
            assert steps[p + 1].name == "Dist.Progress", (p, [n.name for n in steps])


def test_without_overlap_the_all_reduce_runs_after_backward(comm, dev, placed):
    _train(comm, dev, True, False)
    steps = placed[-1]
    pairs = _pairs(steps)
    grads = set().union(*(_reads(steps[s]) for s, _w, _f in pairs))
    last_grad = max(p for p, n in enumerate(steps)
                    if not n.name.startswith("Dist.") and _writes(n) & grads)
    assert pairs[0][0] > last_grad
    assert all(steps[p].name.startswith("Dist.") for p in range(pairs[0][0], pairs[-1][0]))


def _in_window(plan, s, w, k):
    """Planned blocks other than ``k`` alive somewhere in steps ``s..w``."""
    return [j for j in plan.planned if j != k and j in plan.first
            and plan.first[j] <= w and plan.last[j] >= s]


def test_in_flight_buffers_are_never_shared_while_the_request_is_outstanding(comm, dev):
    net, _ = _train(comm, dev, True, True)
    plan = net._graph.plan
    check_plan(plan)
    if not comm._device_arrays_usable(dev):
        pytest.skip(f"{dev.name}: the request runs on host staging buffers, outside the arena")
    for s, w, inflight in _pairs(plan.steps):
        assert inflight
        for k in inflight:
            assert k in plan.planned and (plan.first[k], plan.last[k]) == (s, w)
            for j in _in_window(plan, s, w, k):
                assert not plan.shares_memory(j, k)


@pytest.fixture
def forgetful_wait():
    """Plant the bug once: a stage after dist.overlap makes every wait forget its in-flight
    buffer, so the planner sees the buffer die at the start and may give its memory to
    backward's intermediates while the all-reduce is in flight."""

    def forget(plan):
        for p, n in enumerate(plan.steps):
            role = _role(n)
            if role and role[0] == "wait":
                start = next(m for m in plan.steps if _role(m) and _role(m)[0] == "start"
                             and _reads(m) - {id(role[3])} == _writes(n) - {id(role[3])})
                gone = _writes(start) - _reads(start)
                plan.steps[p] = Node(n.id, n.fn, n.name,
                                     tuple(b for b in n.reads if id(b) not in gone), n.writes)

    stage = register_stage(GraphStage("test.forgetful_wait", AFTER_ORDERING, forget))
    yield stage
    STAGES.pop(stage.name)


def test_a_planted_reuse_of_an_in_flight_buffer_is_caught(comm, dev, forgetful_wait):
    if not comm._device_arrays_usable(dev):
        pytest.skip(f"{dev.name}: the request runs on host staging buffers, outside the arena")
    good = _train(comm, dev, True, False)[1]
    net, bad = _train(comm, dev, True, True)
    plan = net._graph.plan
    shared = [(k, j) for s, w, inflight in _pairs(plan.steps) for k in inflight
              for j in _in_window(plan, s, w, k) if plan.shares_memory(j, k)]
    assert shared  # what the test above forbids happens with the bug
    assert any(not np.array_equal(a, b) for a, b in zip(good, bad))


@pytest.mark.parametrize("half", [False, True], ids=["float32", "half"])
@pytest.mark.parametrize("path", ["device", "host"])
def test_outstanding_requests_never_share_a_buffer(comm, dev, half, path):
    """Two all-reduces in flight at once, on the device's own buffers or on reused host
    buffers (the path of devices the communicator cannot use in place, e.g. OpenCL): each
    result is the numpy sum of its own data, and a third round reuses the buffers."""
    if path == "device" and not comm._device_arrays_usable(dev):
        pytest.skip(f"{dev.name}: the communicator stages its tensors through host memory")
    saved = comm._usable.get(dev)
    if path == "host":
        comm._usable[dev] = False
    try:
        for round_ in range(3):
            every = [[rank_data(90 + 10 * round_ + i, r, (257,), np.float32)
                      for r in range(comm.world_size)] for i in range(2)]
            ts = [tensor.from_numpy(e[comm.rank]) for e in every]
            for t in ts:
                t.to_device(dev)
            works = [comm.start_all_reduce([t], half=half, check=False) for t in ts]
            comm.progress()
            for w in reversed(works):
                w.wait()
            for t, e in zip(ts, every):
                if half:
                    want = np.sum([x.astype(np.float16).astype(np.float32) for x in e], 0,
                                  dtype=np.float32)
                else:
                    want = np.sum(e, 0, dtype=np.float32)
                np.testing.assert_allclose(tensor.to_numpy(t), want, rtol=1e-6, atol=1e-6)
    finally:
        if saved is None:
            comm._usable.pop(dev, None)
        else:
            comm._usable[dev] = saved


class _Plan:
    """What the stage reads and writes of a plan: ``steps`` and ``new_node``."""

    def __init__(self, steps):
        self.steps = steps

    def new_node(self, fn, reads, writes, name):
        return Node(-1, fn, name, tuple(reads), tuple(writes))


def test_the_stage_moves_gradient_writers_that_a_memory_order_postponed():
    """Backward in an order that computes the last layer's weight gradient last (what the
    memory-aware order does): the stage moves that writer up to where its inputs are ready,
    starts the bucket right after it, sinks each wait to just before its bucket's update and
    puts a progress node after each node that runs while a request is in flight."""
    from singa._distasync import overlap

    class Comm:
        def progress(self):
            pass

    comm = Comm()
    x, dy, dx, g1, g2, f1, f2, tok = (object() for _ in range(8))

    def node(name, reads, writes, role=None, ov=True):
        def fn():
            pass

        if role:
            fn.dist_async = (role, ov, comm, tok)
        return Node(0, fn, name, tuple(reads), tuple(writes))

    def backward(ov):
        return [node("A", [x], [dy]), node("B", [dy], [dx]), node("C", [dx], [g2]),
                node("D", [x, dy], [g1]),
                node("S1", [g1, tok], [f1, tok], "start", ov),
                node("S2", [g2, tok], [f2, tok], "start", ov),
                node("W1", [tok, g1, f1], [g1, tok], "wait", ov),
                node("W2", [tok, g2, f2], [g2, tok], "wait", ov),
                node("U1", [g1], [x]), node("U2", [g2], [dx])]

    plan = _Plan(backward(True))
    overlap(plan)
    names = [n.name.replace("Dist.Progress", "P") for n in plan.steps]
    assert names == ["A", "D", "S1", "B", "P", "C", "P", "S2", "W1", "U1", "P", "W2", "U2"]
    # without overlap the writers stay where they were and the starts sink to the waits
    plan2 = _Plan(backward(False))
    overlap(plan2)
    names = [n.name.replace("Dist.Progress", "P") for n in plan2.steps]
    assert names == ["A", "B", "C", "D", "S1", "S2", "W1", "U1", "P", "W2", "U2"]
