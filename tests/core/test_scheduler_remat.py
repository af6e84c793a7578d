"""Rematerialisation in graph mode: dropped intermediates recomputed exactly, only where the
planned peak goes down, never for blocks Python holds, for random ops or for state.

Ops run through the real op table on the numpy device of ``test_scheduler_memory``. Oracles:
eager execution of the same program (bitwise equal values, running state included) and the
planner's own live-bytes measure.
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import _dtype
from singa._ctensor import CTensor
from singa.ops import OPS, run
from test_scheduler_memory import (
    KERNELS,
    NumpyDevice,
    _Alloc,
    _max_live,
    _seq,
    _SubAlloc,
    op,
    record,
    tensor,
)

N = 1000  # elements of the large blocks (8000 bytes in float64)


def _bn_train(ins, outs, attrs):
    res = OPS["BatchNormTrain"].reference(*ins, **attrs)  # reads everything before writing
    for o, r in zip(outs, res):
        o[...] = r


class BNDevice(NumpyDevice):
    def __init__(self, allocator):
        super().__init__(allocator)
        self.kernels = dict(KERNELS, BatchNormTrain=(_bn_train, False, None))


@pytest.fixture(params=["slots", "offsets"])
def dev(request):
    return BNDevice(_Alloc() if request.param == "slots" else _SubAlloc())


@pytest.fixture
def recompute_off(monkeypatch):
    monkeypatch.setenv("SINGA_GRAPH_RECOMPUTE", "0")


def _long_lived_program(dev, hold=False):
    """t = -x is read at once and again at the end; in between a and b are alive with it."""
    x = tensor(dev, np.linspace(-1, 1, N))
    acc = tensor(dev, [0.0] * N)
    keys = {}

    def body():
        t = op("Neg", x)
        a = op("Add", t, x)        # t's early use
        b = op("Mul", a, x)        # peak: t, a, b
        c = op("Add", a, b)
        d = op("Add", c, t)        # t's late use
        run(OPS["Add"], [acc, d], outs=[acc])
        keys.update(t=id(t.block))
        return t if hold else None

    held = record(dev, body)
    return x, acc, keys, held


def _eager_acc(runs):
    x = np.linspace(-1, 1, N)
    t = -x
    a = t + x
    return runs * ((a + a * x) + t)


def test_a_long_lived_elementwise_output_is_dropped_and_recomputed(dev):
    _x, acc, keys, _ = _long_lived_program(dev)
    dev.RunGraph()
    g = dev._graph
    assert [d.block for d in g.plan.remat_drops] == [keys["t"]]
    remats = [n for n in g.plan.steps if n.remat]
    assert [n.name for n in remats] == ["Neg"]
    assert _max_live(g, g.plan.steps, g.plan.planned) == 2 * N * 8  # was 3 blocks at Mul
    recorded = set(g.recording.blocks) & g.plan.planned
    assert _max_live(g, _seq(g, g.plan.order), recorded) == 3 * N * 8
    dev.RunGraph()
    np.testing.assert_array_equal(acc.to_numpy(), _eager_acc(2))


def test_switch_off_keeps_every_intermediate(dev, recompute_off):
    _x, acc, _keys, _ = _long_lived_program(dev)
    dev.RunGraph()
    g = dev._graph
    assert g.plan.remat_drops == [] and not any(n.remat for n in g.plan.steps)
    assert _max_live(g, g.plan.steps, g.plan.planned) == 3 * N * 8
    np.testing.assert_array_equal(acc.to_numpy(), _eager_acc(1))


def test_a_block_python_holds_is_never_dropped(dev):
    _x, acc, keys, t = _long_lived_program(dev, hold=True)
    dev.RunGraph()
    g = dev._graph
    assert keys["t"] not in g.plan.planned and g.plan.remat_drops == []
    np.testing.assert_array_equal(t.to_numpy(), -np.linspace(-1, 1, N))
    np.testing.assert_array_equal(acc.to_numpy(), _eager_acc(1))


def test_a_block_written_twice_is_not_recomputed(dev):
    x = tensor(dev, np.linspace(-1, 1, N))
    acc = tensor(dev, [0.0] * N)

    def body():
        t = op("Neg", x)
        run(OPS["Add"], [t, x], outs=[t])  # second write: the first kernel alone is not t
        a = op("Add", t, x)
        b = op("Mul", a, x)
        d = op("Add", op("Add", a, b), t)
        run(OPS["Add"], [acc, d], outs=[acc])

    record(dev, body)
    dev.RunGraph()
    assert dev._graph.plan.remat_drops == []
    x_ = np.linspace(-1, 1, N)
    t = -x_ + x_
    a = t + x_
    np.testing.assert_array_equal(acc.to_numpy(), (a + a * x_) + t)


def _bn_program(dev):
    rng = np.random.default_rng(3)
    shape = (N // 10, 10)

    def param(values):
        t = CTensor._new(values.shape, dev, _dtype.kDouble)
        t.copy_from_numpy(values)
        return t

    x = param(rng.standard_normal(shape))
    x2 = param(rng.standard_normal(shape))
    scale, bias = param(rng.uniform(0.5, 2, 10)), param(rng.uniform(-1, 1, 10))
    rm, rv = param(np.zeros(10)), param(np.ones(10))
    acc = param(np.zeros(shape))

    def body():
        xc = op("Mul", x, x2)      # an intermediate, kept (read again at the end), not
        run(OPS["Add"], [xc, x], outs=[xc])  # recomputable itself (written twice)
        y = CTensor._new(shape, dev, _dtype.kDouble)
        mean, inv = (CTensor._new((10,), dev, _dtype.kDouble) for _ in range(2))
        run(OPS["BatchNormTrain"], [xc, scale, bias, rm, rv], {"momentum": 0.9, "eps": 1e-5},
            [y, mean, inv, rm, rv])
        r = op("ReLU", y)
        a = op("Mul", r, x2)       # r's early use
        b = op("Add", a, x)
        c = op("Mul", a, b)        # peak: xc, r, a, b
        d = op("Add", op("Add", c, r), xc)  # late uses of r and xc
        run(OPS["Add"], [acc, d], outs=[acc])
        run(OPS["Add"], [acc, mean], outs=[acc])

    return body, (acc, rm, rv)


def test_batchnorm_recompute_redirects_running_statistics_to_scratch(dev):
    eager_body, eager_state = _bn_program(BNDevice(_Alloc()))
    body, state = _bn_program(dev)
    record(dev, body)
    for _ in range(3):
        dev.RunGraph()
    g = dev._graph
    bn = [n for n in g.plan.steps if n.remat and n.name == "BatchNormTrain"]
    assert bn and [n.name for n in g.plan.steps if n.remat] == ["BatchNormTrain", "ReLU"]
    (orig,) = [n for n in g.recording.nodes if n.name == "BatchNormTrain"]
    for recomputed_out, out in zip(bn[0].writes, orig.writes):
        assert recomputed_out is not out  # y recomputed into a new block, the rest to scratch
    for _ in range(3):
        eager_body()
    for got, want in zip(state, eager_state):
        np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())


def test_no_random_op_is_recomputable_and_no_gemm_or_convolution():
    assert not any(o.recompute and o.random for o in OPS.values())
    for name in ("Conv2d", "Conv2dBackwardW", "GEMM", "Matmul", "Pooling2d", "Bernoulli",
                 "Gaussian", "Uniform", "BatchNormBackward"):
        if name in OPS:
            assert not OPS[name].recompute, name
    assert OPS["ReLU"].recompute and OPS["Add"].recompute
    assert OPS["BatchNormTrain"].state == ((3, 3), (4, 4))
    from singa.ops import defop

    with pytest.raises(ValueError, match="random op cannot"):
        defop("_TestRandomRecompute", 0, None, None, random=True, recompute=True)


# ---------------------------------------------------------------- the memory budget


class BudgetDevice(BNDevice):
    """A device whose graphs may keep ``budget`` bytes of intermediates before recomputing."""

    budget = 0

    def graph_memory_budget(self) -> int:
        return self.budget


@pytest.fixture(params=["slots", "offsets"])
def budget_dev(request):
    return BudgetDevice(_Alloc() if request.param == "slots" else _SubAlloc())


def test_an_arena_within_the_device_budget_is_left_as_it_is(budget_dev):
    budget_dev.budget = 3 * N * 8  # the program's peak: t, a, b
    _x, acc, _keys, _ = _long_lived_program(budget_dev)
    budget_dev.RunGraph()
    g = budget_dev._graph
    assert g.plan.remat_drops == [] and not any(n.remat for n in g.plan.steps)
    assert _max_live(g, g.plan.steps, g.plan.planned) == 3 * N * 8
    np.testing.assert_array_equal(acc.to_numpy(), _eager_acc(1))


def test_an_arena_above_the_device_budget_is_lowered(budget_dev):
    budget_dev.budget = 3 * N * 8 - 1
    _x, acc, keys, _ = _long_lived_program(budget_dev)
    budget_dev.RunGraph()
    g = budget_dev._graph
    assert [d.block for d in g.plan.remat_drops] == [keys["t"]]
    assert _max_live(g, g.plan.steps, g.plan.planned) == 2 * N * 8
    np.testing.assert_array_equal(acc.to_numpy(), _eager_acc(1))


def test_recompute_1_ignores_the_device_budget(budget_dev, monkeypatch):
    monkeypatch.setenv("SINGA_GRAPH_RECOMPUTE", "1")
    budget_dev.budget = 1 << 40
    _x, _acc, keys, _ = _long_lived_program(budget_dev)
    budget_dev.RunGraph()
    assert [d.block for d in budget_dev._graph.plan.remat_drops] == [keys["t"]]


def _two_long_lived_program(dev):
    """t = -x and u = relu(x) are read at once (3 blocks live) and again at the end; b, c and
    b + c, alive with them in between, make the peak (5 blocks)."""
    x = tensor(dev, np.linspace(-1, 1, N))
    acc = tensor(dev, [0.0] * N)

    def body():
        t = op("Neg", x)
        u = op("ReLU", x)
        b = op("Mul", op("Add", t, u), x)
        c = op("Mul", b, x)
        e = op("Mul", op("Mul", op("Add", b, c), b), c)
        run(OPS["Add"], [acc, op("Add", op("Add", e, t), u)], outs=[acc])

    record(dev, body)
    x_ = np.linspace(-1, 1, N)
    t, u = -x_, np.maximum(x_, 0)
    b = (t + u) * x_
    c = b * x_
    return acc, ((((b + c) * b) * c) + t) + u


def test_choosing_stops_at_the_first_prefix_within_the_budget(budget_dev):
    acc, want = _two_long_lived_program(budget_dev)
    budget_dev.RunGraph()
    g = budget_dev._graph
    lowest = _max_live(g, g.plan.steps, g.plan.planned)
    assert len(g.plan.remat_drops) == 2  # budget 0: as low as recomputes bring it
    np.testing.assert_array_equal(acc.to_numpy(), want)

    dev2 = BudgetDevice(type(budget_dev.pool.allocator)())
    dev2.budget = lowest + N * 8  # one recompute fewer fits
    acc2, want2 = _two_long_lived_program(dev2)
    dev2.RunGraph()
    g2 = dev2._graph
    assert len(g2.plan.remat_drops) == 1
    assert lowest < _max_live(g2, g2.plan.steps, g2.plan.planned) <= dev2.budget
    np.testing.assert_array_equal(acc2.to_numpy(), want2)


@pytest.mark.parametrize(("raw", "mode"), [
    ("auto", "auto"), (" AUTO ", "auto"), ("1", "always"), ("on", "always"), ("0", "never"),
    ("false", "never"),
])
def test_the_recompute_switch_parses(monkeypatch, raw, mode):
    from singa import config

    monkeypatch.setenv("SINGA_GRAPH_RECOMPUTE", raw)
    assert config.get("SINGA_GRAPH_RECOMPUTE") == mode


def test_the_recompute_switch_defaults_to_auto(monkeypatch):
    from singa import config

    monkeypatch.delenv("SINGA_GRAPH_RECOMPUTE", raising=False)
    assert config.get("SINGA_GRAPH_RECOMPUTE") == "auto"


def test_an_invalid_recompute_switch_names_every_choice(monkeypatch):
    from singa import config

    monkeypatch.setenv("SINGA_GRAPH_RECOMPUTE", "maybe")
    with pytest.raises(ValueError, match=r"SINGA_GRAPH_RECOMPUTE='maybe'.*expected auto, 1"):
        config.get("SINGA_GRAPH_RECOMPUTE")
