"""The scheduler's memory savings: in-place reuse in the arena and the memory-aware order.

Ops run through the real op table (``ops.run``) on a backend-free numpy device whose kernels
are numpy ufuncs. Oracles: eager execution of the same program (values), and the arena plan
itself (which blocks share memory, the most bytes live at one node).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from singa import _dtype
from singa._ctensor import CTensor
from singa.graph._memory import max_live
from singa.graph._ordering import bfs_order
from singa.ops import OPS, run
from test_scheduler import FakeDevice, _Alloc, _SubAlloc


def _k(f):
    return (lambda ins, outs, attrs: f(*ins, out=outs[0]), False, None)


KERNELS = {
    "Add": _k(np.add), "Mul": _k(np.multiply), "Neg": _k(np.negative),
    "ReLU": (lambda ins, outs, attrs: np.maximum(ins[0], 0, out=outs[0]), False, None),
    "Copy": (lambda ins, outs, attrs: np.copyto(outs[0], ins[0]), False, None),
}


class NumpyDevice(FakeDevice):
    """test_scheduler's float64 device with a few elementwise kernels."""

    def __init__(self, allocator):
        super().__init__(allocator)
        self.kernels = dict(KERNELS)


@pytest.fixture(params=["slots", "offsets"])
def dev(request):
    return NumpyDevice(_Alloc() if request.param == "slots" else _SubAlloc())


def tensor(dev, values):
    t = CTensor._new((len(values),), dev, _dtype.kDouble)
    t.copy_from_numpy(np.asarray(values, np.float64))
    return t


def op(name, *ins):
    return run(OPS[name], list(ins))[0]


def record(dev, body, collect=True):
    """Run ``body`` recording on ``dev``; then a full garbage collection unless ``collect`` is
    false (what a script that drops its intermediates by reference count alone sees)."""
    dev.EnableGraph(True)
    try:
        res = body()
    finally:
        dev.EnableGraph(False)
    if collect:
        gc.collect()
    return res


def _seq(graph, order) -> list:
    """The recorded nodes of ``graph`` in ``order`` (node ids)."""
    return [graph.recording.nodes[i] for i in order]


def _max_live(graph, seq, planned) -> int:
    """Peak bytes of the ``planned`` blocks live along ``seq`` (blocks of the current plan)."""
    return max_live(seq, planned, graph.plan.blocks)


def test_elementwise_flags():
    assert OPS["ReLU"].inplace == (0,) and OPS["ReLUBackward"].inplace == (0, 1)
    assert OPS["Add"].inplace == (0, 1) and OPS["MulScalar"].inplace == (0,)
    assert OPS["Copy"].inplace == () and OPS["Conv2d"].inplace == ()


def test_output_takes_the_memory_of_an_input_read_for_the_last_time(dev):
    x = tensor(dev, [-2.0, -1.0, 1.0, 2.0])
    keys = {}

    def body():
        t1 = op("Add", x, x)       # x is an input: never recycled
        t2 = op("ReLU", t1)        # t1 dies here: t2 may take its memory
        t3 = op("Mul", t2, x)      # t2 dies here
        out = op("Neg", t3)        # out stays with Python: not planned, never shared
        keys.update(t1=id(t1.block), t2=id(t2.block), t3=id(t3.block))
        return out

    out = record(dev, body)
    dev.RunGraph()
    g = dev._graph
    assert g.plan.planned == set(keys.values())
    plan, blocks = g.plan, g.recording.blocks
    assert plan.shares_memory(keys["t1"], keys["t2"]) and plan.shares_memory(keys["t2"], keys["t3"])
    assert blocks[keys["t1"]].data is blocks[keys["t3"]].data  # one buffer object
    np.testing.assert_array_equal(out.to_numpy(), -np.maximum(2 * x.to_numpy(), 0) * x.to_numpy())


def test_no_reuse_of_an_input_that_is_read_later(dev):
    x = tensor(dev, [-2.0, -1.0, 1.0, 2.0])
    keys = {}

    def body():
        t1 = op("Add", x, x)
        t2 = op("ReLU", t1)        # t1 is read again below: t2 needs its own memory
        t3 = op("Add", t2, t1)
        keys.update(t1=id(t1.block), t2=id(t2.block))
        return op("Neg", t3)

    out = record(dev, body)
    dev.RunGraph()
    assert not dev._graph.plan.shares_memory(keys["t1"], keys["t2"])
    v = 2 * x.to_numpy()
    np.testing.assert_array_equal(out.to_numpy(), -(np.maximum(v, 0) + v))


def test_no_reuse_of_a_block_python_holds(dev):
    x = tensor(dev, [-2.0, -1.0, 1.0, 2.0])
    keys = {}

    def body():
        keep = op("Add", x, x)     # returned to Python
        t = op("ReLU", keep)       # keep's last reader in the graph, but Python reads it
        keys["t"] = id(t.block)
        return keep, op("Neg", t)

    keep, out = record(dev, body)
    for _ in range(2):
        dev.RunGraph()
    g = dev._graph
    assert id(keep.block) not in g.plan.planned and keys["t"] in g.plan.planned
    assert g.plan.groups[keys["t"]] == [keys["t"]]
    np.testing.assert_array_equal(keep.to_numpy(), 2 * x.to_numpy())
    np.testing.assert_array_equal(out.to_numpy(), -np.maximum(2 * x.to_numpy(), 0))


