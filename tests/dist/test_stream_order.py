"""How the NCCL communicator orders its collectives against the device's stream, without a GPU.

``singa_dist._streams.StreamOrder`` takes its streams and event factory as parameters
(``cupy.cuda.Stream``/``cupy.cuda.Event`` on a GPU); here they are recording stand-ins with
the members it uses, as ``packages/singa-cuda/tests/test_staging.py`` does for the staging's
events. The oracle is the order of the log: every collective is (a) issued on the NCCL stream,
(b) after the NCCL stream waited on an event recorded on the *device's* stream, and (c)
followed by the device's stream waiting on an event recorded on the NCCL stream after it
(for a started collective, in ``Request.wait``). The collectives themselves run on a GPU in
``test_nccl.py``.

The last tests check core's side: singa.dist enters ``Communicator._device_context(dev)``
around the body of every ``Dist`` op, eager, started and waited, and replayed from a graph,
so the stream a communicator binds there covers every primitive it runs.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager

import numpy as np
import pytest
from conftest import rank_data
from singa import tensor
from singa.dist import DistError
from singa_dist._streams import StreamOrder, compute_stream


class Stream:
    """What StreamOrder uses of ``cupy.cuda.Stream``: ``wait_event``, and ``with`` (current)."""

    def __init__(self, name, log):
        self.name, self.log = name, log

    def wait_event(self, event):
        self.log.append(("wait", self.name, event.id))

    def __enter__(self):
        self.log.append(("current", self.name))
        return self

    def __exit__(self, *exc):
        self.log.append(("restored", self.name))


class Event:
    """What StreamOrder uses of ``cupy.cuda.Event``: ``record(stream)`` and ``done``."""

    ids = itertools.count()

    def __init__(self, log):
        self.log, self.id, self.done = log, next(Event.ids), False

    def record(self, stream):
        self.log.append(("record", stream.name, self.id))


class StreamOwner:
    """The one member StreamOrder reads of a device: the ``stream`` its kernels run on
    (``CudaGPU.stream``)."""

    def __init__(self, stream):
        self.stream = stream


@pytest.fixture
def log():
    return []


@pytest.fixture
def order(log):
    return StreamOrder(Stream("nccl", log), lambda: Event(log), Stream("legacy", log))


@pytest.fixture
def gpu(log):
    return StreamOwner(Stream("device", log))


def issue(log):
    """A collective that logs the stream it was enqueued on."""
    return lambda stream: log.append(("collective", stream.name))


def assert_ordered(log, compute="device"):
    """(a), (b) and (c) of the module docstring, for the one collective in ``log``."""
    pos = [i for i, e in enumerate(log) if e[0] == "collective"]
    assert len(pos) == 1, log
    at = pos[0]
    assert log[at] == ("collective", "nccl"), "(a) not issued on the NCCL stream"
    recorded = {e[2]: e[1] for e in log if e[0] == "record"}
    before = [recorded.get(e[2]) for e in log[:at] if e[:2] == ("wait", "nccl")]
    assert compute in before, f"(b) the NCCL stream waited for {before}, not {compute}"
    after = [e for e in log[at:] if e[:2] == ("wait", compute)]
    assert after, f"(c) the {compute} stream never waits for the collective: {log}"
    rec = next(i for i, e in enumerate(log) if e[0] == "record" and e[2] == after[0][2])
    assert log[rec][1] == "nccl" and rec > at, f"(c) waits on {log[rec]}, not on NCCL after it"


def test_a_collective_runs_on_the_nccl_stream_between_the_device_streams_events(log, order, gpu):
    with order.on(gpu):
        order.run(issue(log))
    assert_ordered(log)
    assert log == [("current", "device"),
                   ("record", "device", log[1][2]), ("wait", "nccl", log[1][2]),
                   ("collective", "nccl"),
                   ("record", "nccl", log[4][2]), ("wait", "device", log[4][2]),
                   ("restored", "device")]


def test_a_started_collective_makes_the_device_stream_wait_in_request_wait(log, order, gpu):
    with order.on(gpu):
        req = order.start(issue(log))
    assert not [e for e in log if e[:2] == ("wait", "device")]  # nothing waits yet
    assert not req.test()
    req.wait()  # Work.wait: later, and the device's stream need not be current then
    assert_ordered(log)
    req.event.done = True
    assert req.test()


def test_the_compute_stream_is_the_devices_even_when_another_stream_is_current(log, order, gpu):
    # cupy's current stream outside the device's kernels is the legacy default one: a
    # collective ordered against it would not wait for the device's kernels
    with Stream("legacy", log), order.on(gpu):
        order.run(issue(log))
    assert_ordered(log, compute="device")


def test_a_device_without_a_stream_of_its_own_orders_against_the_default_stream(log, order,
                                                                                 dev):
    assert not hasattr(dev, "stream")  # the CPU device: nothing of its own
    assert compute_stream(dev, "legacy") == "legacy"
    with order.on(dev):
        order.run(issue(log))
    assert_ordered(log, compute="legacy")


def test_the_binding_ends_with_the_op(log, order, gpu):
    other = StreamOwner(Stream("other", log))
    with order.on(gpu):
        with order.on(other):
            order.run(issue(log))
        assert_ordered(log, compute="other")
        log.clear()
        order.run(issue(log))  # back to the outer op's device
        assert_ordered(log, compute="device")
    with pytest.raises(DistError, match="outside a Dist op"):
        order.run(issue(log))
    with pytest.raises(DistError, match="outside a Dist op"):
        order.start(issue(log))


# ---------------------------------------------------------------------- core's side
@pytest.fixture
def contexts(comm, monkeypatch):
    """Counts of the MPI communicator's ``_device_context`` entries, and the primitives that
    ran outside one (each primitive is wrapped to check)."""
    seen = {"depth": 0, "entered": 0, "outside": []}
    cls = type(comm)

    @contextmanager
    def device_context(self, dev):
        seen["depth"] += 1
        seen["entered"] += 1
        try:
            yield
        finally:
            seen["depth"] -= 1

    def checked(name):
        prim = getattr(cls, name)

        def run(self, *args):
            if not seen["depth"]:
                seen["outside"].append(name)
            return prim(self, *args)

        return run

    monkeypatch.setattr(cls, "_device_context", device_context)
    for name in ("_allreduce", "_iallreduce", "_iallgather", "_bcast", "_allgather",
                 "_allgatherv"):
        monkeypatch.setattr(cls, name, checked(name))
    return seen


def _tensors(comm, dev):
    def t(arr):
        out = tensor.from_numpy(np.array(arr))
        out.to_device(dev)
        return out

    return t(rank_data(50, comm.rank, (33,), np.float32)), t(np.ones(5, np.float32)), \
        t(np.zeros(33, np.float32))


def _every_op(comm, x, y, residual):
    comm.all_reduce(x, "mean")
    comm.fused_all_reduce([x, y])
    comm.all_reduce_half(x)
    comm.sparse_all_reduce(x, 0.5, topK=True, residual=residual)
    comm.broadcast(x, 0)
    comm.all_gather(x)
    comm.start_all_reduce(x).wait()
    comm.start_all_reduce(x, half=True).wait()


OPS = 10  # Dist ops of _every_op: a start and a wait each for the two started all-reduces


def test_every_dist_op_runs_its_primitives_inside_the_device_context(comm, dev, contexts):
    _every_op(comm, *_tensors(comm, dev))
    assert contexts["entered"] == OPS and contexts["outside"] == []


def test_a_replayed_graph_enters_the_device_context_again(comm, dev, contexts):
    from singa.scheduler import Graph

    args = _tensors(comm, dev)
    g = Graph(dev)
    prev = dev.use_graph(g)
    try:
        dev.EnableGraph(True)
        _every_op(comm, *args)
        dev.EnableGraph(False)
        assert contexts["entered"] == 0  # recorded, not run
        dev.RunGraph()
        dev.RunGraph()
    finally:
        dev.EnableGraph(False)
        dev.use_graph(prev)
    assert contexts["entered"] == 2 * OPS and contexts["outside"] == []
