"""benchmarks/_profile.py: a graph's per-node times summed by op, or by op and operand shapes;
both groupings of one replay's node times add up to the same total per op."""

from __future__ import annotations

import collections

import _bench_scripts
import pytest


@pytest.fixture(scope="module")
def profiled():
    """The MLP of train_step.py at batch 8 in graph mode, its replays profiled."""
    from singa import device

    ts = _bench_scripts.load("train_step")
    step = ts.singa_trainer("mlp", True, "cpu", 8)
    for _ in range(2):
        step()
    dev = device.get_device("cpu")
    ts.graph_profile(dev, step, runs=2)  # leaves the last replays' node times
    import _profile

    return _profile, dev._last_run_graph


def test_by_shape_rows_add_up_to_the_by_op_rows(profiled):
    prof, graph = profiled
    by_op = {k: (ms, n) for k, ms, n in prof.node_times(graph)}
    by_shape = prof.node_times(graph, shapes=True)
    summed = collections.defaultdict(lambda: [0.0, 0])
    for key, ms, n in by_shape:
        op = key.split(" ", 1)[0]
        summed[op][0] += ms
        summed[op][1] += n
    assert set(summed) == set(by_op)
    for op, (ms, n) in by_op.items():
        assert summed[op][1] == n
        assert summed[op][0] == pytest.approx(ms, rel=1e-12)
    assert [r[1] for r in by_shape] == sorted((r[1] for r in by_shape), reverse=True)


def test_a_product_row_names_its_operands(profiled):
    prof, graph = profiled
    keys = [k for k, _ms, _n in prof.node_times(graph, shapes=True)]
    assert "Matmul (8, 784),(784, 512) -> (8, 512)" in keys, keys
