"""The scheduler on hand-built op sequences, with a backend-free numpy device.

Oracles: eager execution of the same sequence (values), and explicit checks made inside each
node while it runs (its input blocks are allocated; blocks Python holds are never freed).
"""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa._ctensor import CTensor
from singa._device import Device
from singa.graph._ordering import bfs_order
from singa.scheduler import BlockType


class _Alloc:
    def alloc(self, nbytes):
        return np.zeros(nbytes, np.uint8)

    def free(self, buf):
        pass

    def zero(self, buf, nbytes):
        buf[:nbytes] = 0


class _SubAlloc(_Alloc):
    """An allocator that can alias part of a buffer: graphs pack their arena at offsets."""

    def sub(self, buf, offset, nbytes):
        return buf[offset:offset + nbytes]


class FakeDevice(Device):
    """A device whose native arrays are float64 numpy views of the block buffers."""

    def __init__(self, allocator=None):
        super().__init__("fake", 0, allocator or _Alloc())

    def native(self, ct):
        return ct.block.data.view(np.float64)[: ct.size].reshape(ct.dims)

    def native_to_numpy(self, arr):
        return np.array(arr)

    def numpy_into_native(self, src, arr):
        arr[...] = src


@pytest.fixture(params=["slots", "offsets"])
def dev(request):
    """Both arena strategies: whole shared buffers, and offsets in one buffer."""
    return FakeDevice(_Alloc() if request.param == "slots" else _SubAlloc())


def tensor(dev, n=4):
    return CTensor._new((n,), dev, 4)  # float64


class Prog:
    """Builds ops as closures over CTensors and records what each node saw when it ran."""

    def __init__(self, dev):
        self.dev = dev
        self.log = []

    def op(self, name, fn, reads, writes):
        dev = self.dev

        def run():
            for t in reads:
                assert t.block.data is not None, f"{name}: input freed before its last reader"
            self.log.append(name)
            fn(*[dev.native(t) for t in reads], *[dev.native(t) for t in writes])

        dev.exec(run, [t.block for t in reads], [t.block for t in writes], name)


def _preds(dev):
    nodes = dev._graph.recording.nodes
    return {n.name: {nodes[p].name for p in n.preds} for n in nodes}


def test_raw_waw_war_edges(dev):
    a, b, c = tensor(dev), tensor(dev), tensor(dev)
    p = Prog(dev)
    dev.EnableGraph(True)
    p.op("w_a", lambda o: o.fill(1), [], [a])           # writes a
    p.op("r_a_w_b", lambda x, o: np.add(x, 1, out=o), [a], [b])  # RAW on a
    p.op("w_a_again", lambda o: o.fill(5), [], [a])     # WAW on a, WAR after r_a_w_b
    p.op("r_b_w_c", lambda x, o: np.multiply(x, 2, out=o), [b], [c])  # RAW on b
    dev.EnableGraph(False)
    preds = _preds(dev)
    assert preds["w_a"] == set()
    assert preds["r_a_w_b"] == {"w_a"}
    assert preds["w_a_again"] == {"w_a", "r_a_w_b"}
    assert preds["r_b_w_c"] == {"r_a_w_b"}
    g = dev._graph
    assert g.recording.block_type[id(a.block)] == BlockType.INTER  # written, read, written again
    assert g.recording.block_type[id(b.block)] == BlockType.INTER
    assert g.recording.block_type[id(c.block)] == BlockType.END
    dev.RunGraph()
    np.testing.assert_array_equal(a.to_numpy(), 5)
    np.testing.assert_array_equal(c.to_numpy(), 4)


def test_sync_op_orders_everything(dev):
    a, b = tensor(dev), tensor(dev)
    p = Prog(dev)
    dev.EnableGraph(True)
    p.op("w_a", lambda o: o.fill(1), [], [a])
    p.op("w_b", lambda o: o.fill(2), [], [b])
    dev.Sync()
    p.op("w_a2", lambda o: o.fill(3), [], [a])
    dev.EnableGraph(False)
    preds = _preds(dev)
    assert preds["Waiting"] == {"w_a", "w_b"}
    assert "Waiting" in preds["w_a2"]
    order = [dev._graph.recording.nodes[i].name for i in bfs_order(dev._graph.recording.nodes)]
    assert order.index("Waiting") > max(order.index("w_a"), order.index("w_b"))
    assert order.index("w_a2") > order.index("Waiting")


