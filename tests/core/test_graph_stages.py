"""Stages added to the graph pipeline through its extension point (``singa.graph``).

A toy "all-reduce over two ranks" stage, shaped like singa-dist's: after ordering it inserts a
start node right after a gradient's writer and a wait node (which doubles the gradient, the sum
of two equal ranks) right before its first reader. Oracles: numpy on the same program with the
doubling; the plan each stage sees (what ran before it, what did not yet); the order of events
inside a replay; :func:`singa.graph.check_plan` (tested to fail on broken plans).
"""

from __future__ import annotations

import numpy as np
import pytest
from singa.errors import GraphError
from singa.graph import GraphStage, check_plan, register_stage
from singa.ops import FUSIONS, FusionDef
from test_scheduler_memory import NumpyDevice, _Alloc, _SubAlloc, op, record, tensor


def _add_relu(ins, outs, attrs):
    np.maximum(np.add(ins[0], ins[1]), 0, out=outs[0])


@pytest.fixture(params=["slots", "offsets"])
def dev(request, monkeypatch):
    monkeypatch.setitem(FUSIONS, "Add+ReLU", FusionDef("Add+ReLU", "Add", "ReLU", 0))
    d = NumpyDevice(_Alloc() if request.param == "slots" else _SubAlloc())
    d.kernels["Add+ReLU"] = (_add_relu, False, None)
    return d


@pytest.fixture
def stages(monkeypatch):
    """An empty stage table for the test (restored afterwards)."""
    monkeypatch.setattr("singa.graph._stages.STAGES", {})
    from singa.graph import _stages
    return _stages.STAGES


X = np.array([-2.0, -1.0, 1.0, 2.0])
W = np.array([1.0, 0.5, -1.0, 3.0])


def program(dev, keys):
    x, w = tensor(dev, X), tensor(dev, W)

    def body():
        a = op("Add", x, x)        # read by the ReLU only: fused away
        r = op("ReLU", a)
        g = op("Mul", r, x)        # the "gradient"
        t = op("Neg", x)           # other work that may run while it is reduced
        u = op("Mul", t, t)
        w2 = op("Add", w, g)       # the "optimizer": first reader of the gradient
        keys.update(a=id(a.block), g=id(g.block), u=id(u.block))
        return op("Add", w2, u)

    return record(dev, body)


def expected():
    return W + 2 * (np.maximum(2 * X, 0) * X) + X * X


class ToyAllReduce:
    """Start after the gradient's writer, wait (doubling it) before its first reader."""

    def __init__(self, dev, keys, log):
        self.dev, self.keys, self.log = dev, keys, log
        self.seen = {}

    def after_ordering(self, plan):
        k = self.keys["g"]
        steps = plan.steps
        self.seen["after_ordering"] = [n.name for n in steps]
        assert steps == [plan.recording.nodes[i] for i in plan.order]
        assert sorted(plan.order) == list(range(len(plan.recording.nodes)))
        assert k in plan.planned and not plan.placement and not plan.calls
        w = next(p for p, n in enumerate(steps) if k in {id(b) for b in n.writes})
        gct = steps[w].fn.outs[0]
        blk = gct.block
        dev, log = self.dev, self.log

        def start():
            log.append(("start", dev.native(gct).copy()))

        def wait():
            arr = dev.native(gct)
            arr += arr  # the sum over two ranks holding the same gradient
            log.append(("wait", None))

        steps.insert(w + 1, plan.new_node(start, [blk], [], "DistStart"))
        r = next(p for p, n in enumerate(steps) if p > w + 1 and blk in n.reads)
        steps.insert(r, plan.new_node(wait, [blk], [blk], "DistWait"))

    def after_memory_planning(self, plan):
        k = self.keys["g"]
        names = [n.name for n in plan.steps]
        self.seen["after_memory_planning"] = names
        s, w = names.index("DistStart"), names.index("DistWait")
        assert plan.first[k] < s < w <= plan.last[k]  # alive across the communication
        assert set(plan.placement) == plan.planned and not plan.calls
        assert all(plan.blocks[b].data is not None for b in plan.planned)
        for j in plan.planned:  # nothing alive in the window reuses the gradient's memory
            if j != k and plan.first[j] <= w and plan.last[j] >= s:
                assert not plan.shares_memory(j, k)
        check_plan(plan)

    def around_replay(self, plan, replay, profiled):
        assert len(plan.calls) == len(plan.steps) and plan.calls[0][4] is plan.steps[0]
        self.seen.setdefault("around_replay", []).append(profiled)
        log = self.log

        def wrapped():
            log.append(("enter", profiled))
            replay()
            log.append(("exit", profiled))

        return wrapped

    def register(self):
        for point in ("after_ordering", "after_memory_planning", "around_replay"):
            register_stage(GraphStage(f"toy.{point}", point, getattr(self, point)))


