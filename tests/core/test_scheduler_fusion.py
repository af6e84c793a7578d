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
from singa.ops import FUSIONS, OPS, FusionDef, run
from test_scheduler_memory import NumpyDevice, _Alloc, _SubAlloc, op, record, tensor

calls = []


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
    return [n.name for n in dev._graph.steps]


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
    assert keys["t"] not in g.planned and keys["t"] not in g.placement
    assert g.blocks[keys["t"]].data is None  # the intermediate never gets memory
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


def test_the_fusions_of_the_op_table_are_well_formed():
    for name, fd in FUSIONS.items():
        assert name == f"{fd.first}+{fd.second}"
        assert fd.first in OPS and fd.second in OPS
        assert 0 <= fd.link < OPS[fd.second].nin