def test_input_and_param_types(dev):
    x, w, y = tensor(dev), tensor(dev), tensor(dev)
    x.copy_from_numpy(np.arange(4.0))
    w.copy_from_numpy(np.ones(4))
    p = Prog(dev)
    dev.EnableGraph(True)
    p.op("y=x*w", lambda a, b, o: np.multiply(a, b, out=o), [x, w], [y])
    p.op("w+=y", lambda a, b, o: np.add(a, b, out=o), [w, y], [w])
    dev.EnableGraph(False)
    g = dev._graph
    assert g.recording.block_type[id(x.block)] == BlockType.INPUT
    assert g.recording.block_type[id(w.block)] == BlockType.PARAM
    for _ in range(3):
        dev.RunGraph()
    # w_{k+1} = w_k + x * w_k = w_k (1 + x)
    np.testing.assert_allclose(w.to_numpy(), (1 + np.arange(4.0)) ** 3)


def test_intermediates_share_memory_only_when_lifetimes_do_not_overlap(dev):
    x = tensor(dev)
    x.copy_from_numpy(np.arange(4.0))
    p = Prog(dev)
    dev.EnableGraph(True)
    t1, t2, t3, out = tensor(dev), tensor(dev), tensor(dev), tensor(dev)
    p.op("t1=x+1", lambda a, o: np.add(a, 1, out=o), [x], [t1])
    p.op("t2=t1*2", lambda a, o: np.multiply(a, 2, out=o), [t1], [t2])
    p.op("t3=t2+t1", lambda a, b, o: np.add(a, b, out=o), [t2, t1], [t3])  # last use of t1, t2
    p.op("out=t3-1", lambda a, o: np.subtract(a, 1, out=o), [t3], [out])
    k1, k2, k3 = id(t1.block), id(t2.block), id(t3.block)
    del t1, t2, t3  # only the graph holds them now; `out` and `x` stay with Python
    gc.collect()
    dev.EnableGraph(False)
    dev.RunGraph(serial=True)
    g = dev._graph
    assert {k1, k2, k3} == g.plan.planned  # x (input) and out (held by Python) are not recycled
    # t1, t2, t3 are all alive at "t3=...": no two may share memory
    assert not any(g.plan.shares_memory(p, q) for p, q in ((k1, k2), (k1, k3), (k2, k3)))
    np.testing.assert_allclose(out.to_numpy(), 3 * (np.arange(4.0) + 1) - 1)
    for _ in range(2):  # replays reuse the same arena and stay correct
        dev.RunGraph(serial=True)
    np.testing.assert_allclose(out.to_numpy(), 3 * (np.arange(4.0) + 1) - 1)


def test_arena_is_released_on_reset(dev):
    p = Prog(dev)
    dev.EnableGraph(True)
    a, keep = tensor(dev, 1000), tensor(dev)
    p.op("a=1", lambda o: o.fill(1), [], [a])
    p.op("keep=a[:4]", lambda x, o: np.copyto(o, x[:4]), [a], [keep])
    del a
    dev.EnableGraph(False)
    dev.RunGraph()
    with_arena = dev.memory_stats()["current_bytes"]
    dev.ResetGraph()
    assert dev.memory_stats()["current_bytes"] <= with_arena - 8000


def test_python_held_tensor_is_not_freed(dev):
    x = tensor(dev)
    x.copy_from_numpy(np.arange(4.0))
    p = Prog(dev)
    dev.EnableGraph(True)
    keep = tensor(dev)
    out = tensor(dev)
    p.op("keep=x+1", lambda a, o: np.add(a, 1, out=o), [x], [keep])
    p.op("out=keep*2", lambda a, o: np.multiply(a, 2, out=o), [keep], [out])
    dev.EnableGraph(False)
    dev.RunGraph()
    np.testing.assert_allclose(keep.to_numpy(), np.arange(4.0) + 1)


def test_memory_sharing_reuses_freed_block(dev):
    """The seed doc's example: c = a + b; d = 2c. a is dead after the add: d takes its memory."""
    p = Prog(dev)
    dev.EnableGraph(True)
    a, b = tensor(dev), tensor(dev)
    p.op("a=1", lambda o: o.fill(1), [], [a])
    p.op("b=2", lambda o: o.fill(2), [], [b])
    c, d, e = tensor(dev), tensor(dev), tensor(dev)
    p.op("c=a+b", lambda x, y, o: np.add(x, y, out=o), [a, b], [c])
    p.op("d=2c", lambda x, o: np.multiply(x, 2, out=o), [c], [d])
    p.op("e=d+1", lambda x, o: np.add(x, 1, out=o), [d], [e])
    ka, kc, kd = id(a.block), id(c.block), id(d.block)
    del a, c, d
    dev.EnableGraph(False)
    dev.RunGraph(serial=True)
    g = dev._graph
    assert g.plan.shares_memory(kd, ka)  # d reuses a's memory: a's last reader ran before d's write
    assert not g.plan.shares_memory(kc, ka)  # c is written while a is still being read
    np.testing.assert_array_equal(e.to_numpy(), 7)


