"""Graph-mode fusion: two recorded ops run as one fused kernel when that is safe.

A test fusion ``Add+ReLU`` is registered (in ``singa.ops.FUSIONS`` and the numpy device's
kernel table) for the duration of each test. Oracles: the unfused program's values (eager
execution of the same ops) and the plan itself (which nodes ran, which blocks got memory).
The conv/pool fusions of the CPU backend are checked against the device's own unfused kernels
in tests/backend (kernels) and tests/nn/test_graph_equivalence.py (training).
"""

from __future__ import annotations

import numpy as np
import pytest
from singa import _dtype
from singa._ctensor import CTensor
from singa.ops import FUSIONS, OPS, FusionDef, run
from test_scheduler_memory import NumpyDevice, _Alloc, _SubAlloc, op, record, tensor

calls = []
#: the op table's own declaration (the fixture below swaps in a bare one for most tests)
DECLARED = FUSIONS["Add+ReLU"]


def _add_relu(ins, outs, attrs):
    calls.append("Add+ReLU")
    np.maximum(np.add(ins[0], ins[1]), 0, out=outs[0])


@pytest.fixture(params=["slots", "offsets"])
def dev(request, monkeypatch):
    monkeypatch.setitem(FUSIONS, "Add+ReLU", FusionDef("Add+ReLU", "Add", "ReLU", 0))
    d = NumpyDevice(_Alloc() if request.param == "slots" else _SubAlloc())
    d.kernels["Add+ReLU"] = (_add_relu, False, None)
    calls.clear()
    return d


def names(dev):
    return [n.name for n in dev._graph.plan.steps]


def test_an_op_and_the_one_reader_of_its_output_run_as_one_kernel(dev):
    x = tensor(dev, [-3.0, -1.0, 0.5, 2.0])
    y = tensor(dev, [1.0, -1.0, 1.0, -1.0])
    keys = {}

    def body():
        t = op("Add", x, y)  # read by the ReLU only: never written once fused
        r = op("ReLU", t)
        keys["t"] = id(t.block)
        return op("Neg", r)

    out = record(dev, body)
    for _ in range(2):
        dev.RunGraph()
    g = dev._graph
    assert names(dev) == ["Add+ReLU", "Neg"] and calls == ["Add+ReLU"] * 2
    assert keys["t"] not in g.plan.planned and keys["t"] not in g.plan.placement
    assert g.recording.blocks[keys["t"]].data is None  # the intermediate never gets memory
    np.testing.assert_array_equal(out.to_numpy(), -np.maximum(x.to_numpy() + y.to_numpy(), 0))


def body_with(x, y, extra):
    t = op("Add", x, y)
    r = op("ReLU", t)
    return extra(t, r)


@pytest.mark.parametrize("why", ["second reader", "python holds it", "fusion off",
                                 "no kernel"])
def test_no_fusion_when_unsafe_or_unavailable(dev, why, monkeypatch):
    x = tensor(dev, [-3.0, -1.0, 0.5, 2.0])
    y = tensor(dev, [1.0, -1.0, 1.0, -1.0])
    if why == "fusion off":
        monkeypatch.setenv("SINGA_GRAPH_FUSE", "0")
    if why == "no kernel":
        del dev.kernels["Add+ReLU"]
    if why == "second reader":
        out = record(dev, lambda: body_with(x, y, lambda t, r: op("Mul", r, t)))
        want = np.maximum(x.to_numpy() + y.to_numpy(), 0) * (x.to_numpy() + y.to_numpy())
    elif why == "python holds it":
        held, out = record(dev, lambda: body_with(x, y, lambda t, r: (t, op("Neg", r))))
        want = -np.maximum(x.to_numpy() + y.to_numpy(), 0)
    else:
        out = record(dev, lambda: body_with(x, y, lambda t, r: op("Neg", r)))
        want = -np.maximum(x.to_numpy() + y.to_numpy(), 0)
    dev.RunGraph()
    assert "Add+ReLU" not in names(dev) and not calls
    assert {"Add", "ReLU"} <= set(names(dev))
    np.testing.assert_array_equal(out.to_numpy(), want)
    if why == "python holds it":
        np.testing.assert_array_equal(held.to_numpy(), x.to_numpy() + y.to_numpy())