@pytest.mark.parametrize("serial", [False, True])
def test_a_stage_runs_at_its_point_and_sees_the_plan_it_was_promised(dev, stages, serial):
    keys, log = {}, []
    toy = ToyAllReduce(dev, keys, log)
    toy.register()
    out = program(dev, keys)
    for _ in range(3):
        dev.RunGraph(serial)
    # after ordering: the recorded nodes, nothing fused yet; after memory planning: fused
    before, after = toy.seen["after_ordering"], toy.seen["after_memory_planning"]
    assert "Add+ReLU" not in before and before.count("Add") == 3 and "ReLU" in before
    assert "Add+ReLU" in after and "ReLU" not in after
    assert toy.seen["around_replay"] == [False]  # wrapped once, when the plan was made
    kinds = [e[0] for e in log]
    assert kinds == ["enter", "start", "wait", "exit"] * 3
    # what start saw: the gradient as written, before the wait doubled it
    np.testing.assert_array_equal(log[1][1], np.maximum(2 * X, 0) * X)
    np.testing.assert_array_equal(out.to_numpy(), expected())
    dev._graph.check()


def test_profiled_replays_are_wrapped_too(dev, stages):
    keys, log = {}, []
    toy = ToyAllReduce(dev, keys, log)
    toy.register()
    out = program(dev, keys)
    dev.SetVerbosity(2)
    dev.SetSkipIteration(1)
    for _ in range(3):
        dev.RunGraph()
    assert [e for e in log if e[0] in ("enter", "exit")] == [
        ("enter", False), ("exit", False), ("enter", True), ("exit", True),
        ("enter", True), ("exit", True)]
    assert "DistWait" in dev._graph.profiling_report()
    np.testing.assert_array_equal(out.to_numpy(), expected())


def test_a_stage_for_another_device_class_does_not_run(dev, stages):
    class OtherDevice(NumpyDevice):
        pass

    ran = []
    register_stage(GraphStage("other", "after_ordering", ran.append, devices=(OtherDevice,)))
    register_stage(GraphStage("mine", "after_memory_planning", ran.append,
                              devices=(NumpyDevice,)))
    program(dev, {})
    dev.RunGraph()
    assert ran == [dev._graph.plan]


def test_registration_errors_name_the_problem(stages):
    noop = lambda plan: None  # noqa: E731
    with pytest.raises(GraphError, match="unknown point 'before_everything'"):
        register_stage(GraphStage("x", "before_everything", noop))
    with pytest.raises(GraphError, match="fn must be callable"):
        register_stage(GraphStage("x", "after_ordering", 3))
    register_stage(GraphStage("x", "after_ordering", noop))
    with pytest.raises(GraphError, match="already registered"):
        register_stage(GraphStage("x", "after_ordering", noop))
    register_stage(GraphStage("x", "after_memory_planning", noop), replace=True)
    assert list(stages) == ["x"] and stages["x"].point == "after_memory_planning"


def test_around_replay_must_return_a_callable(dev, stages):
    seen = {}

    def planned(plan):
        seen.update(pool=dev.pool.current_bytes, arena=sum(n for _, n in plan.arena))

    register_stage(GraphStage("spy", "after_memory_planning", planned))
    register_stage(GraphStage("bad", "around_replay", lambda plan, replay, profiled: None))
    program(dev, {})
    with pytest.raises(GraphError, match="'bad' .*returned NoneType"):
        dev.RunGraph()
    assert dev._graph.plan is None and seen["arena"] > 0
    assert dev.pool.current_bytes == seen["pool"] - seen["arena"]  # the arena went back


def test_check_plan_rejects_a_read_before_the_write(dev, stages):
    keys = {}

    def early_reader(plan):
        k = keys["g"]
        blk = plan.blocks[k]
        w = next(p for p, n in enumerate(plan.steps) if k in {id(b) for b in n.writes})
        plan.steps.insert(w, plan.new_node(lambda: None, [blk], [], "TooEarly"))

    register_stage(GraphStage("early", "after_ordering", early_reader))
    program(dev, keys)
    dev.RunGraph()
    with pytest.raises(GraphError, match="reads planned block .* before any step writes it"):
        dev._graph.check()


