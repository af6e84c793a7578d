"""``Device.export_chrome_trace`` on a graph-mode Model: a trace whose events are the graph's
ops, and a clear refusal when no iteration was profiled (the trace would be empty)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _shared_models import Tiny
from singa import opt, tensor
from singa.errors import GraphError


def _train_graph(cpu, steps, verbosity=1, skip=None):
    m = Tiny()
    x = tensor.from_numpy(np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    y = tensor.from_numpy(np.array([0, 2], np.int32))
    m.set_optimizer(opt.SGD(lr=0.1, momentum=0.9))
    m.compile([x], is_train=True, use_graph=True)
    cpu.SetVerbosity(verbosity)
    if skip is not None:
        cpu.SetSkipIteration(skip)
    try:
        for _ in range(steps):
            m(x, y)
    finally:
        verbosity_now, skip_now = cpu.verbosity(), cpu.skip_iteration()
        cpu.SetVerbosity(0)
        cpu.SetSkipIteration(5)
    return m, verbosity_now, skip_now


def test_trace_events_name_the_graph_ops(cpu, tmp_path):
    _, v, k = _train_graph(cpu, steps=4, verbosity=2, skip=1)
    cpu.SetVerbosity(v)
    cpu.SetSkipIteration(k)
    path = tmp_path / "trace.json"
    try:
        cpu.export_chrome_trace(str(path))
    finally:
        cpu.SetVerbosity(0)
        cpu.SetSkipIteration(5)
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    assert doc["otherData"]["iterations"] == 3  # 4 runs, the first skipped
    assert {e["args"]["iteration"] for e in events} == {1, 2, 3}
    names = {e["name"] for e in events}
    # forward matmul, the loss, and the backward of the matmul are all graph nodes
    assert any("Mult" in n or "GEMM" in n.upper() or "Matmul" in n for n in names), names
    assert any("Backward" in n for n in names), names
    assert all(e["ph"] == "X" and e["dur"] >= 0 for e in events)


@pytest.mark.parametrize("steps", [1, 5])
def test_too_few_iterations_refused_with_the_count_and_the_fix(cpu, tmp_path, steps):
    _, v, k = _train_graph(cpu, steps=steps, verbosity=1)
    cpu.SetVerbosity(v)
    cpu.SetSkipIteration(k)
    path = tmp_path / "trace.json"
    try:
        with pytest.raises(GraphError) as info:
            cpu.export_chrome_trace(str(path))
    finally:
        cpu.SetVerbosity(0)
        cpu.SetSkipIteration(5)
    msg = str(info.value)
    assert "0 profiled iterations" in msg
    assert f"ran {steps} iteration" in msg and "first 5 are skipped" in msg
    assert "SetSkipIteration" in msg and f"n < {steps}" in msg
    assert not path.exists()


def test_profiling_off_refused(cpu, tmp_path):
    _train_graph(cpu, steps=7, verbosity=0)
    with pytest.raises(GraphError, match=r"profiling is off.*SetVerbosity\(1\)"):
        cpu.export_chrome_trace(str(tmp_path / "trace.json"))