def test_no_fusion_across_a_write_to_the_first_ops_input(dev):
    """Add reads x; Neg then overwrites x in place; the ReLU of Add's output comes after. The
    fused node would run at the ReLU's place and read the overwritten x: not fused."""
    x = tensor(dev, [-3.0, -1.0, 0.5, 2.0])
    y = tensor(dev, [1.0, -1.0, 1.0, -1.0])
    x0 = x.to_numpy()

    def body():
        t = op("Add", x, y)
        run(OPS["Neg"], [x], outs=[x])  # x = -x, after Add has read it
        return op("ReLU", t)

    out = record(dev, body)
    dev.RunGraph(serial=True)  # insertion order: Add, Neg, ReLU
    assert names(dev) == ["Add", "Neg", "ReLU"] and not calls
    np.testing.assert_array_equal(out.to_numpy(), np.maximum(x0 + y.to_numpy(), 0))
    np.testing.assert_array_equal(x.to_numpy(), -x0)


def _add_relu_neg(ins, outs, attrs):
    calls.append("Add+ReLU+Neg")
    np.maximum(np.add(ins[0], ins[1]), 0, out=outs[0])
    np.negative(outs[0], out=outs[1])


def test_a_fused_node_fuses_again_and_keeps_an_output_read_later(dev, monkeypatch):
    """Add+ReLU, then its Neg (keep: the ReLU's output is read again later), as one kernel."""
    monkeypatch.setitem(FUSIONS, "Add+ReLU+Neg",
                        FusionDef("Add+ReLU+Neg", "Add+ReLU", "Neg", 0, keep=True))
    dev.kernels["Add+ReLU+Neg"] = (_add_relu_neg, False, None)
    x = tensor(dev, [-3.0, -1.0, 0.5, 2.0])
    y = tensor(dev, [1.0, -1.0, 1.0, -1.0])

    def body():
        r = op("ReLU", op("Add", x, y))
        n = op("Neg", r)      # first reader of r: fused
        return op("Mul", n, r)  # a later reader of r: r is kept

    out = record(dev, body)
    dev.RunGraph(serial=True)
    assert names(dev) == ["Add+ReLU+Neg", "Mul"] and calls == ["Add+ReLU+Neg"]
    r = np.maximum(x.to_numpy() + y.to_numpy(), 0)
    np.testing.assert_array_equal(out.to_numpy(), -r * r)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _sigmoid_mul(ins, outs, attrs):
    calls.append(("Sigmoid+Mul", [a.shape for a in ins]))
    np.multiply(ins[1], _sigmoid(ins[0]), out=outs[0])


def _array(dev, values):
    values = np.asarray(values, np.float64)
    t = CTensor._new(values.shape, dev, _dtype.kDouble)
    t.copy_from_numpy(values)
    return t


