"""Graph recording is scoped: ``Device.record(graph)`` restores whatever recorded before (on
exit and on exception), a Model records into and replays its own graph, threads record
independently, and SINGA's unscoped calls (EnableGraph, RunGraph, ResetGraph, use_graph) keep
working on top of it. Oracles: numpy for every computed value, node names for where an op
went, and a model trained outside any recording for one trained inside one."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import _shared_models
import numpy as np
import pytest
from singa import autograd, opt, tensor
from singa.device import get_default_device
from singa.errors import GraphError
from singa.scheduler import Graph


@pytest.fixture
def dev():
    d = get_default_device()
    assert d.recorder() is None and not d.graph_enabled()
    yield d
    d.EnableGraph(False)
    d.use_graph(None)


def _names(graph) -> list[str]:
    return [n.name for n in graph.recording.nodes]


def _pair(rng, n=5):
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    return a, b, tensor.from_numpy(a), tensor.from_numpy(b)


def test_nested_records_restore_the_previous_recorder(dev, rng):
    a, b, ta, tb = _pair(rng)
    outer, inner = Graph(dev), Graph(dev)
    with dev.record(outer) as got:
        assert got is outer and dev.recorder() is outer
        s = ta + tb
        with dev.record(inner):
            assert dev.recorder() is inner
            p = ta * tb
            with dev.record(None):  # eager inside two recordings: computed now
                assert not dev.graph_enabled()
                np.testing.assert_allclose(tensor.to_numpy(ta - tb), a - b, rtol=1e-6)
            assert dev.recorder() is inner
        assert dev.recorder() is outer
        d = ta - tb
    assert dev.recorder() is None
    assert _names(outer) == ["Add", "Sub"] and _names(inner) == ["Mul"]
    outer.run()
    inner.run()
    np.testing.assert_allclose(tensor.to_numpy(s), a + b, rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(d), a - b, rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(p), a * b, rtol=1e-6)


def test_an_exception_inside_a_recording_restores_the_previous_recorder(dev, rng):
    _, _, ta, tb = _pair(rng)
    outer, inner = Graph(dev), Graph(dev)
    with dev.record(outer):
        with pytest.raises(RuntimeError, match="boom"), dev.record(inner):
            ta + tb  # noqa: B018 (recorded)
            raise RuntimeError("boom")
        assert dev.recorder() is outer
    assert dev.recorder() is None and _names(inner) == ["Add"] and _names(outer) == []


def test_record_refuses_another_devices_graph(dev):
    other = SimpleNamespace(device=SimpleNamespace(name="elsewhere"))
    with pytest.raises(GraphError, match="belongs to"):
        dev.record(other)


class MLP(_shared_models.MLP):
    """The shared MLP, optionally failing after its forward pass, before the optimizer."""

    def __init__(self, fail_at_record=False):
        super().__init__(hidden=6)
        self.fail_at_record = fail_at_record

    def train_one_batch(self, x, y):
        if not self.fail_at_record:
            return super().train_one_batch(x, y)
        autograd.softmax_cross_entropy(self.forward(x), y)
        raise RuntimeError("failed while recording")


def _mlp(dev, rng, seed=0, **kw):
    x = tensor.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    y = tensor.from_numpy(rng.integers(0, 3, 4).astype(np.int32))
    m = MLP(**kw)
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    m.compile([x], is_train=True, use_graph=True)
    g = np.random.default_rng(seed)
    m.set_states({k: g.standard_normal(v.shape).astype(np.float32) * 0.3
                  for k, v in sorted(m.get_states().items())})
    return m, x, y


def _losses(m, x, y, steps=3) -> list[float]:
    return [float(tensor.to_numpy(m(x, y)[1]).sum()) for _ in range(steps)]


def test_a_model_inside_another_recording_keeps_its_own_graph(dev, rng):
    """Compiling and training a graph-mode model while the caller records (SINGA's
    EnableGraph) leaves the caller's recording on and free of the model's ops; the model
    trains as it does outside (oracle: a twin model trained with nothing recording)."""
    state = rng.bit_generator.state
    twin, tx, ty = _mlp(dev, rng)
    want = _losses(twin, tx, ty)
    rng.bit_generator.state = state
    m, x, y = _mlp(dev, rng)
    dev.EnableGraph(True)
    caller = dev._graph
    MLP().compile([x], is_train=True, use_graph=True)  # initialises eagerly, probes aside
    assert _names(caller) == []
    got = [0.0] * 3
    for i in range(3):
        out = m(x, y)[1]
        assert dev.recorder() is caller
        with dev.record(None):
            got[i] = float(tensor.to_numpy(out).sum())
    dev.EnableGraph(False)
    assert _names(caller) == [] and m._graph is not caller
    assert m._graph.recording.nodes and m._graph.iteration == 3
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_model_failing_while_recording_restores_the_recorder(dev, rng):
    m, x, y = _mlp(dev, rng, fail_at_record=True)
    outer = Graph(dev)
    with dev.record(outer):
        with pytest.raises(RuntimeError, match="failed while recording"):
            m(x, y)
        assert dev.recorder() is outer
    assert dev.recorder() is None and _names(outer) == []
    m.fail_at_record = False  # a later call records afresh
    m.graph(False)
    m.graph(True)
    assert np.isfinite(_losses(m, x, y, 1)[0])


def test_a_model_never_touches_the_devices_graph_slot(dev, rng):
    """The device's SINGA graph (EnableGraph/RunGraph/ResetGraph) and a model's graph are
    separate: a ResetGraph after training does not empty the model's graph, and the time
    profiling report is the model's (the graph that ran last)."""
    slot = Graph(dev)
    dev.use_graph(slot)
    m, x, y = _mlp(dev, rng)
    dev.SetVerbosity(2)
    dev.SetSkipIteration(0)
    try:
        first = _losses(m, x, y, 2)
        report, own = dev.time_profiling_report(), m._graph.profiling_report()
    finally:
        dev.SetVerbosity(0)
        dev.SetSkipIteration(5)
    assert dev._graph is slot and report == own and "Matmul" in report
    dev.ResetGraph()
    assert m._graph.recording.nodes  # still there: replays keep training
    later = _losses(m, x, y, 1)
    assert later[0] < first[0]