OPS = [
    ("add", 2, lambda a, b, o: np.add(a, b, out=o)),
    ("mul", 2, lambda a, b, o: np.multiply(a, b, out=o)),
    ("neg", 1, lambda a, o: np.negative(a, out=o)),
    ("half", 1, lambda a, o: np.multiply(a, 0.5, out=o)),
]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_programs_graph_equals_eager(data):
    """Random op sequences over a few tensors: BFS and serial replays equal eager runs."""
    n_tensors = data.draw(st.integers(2, 5))
    steps = data.draw(st.lists(
        st.tuples(st.integers(0, len(OPS) - 1), st.lists(st.integers(0, n_tensors - 1),
                                                        min_size=3, max_size=3)),
        min_size=1, max_size=12))
    init = np.arange(n_tensors * 4, dtype=np.float64).reshape(n_tensors, 4) / 7 + 1

    def build(dev, record):
        ts = [tensor(dev) for _ in range(n_tensors)]
        for t, v in zip(ts, init):
            t.copy_from_numpy(v)
        p = Prog(dev)
        if record:
            dev.EnableGraph(True)
        for op_i, args in steps:
            name, arity, fn = OPS[op_i]
            reads = [ts[i] for i in args[:arity]]
            p.op(name, fn, reads, [ts[args[2]]])
        if record:
            dev.EnableGraph(False)
        return ts

    eager = [t.to_numpy() for t in build(FakeDevice(), False)]
    for serial, alloc in ((False, _Alloc()), (True, _Alloc()), (False, _SubAlloc()),
                          (True, _SubAlloc())):
        dev = FakeDevice(alloc)
        ts = build(dev, True)
        dev.RunGraph(serial)
        for t, e in zip(ts, eager):
            np.testing.assert_allclose(t.to_numpy(), e)


def test_profiling_report_and_chrome_trace(dev, tmp_path):
    x, y = tensor(dev), tensor(dev)
    x.copy_from_numpy(np.ones(4))
    p = Prog(dev)
    dev.EnableGraph(True)
    p.op("ForwardOp", lambda a, o: np.add(a, 1, out=o), [x], [y])
    p.op("ReLUBackward", lambda a, o: np.multiply(a, 2, out=o), [y], [x])
    p.op("Dist_s_allreduce", lambda a, o: np.add(a, 0, out=o), [x], [y])
    dev.EnableGraph(False)
    dev.SetVerbosity(2)
    dev.SetSkipIteration(1)
    for _ in range(4):
        dev.RunGraph()
    report = dev.time_profiling_report()
    assert report.splitlines()[0] == "Time Profiling:"
    assert "OP_ID0. ForwardOp :" in report and "OP_ID1. ReLUBackward :" in report
    dev.SetVerbosity(3)
    dist_only = dev.time_profiling_report().splitlines()[1:]
    assert len(dist_only) == 1 and "Dist_s_allreduce" in dist_only[0]
    dev.SetVerbosity(1)
    lines = dev.time_profiling_report().splitlines()
    assert lines[1].startswith("Forward Propagation Time :")
    assert lines[2].startswith("Backward Propagation Time :")
    path = tmp_path / "trace.json"
    dev.export_chrome_trace(str(path))
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    assert len(events) == 3 * 3  # 3 nodes x 3 profiled iterations (4 runs, 1 skipped)
    assert {e["name"] for e in events} == {"ForwardOp", "ReLUBackward", "Dist_s_allreduce"}
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


def test_memory_stats_and_reset_peak(dev):
    a = tensor(dev, 1000)
    a.copy_from_numpy(np.zeros(1000))
    s = dev.memory_stats()
    assert s["current_bytes"] >= 8000 and s["peak_bytes"] >= s["current_bytes"]
    del a
    assert dev.memory_stats()["current_bytes"] == 0
    assert dev.memory_stats()["peak_bytes"] >= 8000
    dev.reset_peak_memory_stats()
    assert dev.memory_stats()["peak_bytes"] == 0