@pytest.mark.parametrize("commutes", [True, False])
@pytest.mark.parametrize("order", ["x * gate", "gate * x"])
def test_a_symmetric_second_op_fuses_with_either_operand(dev, monkeypatch, order, commutes):
    """Sigmoid+Mul declared with ``commutes``: a (2, 1) gate times a (2, 3) map fuses whether
    the sigmoid's output is Mul's second operand (``link``) or its first; the fused kernel
    gets the same inputs both ways (the sigmoid's input, then the map). Without
    ``commutes`` only ``link`` fuses."""
    monkeypatch.setitem(FUSIONS, "Sigmoid+Mul", FusionDef(
        "Sigmoid+Mul", "Sigmoid", "Mul", 1, commutes=commutes))
    dev.kernels["Sigmoid"] = (lambda ins, outs, attrs: np.copyto(outs[0], _sigmoid(ins[0])),
                              False, None)
    dev.kernels["Sigmoid+Mul"] = (_sigmoid_mul, False, None)
    s = _array(dev, [[-1.0], [2.0]])
    x = _array(dev, [[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])

    def body():
        gate = op("Sigmoid", s)
        return op("Mul", x, gate) if order == "x * gate" else op("Mul", gate, x)

    out = record(dev, body)
    dev.RunGraph()
    fused = commutes or order == "x * gate"
    assert names(dev) == (["Sigmoid+Mul"] if fused else ["Sigmoid", "Mul"])
    assert calls == ([("Sigmoid+Mul", [(2, 1), (2, 3)])] if fused else [])
    np.testing.assert_allclose(out.to_numpy(), x.to_numpy() * _sigmoid(s.to_numpy()),
                               rtol=1e-15)


def test_the_fusions_of_the_op_table_are_well_formed():
    for name, fd in FUSIONS.items():
        assert name == f"{fd.first}+{fd.second}"
        assert (fd.first in OPS or fd.first in FUSIONS) and fd.second in OPS
        assert fd.base in OPS and 0 <= fd.link < OPS[fd.second].nin


# ------------------------------------------------------------------ elementwise chains
class PyChains:
    """A chain compiler for the numpy device: runs the chain element by element in Python,
    recording what it compiled."""

    FORMULAS = {"Add": lambda a, b: a + b, "Mul": lambda a, b: a * b,
                "Axpy": lambda a, x, y: y + x * a}
    ops = frozenset(FORMULAS)
    dtypes = frozenset({_dtype.kDouble})

    def __init__(self):
        self.compiled = []

    def compile(self, chain):
        self.compiled.append(chain)

        def kernel(ins, outs, attrs):
            flat = [a.reshape(-1) for a in ins]
            n = max(a.size for a in flat)
            for i in range(n):
                for st in chain.steps:
                    vals = [flat[k][0] if chain.scalar[k] else flat[k][i] for k in st.ins]
                    flat[st.out][i] = self.FORMULAS[st.op](*vals)

        return kernel


def chain_device(chains: bool):
    """The numpy device with an Axpy kernel and, if ``chains``, the Python chain compiler."""
    d = NumpyDevice(_SubAlloc())
    d.kernels["Axpy"] = (lambda ins, outs, attrs: np.add(ins[2], ins[1] * ins[0].reshape(()),
                                                        out=outs[0]), False, None)
    if chains:
        d.chains = PyChains()
        d.chain_compiler = lambda: d.chains
    return d


@pytest.fixture
def cdev():
    return chain_device(True)


def axpy(a, x, y):
    run(OPS["Axpy"], [a, x, y], outs=[y])


def sgd_program(dev, reader=False):
    """Momentum SGD on two parameters of different sizes: buf *= mom; buf += g;
    p += -lr * buf; ``reader``: a node reading b1 (updated) sits before p1's update."""
    rng = np.random.default_rng(3)
    state = {name: tensor(dev, rng.standard_normal(n)) for name, n in
             (("p1", 6), ("b1", 6), ("p2", 3), ("b2", 3))}
    mom, neg_lr = tensor(dev, [0.9]), tensor(dev, [-0.1])
    x = tensor(dev, rng.standard_normal(6))
    seen = {}

    def body():
        g1 = op("Mul", x, x)  # gradients computed in the graph
        g2 = op("Add", state["p2"], state["p2"])
        run(OPS["Mul"], [state["b1"], mom], outs=[state["b1"]])
        run(OPS["Mul"], [state["b2"], mom], outs=[state["b2"]])
        axpy(tensor(dev, [1.0]), g1, state["b1"])
        if reader:  # reads b1 between its update and p1's; ReLU is no chain op
            seen["b1"] = op("ReLU", state["b1"])
        axpy(neg_lr, state["b1"], state["p1"])
        axpy(tensor(dev, [1.0]), g2, state["b2"])
        axpy(neg_lr, state["b2"], state["p2"])

    return state, body, seen


def test_an_optimizers_updates_run_as_one_chain_per_parameter(cdev):
    want_state, want_body, _ = sgd_program(chain_device(False))
    for _ in range(2):  # the same ops, eagerly, on a device without chains
        want_body()
    state, body, _ = sgd_program(cdev)
    record(cdev, body)
    for _ in range(2):
        cdev.RunGraph()
    for k in state:
        np.testing.assert_array_equal(state[k].to_numpy(), want_state[k].to_numpy(), err_msg=k)
    chains = [[s.op for s in c.steps] for c in cdev.chains.compiled]
    assert chains == [["Mul", "Axpy", "Axpy"]] * 2
    assert sum(n.startswith("Elementwise[") for n in names(cdev)) == 2
    # the gradients' ops write planned intermediates: they stay out (in-place reuse and
    # rematerialisation decide per op on those)
    assert names(cdev).count("Mul") == 1 and names(cdev).count("Add") == 1
    for c in cdev.chains.compiled:  # b, mom, one, g, neg_lr, p: scalars mom, one, neg_lr
        assert len(c.scalar) == 6 and sum(c.scalar) == 3


def test_a_chain_never_moves_past_a_node_that_reads_what_it_writes(cdev):
    want_state, want_body, want_seen = sgd_program(chain_device(False), reader=True)
    want_body()
    state, body, seen = sgd_program(cdev, reader=True)
    record(cdev, body)
    cdev.RunGraph(serial=True)
    np.testing.assert_array_equal(seen["b1"].to_numpy(), want_seen["b1"].to_numpy())
    for k in state:
        np.testing.assert_array_equal(state[k].to_numpy(), want_state[k].to_numpy(), err_msg=k)
    steps = names(cdev)
    # b1's updates run as a chain before the reader of b1, and p1's update after it, alone
    first = steps.index("Elementwise[Mul,Axpy]")
    assert steps.index("ReLU", first) < steps.index("Axpy", first)
    assert "Elementwise[Mul,Axpy,Axpy]" in steps  # the second parameter's chain


def test_no_chains_without_a_compiler_or_with_fusion_off(cdev, monkeypatch):
    monkeypatch.setenv("SINGA_GRAPH_FUSE", "0")
    state, body, _ = sgd_program(cdev)
    record(cdev, body)
    cdev.RunGraph()
    assert not cdev.chains.compiled
    assert not any(n.startswith("Elementwise[") for n in names(cdev))


def test_a_chain_never_reads_as_a_scalar_what_it_writes(cdev):
    """``b += g`` then ``b *= b[0]`` (one element of b, broadcast): a chain reads broadcast
    scalars once, before its loop, so the second op must not join the first one's chain."""
    def program(dev):
        rng = np.random.default_rng(5)
        b = tensor(dev, rng.standard_normal(5))
        p = tensor(dev, rng.standard_normal(5))
        g = tensor(dev, rng.standard_normal(5))
        one = tensor(dev, [1.0])

        def body():
            axpy(one, g, b)                                   # writes b
            run(OPS["Mul"], [p, b._view_as((1,), (1,), 0)], outs=[p])  # reads b[0]
            run(OPS["Mul"], [b, b._view_as((1,), (1,), 0)], outs=[b])  # reads and writes b[0]

        return b, p, body

    want_b, want_p, want_body = program(chain_device(False))
    want_body()
    b, p, body = program(cdev)
    record(cdev, body)
    cdev.RunGraph(serial=True)
    np.testing.assert_array_equal(p.to_numpy(), want_p.to_numpy())
    np.testing.assert_array_equal(b.to_numpy(), want_b.to_numpy())
    assert not any(n.startswith("Elementwise[") for n in names(cdev)), names(cdev)


def _add_neg(ins, outs, attrs):
    calls.append("Add+Neg")
    np.add(ins[0], ins[1], out=outs[0])
    np.negative(outs[0], out=outs[1])


def test_a_kept_output_fuses_with_its_first_reader_after_its_writer(dev, monkeypatch):
    """A parameter read before an op overwrites it: the fusion (with ``keep``) is with the
    first reader after the write, never with the earlier one."""
    monkeypatch.setitem(FUSIONS, "Add+Neg", FusionDef("Add+Neg", "Add", "Neg", 0, keep=True))
    dev.kernels["Add+Neg"] = (_add_neg, False, None)
    x = tensor(dev, [-3.0, -1.0, 0.5, 2.0])
    y = tensor(dev, [1.0, -1.0, 1.0, -1.0])
    w = tensor(dev, [5.0, 6.0, 7.0, 8.0])
    w0 = w.to_numpy()

    def body():
        before = op("Neg", w)                  # reads w's old value
        run(OPS["Add"], [x, y], outs=[w])      # overwrites w
        return before, op("Neg", w)            # reads the new value: fused with the Add

    before, after = record(dev, body)
    dev.RunGraph(serial=True)
    assert names(dev) == ["Neg", "Add+Neg"] and calls == ["Add+Neg"]
    np.testing.assert_array_equal(before.to_numpy(), -w0)
    np.testing.assert_array_equal(after.to_numpy(), -(x.to_numpy() + y.to_numpy()))


def test_the_fused_node_keeps_its_ops_in_place_reuse_and_recompute(dev, monkeypatch):
    """The declared Add+ReLU carries Add's and ReLU's ``inplace`` and ``recompute``: its output
    takes over the memory of an input that dies at it, and rematerialisation may run it again
    (a fused node without them cost ResNet-18's training graph 4-7 MiB at batch 16)."""
    monkeypatch.setitem(FUSIONS, "Add+ReLU", DECLARED)
    assert DECLARED.inplace == OPS["Add"].inplace and DECLARED.recompute
    assert not DECLARED.random and DECLARED.state == ()
    from singa.ops import node_op

    assert node_op("Add+ReLU") is DECLARED and node_op("Add") is OPS["Add"]
    assert node_op("Nope") is None
    x = tensor(dev, [-3.0, -1.0, 0.5, 2.0])
    y = tensor(dev, [1.0, -1.0, 1.0, -1.0])
    keys = {}

    def body():
        a = op("Neg", x)  # planned, dies at the fused node
        b = op("Neg", y)
        r = op("ReLU", op("Add", a, b))
        keys.update(a=id(a.block), b=id(b.block), r=id(r.block))
        return op("Neg", r)

    out = record(dev, body)
    dev.RunGraph()
    g = dev._graph
    assert "Add+ReLU" in names(dev) and calls == ["Add+ReLU"]
    assert any(keys["r"] in m and (keys["a"] in m or keys["b"] in m)
               for m in g.plan.groups.values()), g.plan.groups
    np.testing.assert_array_equal(out.to_numpy(),
                                  -np.maximum(-x.to_numpy() - y.to_numpy(), 0))


def test_rematerialisation_reruns_the_fused_node(dev, monkeypatch):
    """A long-lived fused Add+ReLU output is dropped after its early use and rebuilt by
    running the fused node again before its late one; values equal eager execution's."""
    monkeypatch.setitem(FUSIONS, "Add+ReLU", DECLARED)
    n = 1000
    x = tensor(dev, np.linspace(-1, 1, n))
    z = tensor(dev, np.linspace(0.5, -1.5, n))
    acc = tensor(dev, [0.0] * n)
    keys = {}

    def body():
        t = op("ReLU", op("Add", x, z))  # fused; read now and again at the end
        a = op("Add", t, x)
        b = op("Mul", a, x)               # peak: t, a, b
        c = op("Add", a, b)
        d = op("Add", c, t)
        run(OPS["Add"], [acc, d], outs=[acc])
        keys.update(t=id(t.block))

    record(dev, body)
    dev.RunGraph()
    g = dev._graph
    assert [d.block for d in g.plan.remat_drops] == [keys["t"]]
    assert [m.name for m in g.plan.steps if m.remat] == ["Add+ReLU"]
    assert calls == ["Add+ReLU"] * 2
    xs, zs = np.linspace(-1, 1, n), np.linspace(0.5, -1.5, n)
    t = np.maximum(xs + zs, 0)
    a = t + xs
    np.testing.assert_array_equal(acc.to_numpy(), (a + a * xs) + t)