def test_check_plan_rejects_live_blocks_sharing_memory(dev, stages):
    keys = {}

    def overlap(plan):
        k, j = keys["g"], keys["u"]
        assert plan.first[j] <= plan.last[k] and plan.first[k] <= plan.last[j]
        plan.placement[j] = plan.placement[k]

    register_stage(GraphStage("overlap", "after_memory_planning", overlap))
    program(dev, keys)
    dev.RunGraph(serial=True)  # u is written before g is last read: both alive at once
    with pytest.raises(GraphError, match="share arena memory"):
        dev._graph.check()


def test_public_names_stay_where_users_and_backends_import_them():
    import singa.backend
    import singa.graph
    import singa.scheduler

    assert singa.scheduler.Graph is singa.graph.Graph
    assert singa.scheduler.BlockType is singa.graph.BlockType
    assert singa.backend.register_stage is register_stage
    assert singa.backend.GraphStage is GraphStage and singa.backend.check_plan is check_plan


def test_what_a_stage_made_for_a_plan_is_freed_before_its_arena(dev, stages):
    released = []

    def capture(plan, replay, profiled):
        # e.g. a captured CUDA graph pointing into the arena: freed while the arena exists
        plan.on_release.append(lambda: released.append(
            (bool(plan.arena), bool(plan.placement), dev.pool.current_bytes)))
        return replay

    register_stage(GraphStage("capture", "around_replay", capture))
    program(dev, {})
    dev.RunGraph()
    dev.RunGraph()
    assert released == []
    with_arena = dev.pool.current_bytes
    arena = sum(n for _, n in dev._graph.plan.arena)
    dev.ResetGraph()
    assert released == [(True, True, with_arena)]
    assert arena > 0 and dev.pool.current_bytes <= with_arena - arena  # arena returned after
    dev.ResetGraph()
    assert len(released) == 1  # once per plan


# ---------------------------------------------------------------------- kernels bound to a plan
def _with_bind(dev, name, bind):
    """``dev``'s kernel for ``name`` with a ``bind`` attribute (a fresh function object)."""
    fn, contig, dtypes = dev.kernels[name]

    def kernel(ins, outs, attrs):
        fn(ins, outs, attrs)

    kernel.bind = bind
    dev.kernels[name] = (kernel, contig, dtypes)
    return kernel


def test_a_bound_kernel_replaces_the_general_one_in_every_replay(dev, stages):
    """bind is called once per plan with the natives every replay passes; the replays run
    what it returned, on new input values each time."""
    binds, runs = [], []

    def bind(ins, outs, attrs):
        binds.append((ins, outs))
        x, out = ins[0], outs[0]

        def bound(i, o, a):
            assert i is ins and o is outs  # the very lists (and arrays) it was bound to
            runs.append(1)
            np.negative(x, out=out)

        return bound

    general = _with_bind(dev, "Neg", bind)
    x = tensor(dev, X)
    y = record(dev, lambda: op("Neg", x))
    for k in range(3):
        x.copy_from_numpy(X * (k + 1))
        dev.RunGraph()
        np.testing.assert_array_equal(y.to_numpy(), -X * (k + 1))
    assert len(binds) == 1 and len(runs) == 3
    (call,) = dev._graph.plan.calls
    assert call[0] is not general and call[0].__name__ == "bound"
    assert binds[0][0] is call[1] and binds[0][1] is call[2]


def test_bind_may_decline_and_must_return_a_kernel(dev, stages):
    general = _with_bind(dev, "Neg", lambda ins, outs, attrs: None)
    x = tensor(dev, X)
    y = record(dev, lambda: op("Neg", x))
    dev.RunGraph()
    np.testing.assert_array_equal(y.to_numpy(), -X)
    assert [c[0] for c in dev._graph.plan.calls] == [general]

    _with_bind(dev, "Mul", lambda ins, outs, attrs: "not a kernel")
    record(dev, lambda: op("Mul", x, x))
    pool = dev.pool.current_bytes
    with pytest.raises(GraphError, match="Mul kernel's bind returned str"):
        dev.RunGraph()
    assert dev.pool.current_bytes <= pool  # the plan's arena went back