def test_no_reuse_without_the_op_flag_or_for_a_broadcast_input(dev):
    x = tensor(dev, [-2.0, -1.0, 1.0, 2.0])
    one = tensor(dev, [1.0])
    keys = {}

    def body():
        t1 = op("Add", x, x)
        t2 = op("Copy", t1)        # Copy declares no in-place reuse
        s = op("Neg", one)         # (1,) broadcast against (4,)
        t3 = op("Add", s, t2)      # may take t2's memory, never s's (other shape)
        keys.update(t1=id(t1.block), t2=id(t2.block), t3=id(t3.block), s=id(s.block))
        return op("Neg", t3)

    out = record(dev, body)
    dev.RunGraph()
    g = dev._graph
    assert not g.plan.shares_memory(keys["t1"], keys["t2"])
    assert g.plan.groups.get(keys["s"]) == [keys["s"]]
    assert any(keys["t3"] in m and keys["t2"] in m for m in g.plan.groups.values())
    np.testing.assert_array_equal(out.to_numpy(), -(2 * x.to_numpy() - 1))


def test_memory_order_postpones_a_large_output_until_memory_is_freed(dev):
    """Recorded order s, a, big: BFS runs ``big`` (ready once s is) while ``a`` waits for its
    last reader, so both large blocks are alive at once. The memory-aware order runs a's
    reader first, and ``big`` then reuses a's memory."""
    one = tensor(dev, [3.0])
    zeros = tensor(dev, [0.0] * 1000)
    acc_a = tensor(dev, [1.0] * 1000)
    acc_big = tensor(dev, [1.0] * 1000)
    keys = {}

    def body():
        s = op("Neg", one)
        a = op("Add", zeros, zeros)
        big = op("Add", zeros, s)             # (1000,) from the broadcast (1,)
        run(OPS["Add"], [acc_big, big], outs=[acc_big])
        run(OPS["Add"], [acc_a, a], outs=[acc_a])
        keys.update(a=id(a.block), big=id(big.block))

    record(dev, body)
    g = dev._graph
    bfs = bfs_order(g.recording.nodes)
    dev.RunGraph()
    assert _max_live(g, _seq(g, bfs), g.plan.planned) >= 2 * 8000
    assert _max_live(g, g.plan.steps, g.plan.planned) < 8000 + 256
    assert g.plan.shares_memory(keys["a"], keys["big"])
    np.testing.assert_array_equal(acc_a.to_numpy(), 1.0)
    np.testing.assert_array_equal(acc_big.to_numpy(), -2.0)
    dev.RunGraph(serial=True)  # serial keeps the recorded order (and its peak)
    assert g.plan.order == list(range(len(g.recording.nodes)))
    np.testing.assert_array_equal(acc_big.to_numpy(), -5.0)


UNARY = ("Neg", "ReLU", "Copy")
BINARY = ("Add", "Mul")


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_programs_with_inplace_reuse_equal_eager(data):
    """Random dataflow programs of flagged and unflagged ops, most intermediates dropped by
    Python: BFS/memory-ordered and serial replays, both arena strategies, equal eager runs."""
    n_steps = data.draw(st.integers(1, 14))
    steps = []
    for i in range(n_steps):
        name = data.draw(st.sampled_from(UNARY + BINARY))
        arity = 1 if name in UNARY else 2
        steps.append((name, [data.draw(st.integers(0, i + 1)) for _ in range(arity)]))
    keep = set(data.draw(st.lists(st.integers(0, n_steps + 1), max_size=3))) | {n_steps + 1}
    init = (np.arange(8.0) - 3.5) / 3

    def build(dev, graph):
        vals = [tensor(dev, init), tensor(dev, init[::-1].copy())]

        def body():
            for name, args in steps:
                vals.append(op(name, *[vals[a] for a in args]))
            return {i: vals[i] for i in keep}

        if not graph:
            return body()
        # no full collection per build: the program's intermediates are freed by reference
        # count as vals is cleared, and with torch loaded in the worker one collection costs
        # ~50 ms (the 40 examples took 55 s, 45 of them in gc.collect)
        return record(dev, lambda: (body(), vals.clear())[0], collect=False)

    eager = {i: t.to_numpy() for i, t in build(NumpyDevice(_Alloc()), False).items()}
    for serial in (False, True):
        for alloc in (_Alloc(), _SubAlloc()):
            dev = NumpyDevice(alloc)
            kept = build(dev, True)
            for _ in range(2):
                dev.RunGraph(serial)
                for i, t in kept.items():
                    np.testing.assert_array_equal(t.to_numpy(), eager[i])


@given(st.lists(st.tuples(st.integers(1, 1 << 20), st.integers(0, 30), st.integers(0, 10)),
                min_size=1, max_size=25))
def test_arena_offsets_are_256_byte_aligned_and_disjoint(groups):
    """Every offset the graph's arena planner gives is a multiple of 256 bytes (what cuDNN's
    and vectorised kernels need of a sub-buffer's pointer: the arena itself comes from the
    pool, 256-aligned), and groups alive at the same time never share a byte."""
    from types import SimpleNamespace

    from singa.graph._memory import _place_offsets

    span = {r: (lo, lo + length) for r, (_, lo, length) in enumerate(groups)}
    blocks = {r: SimpleNamespace(nbytes=n) for r, (n, _, _) in enumerate(groups)}
    placement = _place_offsets(span, blocks)
    assert set(placement) == set(span)
    for r, (region, off) in placement.items():
        assert region == 0 and off % 256 == 0, (r, off)
    for a in span:
        for b in span:
            live_together = span[a][0] <= span[b][1] and span[b][0] <= span[a][1]
            if a < b and live_together:
                oa, ob = placement[a][1], placement[b][1]
                assert oa + blocks[a].nbytes <= ob or ob + blocks[b].nbytes <= oa, (a, b)