def test_singa_calls_record_and_replay(dev, rng):
    a, b, ta, tb = _pair(rng)
    out = tensor.from_numpy(np.zeros(5, np.float32))
    dev.ResetGraph()
    dev.EnableGraph(True)
    assert dev.graph_enabled()
    out += ta * tb
    with dev.record(None):  # scoped pause inside an unscoped recording
        np.testing.assert_allclose(tensor.to_numpy(ta + tb), a + b, rtol=1e-6)
    assert dev.graph_enabled()
    dev.EnableGraph(False)
    assert not dev.graph_enabled()
    for _ in range(3):
        dev.RunGraph()
    np.testing.assert_allclose(tensor.to_numpy(out), 3 * a * b, rtol=1e-5)
    dev.RunGraph(serial=True)
    np.testing.assert_allclose(tensor.to_numpy(out), 4 * a * b, rtol=1e-5)
    dev.ResetGraph()
    assert dev._graph.recording.nodes == []


def test_use_graph_moves_an_unscoped_recording(dev, rng):
    _, _, ta, tb = _pair(rng)
    first, second = Graph(dev), Graph(dev)
    dev.use_graph(first)
    dev.EnableGraph(True)
    ta + tb  # noqa: B018
    assert dev.use_graph(second) is first
    ta * tb  # noqa: B018
    dev.EnableGraph(False)
    assert _names(first) == ["Add"] and _names(second) == ["Mul"]


def test_two_threads_record_on_one_device_independently(dev, rng):
    """docs/architecture.md, "Threads": recording is per thread; a thread starts eager."""
    arrays = [_pair(rng) for _ in range(2)]
    graphs = [Graph(dev), Graph(dev)]
    barrier = threading.Barrier(2)
    seen, errors = [None, None], []

    def work(i):
        try:
            a, b, ta, tb = arrays[i]
            assert dev.recorder() is None  # another thread's recording is not ours
            barrier.wait()
            if i == 0:
                with dev.record(graphs[0]):
                    barrier.wait()  # both threads are recording now
                    out = ta * tb
                    barrier.wait()
            else:
                dev.EnableGraph(True)
                dev.use_graph(graphs[1])
                barrier.wait()
                out = ta - tb
                barrier.wait()
                dev.EnableGraph(False)
            seen[i] = dev.recorder()
            graphs[i].run()
            want = a * b if i == 0 else a - b
            np.testing.assert_allclose(tensor.to_numpy(out), want, rtol=1e-6)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert seen == [None, None] and dev.recorder() is None
    assert _names(graphs[0]) == ["Mul"] and _names(graphs[1]) == ["Sub"]


def test_python_held_counts_the_ctensors_alive_outside_the_graph(dev, rng):
    """An intermediate stays the user's while any CTensor of its block lives outside the graph
    (a raw CTensor in a local variable included), and becomes the planner's once none does;
    nodes that shared a CTensor share the graph's view of it."""
    a, b, ta, tb = _pair(rng)
    for keep in (True, False):
        graph = Graph(dev)
        with dev.record(graph):
            c = ta + tb
            d = c * tb
        raw, key = c.data, id(c.data.block)
        del c
        if not keep:
            del raw
        held = graph.recording.python_held()
        assert (key in held) is keep and id(d.data.block) in held
        add, mul = graph.recording.nodes
        assert add.fn.outs[0] is mul.fn.ins[0]  # one view, shared
        graph.run()
        np.testing.assert_allclose(tensor.to_numpy(d), (a + b) * b, rtol=1e-6)
        if keep:
            np.testing.assert_allclose(raw.to_numpy(), a + b, rtol=1e-6)
