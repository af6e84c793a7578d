"""SGD's updates of a parameter as one pass over its elements in eager mode (ops.run_chain).

Oracle: the same optimizer with the device's chain compiler hidden, which runs every update as
its own op (Mul, then each Axpy) one after the other, as eager mode did before. The one pass
must give bitwise the same parameters and momentum buffers, step after step, for every SGD
variant, in float32 and float64, with NaN, infinities and -0.0 among the values (NaN
payloads aside, as for graph mode's chains).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from singa import autograd, opt, tensor
from singa.device import get_default_device
from singa.ops._fusion import run_chain
from singa.tensor import Tensor

SGD_VARIANTS = [
    {}, {"weight_decay": 0.01}, {"momentum": 0.9}, {"momentum": 0.9, "dampening": 0.3},
    {"momentum": 0.9, "weight_decay": 1e-5}, {"momentum": 0.9, "dampening": 0.3,
                                              "weight_decay": 0.02},
    {"momentum": 0.8, "nesterov": True}, {"momentum": 0.9, "weight_decay": 1e-3,
                                          "nesterov": True},
    {"momentum": opt.ExponentialDecay(0.9, 2, 0.5), "weight_decay": 1e-3},
]
DTYPES = {"float32": (np.float32, tensor.float32), "float64": (np.float64, tensor.float64)}
#: a matrix, a bias, a one-element parameter, and one of 2**20 elements (the chain splits it
#: across the cores where there are several)
SHAPES = [(33, 17), (17,), (1,), (1024, 1024)]


def _values(rng, shape, np_dt, special):
    a = (rng.standard_normal(shape) * 3).astype(np_dt)
    if special and a.size > 8:
        flat = a.reshape(-1)
        flat[rng.choice(a.size, 4, replace=False)] = np.array([-0.0, np.inf, -np.inf, np.nan],
                                                              np_dt)
    return a


def _assert_bitwise(got, want):
    """Bitwise equal, NaN payloads aside: numpy's loops and compiled code may propagate
    different NaNs (sign, payload) of the same operation, as in tests/backend/test_cpu_chains."""
    same = got.view(f"u{got.itemsize}") == want.view(f"u{want.itemsize}")
    assert (same | (np.isnan(got) & np.isnan(want))).all(), \
        f"{(~same).sum()} elements differ: {got[~same][:5]} vs {want[~same][:5]}"


def _compiles_chains() -> bool:
    """Whether the default device compiles elementwise chains (the CPU and CUDA do; a device
    without ``chain_compiler()``, OpenCL, runs run_chain's ops one by one)."""
    return get_default_device().chain_compiler() is not None


@contextlib.contextmanager
def _dispatches(monkeypatch, one_pass):
    """The names of what the default device runs inside (a list, filled as it runs); without
    ``one_pass`` its chain compiler is hidden, so every update runs as its own op."""
    dev = get_default_device()
    names = []
    with monkeypatch.context() as m:
        if not one_pass:
            m.setattr(dev, "chain_compiler", lambda: None)
        real_exec = dev.exec

        def spy(fn, reads, writes, name=""):
            names.append(name)
            return real_exec(fn, reads, writes, name)

        m.setattr(dev, "exec", spy)
        yield names


def _train(kw, np_dt, dt, steps, seed, one_pass, monkeypatch, special=False):
    """Parameters and momentum buffers after ``steps`` updates of every shape in SHAPES."""
    with _dispatches(monkeypatch, one_pass) as names:
        rng = np.random.default_rng(seed)
        sgd = opt.SGD(0.05, dtype=dt, **kw)
        params = []
        for i, shape in enumerate(SHAPES):
            p = Tensor(data=_values(rng, shape, np_dt, special), dtype=dt, requires_grad=True,
                       stores_grad=True)
            p.name = f"p{i}"
            params.append(p)
        with np.errstate(all="ignore"):
            for _ in range(steps):
                for p in params:
                    g = Tensor(data=_values(rng, p.shape, np_dt, special), dtype=dt)
                    sgd.apply(p.name, p, g)
                sgd.step()
    bufs = [sgd.state_of(p).get("moments") for p in params]
    return ([p.to_numpy() for p in params],
            [None if b is None else b.to_numpy() for b in bufs], names)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("kw", SGD_VARIANTS, ids=lambda kw: ",".join(kw) or "plain")
def test_sgd_one_pass_equals_separate_ops_bitwise(kw, dtype, monkeypatch):
    np_dt, dt = DTYPES[dtype]
    for special in (False, True):
        got_p, got_b, names = _train(kw, np_dt, dt, 3, 7, True, monkeypatch, special)
        ref_p, ref_b, ref_names = _train(kw, np_dt, dt, 3, 7, False, monkeypatch, special)
        for a, b in zip(got_p + got_b, ref_p + ref_b):
            if a is None or b is None:
                assert a is None and b is None
                continue
            assert a.dtype == b.dtype == np_dt
            _assert_bitwise(a, b)
        # the updates did run as chains, one dispatch per parameter and step (the Muls left
        # compute one-element factors such as 1 - lr wd, once per step), on a device that
        # compiles chains; elsewhere (OpenCL) as the separate ops
        chains = [n for n in names if n.startswith("Elementwise[")]
        if _compiles_chains():
            assert len(chains) == 3 * len(SHAPES)
            assert "Axpy" not in names and "Axpy" in ref_names
        else:
            assert names == ref_names and not chains
        assert not [n for n in ref_names if n.startswith("Elementwise[")]


def test_run_chain_records_the_ops_while_a_graph_records(monkeypatch):
    """A graph being recorded gets the separate ops (its fusion stage chains them), so graph
    plans do not change."""
    dev = get_default_device()
    buf = Tensor(data=np.ones(8, np.float32)).data
    g = Tensor(data=np.full(8, 2.0, np.float32)).data
    half = Tensor(data=np.array([0.5], np.float32)).data
    names = []
    with monkeypatch.context() as m:
        real_exec = dev.exec

        def spy(fn, reads, writes, name=""):
            names.append(name)
            return real_exec(fn, reads, writes, name)

        m.setattr(dev, "exec", spy)
        calls = [("Mul", (buf, half), buf), ("Axpy", (half, g, buf), buf)]
        run_chain(calls)
        assert names == (["Elementwise[Mul,Axpy]"] if _compiles_chains() else ["Mul", "Axpy"])
        np.testing.assert_array_equal(buf.to_numpy(), np.full(8, 1.5, np.float32))
        names.clear()
        dev.EnableGraph(True)
        try:
            run_chain(calls)
        finally:
            dev.EnableGraph(False)
            dev.ResetGraph()
        assert names == ["Mul", "Axpy"]


@pytest.mark.parametrize("case", ["strided", "float16", "scalar_view", "shape"])
def test_run_chain_declines_what_a_chain_cannot_take(case, monkeypatch):
    """Operands a chain does not take (a strided view, float16, a one-element view of an
    array the chain writes, arrays of two shapes) run as separate ops, with their results."""
    from singa import _math

    rng = np.random.default_rng(3)
    np_dt = np.float16 if case == "float16" else np.float32
    dt = tensor.float16 if case == "float16" else tensor.float32
    y0 = rng.standard_normal((6, 4)).astype(np_dt)
    x0 = rng.standard_normal((4, 6) if case == "strided" else (6, 4)).astype(np_dt)
    z0 = rng.standard_normal(24).astype(np_dt)

    def run(one_pass):
        with _dispatches(monkeypatch, one_pass) as names:
            y = Tensor(data=y0, dtype=dt).data
            x = Tensor(data=x0, dtype=dt).data
            z = Tensor(data=z0, dtype=dt).data
            a = Tensor(data=np.array([0.25], np_dt), dtype=dt).data
            if case == "strided":
                x = _math.transpose(x)
            if case == "scalar_view":  # y[0, 0], read as a scalar while y is written
                a = _math.slice_view(_math.reshape(y, (24,)), (0,), (1,))
                assert a.block is y.block
            calls = [("Mul", (y, a), y), ("Axpy", (a, x, y), y)]
            if case == "shape":
                calls.append(("Mul", (z, a), z))
            run_chain(calls)
            return y.to_numpy(), z.to_numpy(), names

    got_y, got_z, names = run(True)
    ref_y, ref_z, _ = run(False)
    np.testing.assert_array_equal(got_y, ref_y)
    np.testing.assert_array_equal(got_z, ref_z)
    assert not [n for n in names if n.startswith("Elementwise[")]


def test_eager_mlp_training_matches_separate_ops_bitwise(monkeypatch):
    """A few eager training steps of a small MLP (SGD with momentum and weight decay) give
    bitwise the parameters that the separate ops give."""
    from singa import device, layer, model

    class MLP(model.Model):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = layer.Linear(16), layer.Linear(3)

        def forward(self, x):
            return self.l2(autograd.relu(self.l1(x)))

        def train_one_batch(self, x, y):
            out = self.forward(x)
            loss = autograd.softmax_cross_entropy(out, y)
            self.optimizer(loss)
            return out, loss

    rng = np.random.default_rng(0)
    xs = rng.standard_normal((8, 10)).astype(np.float32)
    ys = rng.integers(0, 3, 8).astype(np.int32)

    def train(one_pass):
        dev = get_default_device()
        with monkeypatch.context() as m:
            if not one_pass:
                m.setattr(dev, "chain_compiler", lambda: None)
            device.get_default_device().SetRandSeed(5)
            net = MLP()
            net.set_optimizer(opt.SGD(0.05, momentum=0.9, weight_decay=1e-5))
            tx = Tensor(data=xs)
            ty = Tensor(data=ys, dtype=tensor.int32)
            net.compile([tx], is_train=True, use_graph=False, sequential=False)
            for _ in range(4):
                net(tx, ty)
            return [v.to_numpy() for v in net.get_params().values()]

    for a, b in zip(train(True), train(False)):
        np.testing.assert_array_equal(a, b)


def test_chains_of_the_same_ops_on_other_operands_compile_apart(monkeypatch):
    """The compiled chain is looked up by its operand pattern: the same ops reading other
    operands (or one scalar for two) run their own chain, each bitwise its separate ops."""
    dev = get_default_device()
    rng = np.random.default_rng(11)
    x0, y0 = (rng.standard_normal(40).astype(np.float32) for _ in range(2))

    def patterns(x, y, a, b):
        return [[("Axpy", (a, x, y), y), ("Axpy", (b, y, x), x)],
                [("Axpy", (a, x, y), y), ("Axpy", (b, x, y), y)],
                [("Axpy", (a, x, y), y), ("Axpy", (a, y, x), x)],
                [("Axpy", (a, y, x), x), ("Axpy", (b, x, y), y)]]

    def run(k, one_pass):
        with monkeypatch.context() as m:
            if not one_pass:
                m.setattr(dev, "chain_compiler", lambda: None)
            x = Tensor(data=x0).data
            y = Tensor(data=y0).data
            a = Tensor(data=np.array([0.5], np.float32)).data
            b = Tensor(data=np.array([-1.75], np.float32)).data
            run_chain(patterns(x, y, a, b)[k])
            return x.to_numpy(), y.to_numpy()

    for k in range(4):
        for got, want in zip(run(k, True), run(k, False)):
            _assert_bitwise(got, want)
