"""DistOpt's modes against single-process oracles, eager and graph mode.

Rank r trains on rows [r*B, (r+1)*B) of each global batch; the oracle runs in every process
on all rows (plain, half) or simulates every rank's local step and SINGA's rule in numpy
(partial, sparse).
"""

from __future__ import annotations

import numpy as np
import pytest
from dist_helpers import (
    batches,
    buckets,
    grads_in_backward_order,
    init_values,
    make,
    step,
    values,
)
from singa import opt
from singa.errors import SingaError

B = 6
STEPS = 4


def _shard(x, comm):
    return x[comm.rank * B:(comm.rank + 1) * B]


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("mode,tol", [("backward_and_update", 1e-5),
                                      ("backward_and_update_half", 3e-3)])
@pytest.mark.parametrize("threshold", [2097152, 20])  # one fused bucket / several buckets
def test_plain_and_half_equal_one_rank_on_joined_batch(comm, dev, graph, mode, tol,
                                                        threshold):
    n = comm.world_size
    data = batches(STEPS, B * n)
    dist = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9), communicator=comm)
    net, tx, ty = make(dev, dist, B, graph)
    ref, rx, ry = make(dev, opt.SGD(lr=0.1, momentum=0.9), B * n)
    for x, y in data:
        step(net, tx, ty, _shard(x, comm), _shard(y, comm), mode, {"threshold": threshold})
        step(ref, rx, ry, x, y)
    for got, want in zip(values(net), values(ref)):
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    # every rank holds the same parameters (bitwise)
    for v in values(net):
        every = comm._allgather_object(v.tobytes())
        assert all(e == every[0] for e in every)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_overlap_is_bitwise_equal_to_sync_after_backward(comm, dev, graph):
    n = comm.world_size
    data = batches(STEPS, B * n, seed=11)
    runs = []
    for overlap in (True, False):
        dist = opt.DistOpt(opt.SGD(lr=0.1, momentum=0.9), communicator=comm, overlap=overlap)
        net, tx, ty = make(dev, dist, B, graph)
        for x, y in data:
            step(net, tx, ty, _shard(x, comm), _shard(y, comm), kw={"threshold": 20})
        runs.append(values(net))
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_partial_update_matches_numpy_simulation(comm, dev, graph):
    n, lr, threshold = comm.world_size, 0.1, 20
    data = batches(STEPS + 3, B * n, seed=5)
    dist = opt.DistOpt(opt.SGD(lr=lr), communicator=comm)
    net, tx, ty = make(dev, dist, B, graph)
    sim, sx, sy = make(dev, opt.SGD(lr=lr), B)
    local = [init_values() for _ in range(n)]  # every simulated rank's parameters
    counter = 0
    for x, y in data:
        step(net, tx, ty, _shard(x, comm), _shard(y, comm), "backward_and_partial_update",
             {"threshold": threshold})
        order = None
        for r in range(n):
            xr, yr = x[r * B:(r + 1) * B], y[r * B:(r + 1) * B]
            pairs = grads_in_backward_order(sim, sx, sy, xr, yr, local[r])
            order = [i for i, _ in pairs]
            for i, g in pairs:
                local[r][i] = local[r][i] - np.float32(lr) * g
        parts = buckets([local[0][i].size for i in order], threshold)
        counter += 1
        for j in parts[counter - 1]:
            i = order[j]
            mean = np.sum([local[r][i] for r in range(n)], 0) / np.float32(n)
            for r in range(n):
                local[r][i] = mean
        if counter == len(parts):
            counter = 0
    assert len(parts) > 1  # the test exercises the cycling
    for got, want in zip(values(net), local[comm.rank]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _sparse_rule(g, res, spars, topk):
    if res is not None:
        g = g + res
    if topk:
        keep = np.argsort(-np.abs(g), kind="stable")[:int(np.ceil(spars * g.size))]
    else:
        keep = np.flatnonzero(np.abs(g) >= spars)
    sent = np.zeros_like(g)
    sent[keep] = g[keep]
    return sent, (g - sent if res is not None else None)


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
@pytest.mark.parametrize("topk,spars", [(False, 0.02), (True, 0.1)])
@pytest.mark.parametrize("corr", [True, False])
def test_sparse_update_matches_numpy_simulation(comm, dev, graph, topk, spars, corr):
    n, lr, threshold = comm.world_size, 0.1, 20
    data = batches(STEPS, B * n, seed=9)
    dist = opt.DistOpt(opt.SGD(lr=lr), communicator=comm)
    net, tx, ty = make(dev, dist, B, graph)
    sim, sx, sy = make(dev, opt.SGD(lr=lr), B)
    vals = init_values()
    residual: dict = {}
    for x, y in data:
        step(net, tx, ty, _shard(x, comm), _shard(y, comm), "backward_and_sparse_update",
             {"threshold": threshold, "spars": spars, "topK": topk, "corr": corr})
        total = None
        for r in range(n):
            pairs = grads_in_backward_order(sim, sx, sy, x[r * B:(r + 1) * B],
                                            y[r * B:(r + 1) * B], vals)
            groups = buckets([g.size for _, g in pairs], threshold)
            sent_all = []
            for k, grp in enumerate(groups):
                flat = np.concatenate([pairs[j][1].reshape(-1) for j in grp])
                res = residual.get((r, k), np.zeros_like(flat)) if corr else None
                sent, residual[(r, k)] = _sparse_rule(flat, res, spars, topk)
                sent_all.append(sent)
            if total is None:
                total = [np.zeros_like(s) for s in sent_all]
            for t, s in zip(total, sent_all):
                t += s
        for k, grp in enumerate(groups):
            pos = 0
            for j in grp:
                i, g = pairs[j]
                part = total[k][pos:pos + g.size].reshape(g.shape) / np.float32(n)
                pos += g.size
                vals[i] = vals[i] - np.float32(lr) * part
    for got, want in zip(values(net), vals):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_no_sync_accumulates_then_syncs_the_sum(comm, dev):
    n = comm.world_size
    data = batches(4, B * n, seed=13)
    dist = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
    net, tx, ty = make(dev, dist, B)
    sim, sx, sy = make(dev, opt.SGD(lr=0.1), B * n)
    vals = init_values()
    for i in (0, 2):
        with dist.no_sync():
            x, y = data[i]
            step(net, tx, ty, _shard(x, comm), _shard(y, comm))
        x2, y2 = data[i + 1]
        step(net, tx, ty, _shard(x2, comm), _shard(y2, comm))
        # oracle: the mean gradient of each joined batch, summed over the two micro-batches
        g1 = dict(grads_in_backward_order(sim, sx, sy, *data[i], vals))
        g2 = dict(grads_in_backward_order(sim, sx, sy, x2, y2, vals))
        vals = [v - np.float32(0.1) * (g1[k] + g2[k]) for k, v in enumerate(vals)]
    for got, want in zip(values(net), vals):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_parameters_broadcast_from_rank_zero(comm, dev):
    dist = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
    net, tx, ty = make(dev, dist, B, values=init_values(seed=100 + comm.rank))
    dist.broadcast_parameters(net)
    for got, want in zip(values(net), init_values(seed=100)):
        np.testing.assert_array_equal(got, want)


def test_first_step_broadcasts_parameters(comm, dev):
    """Ranks that start different still hold identical parameters after one step."""
    dist = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
    net, tx, ty = make(dev, dist, B, values=init_values(seed=200 + comm.rank))
    x, y = batches(1, B)[0]
    step(net, tx, ty, x, y)
    for v in values(net):
        every = comm._allgather_object(v.tobytes())
        assert all(e == every[0] for e in every)


def test_parameter_shapes_differing_across_ranks_name_both(comm, dev):
    if comm.world_size == 1:
        pytest.skip("needs two ranks")
    dist = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
    from singa import tensor

    p = tensor.Tensor((3 + comm.rank,), dev, requires_grad=True, stores_grad=True)
    p.set_value(1.0)
    with pytest.raises(SingaError, match=r"rank \d has float32 \(\d,\) but rank \d has"):
        dist._first_step([p])


def test_distopt_api_surface(comm):
    dist = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm)
    assert (dist.global_rank, dist.world_size, dist.local_rank) == (
        comm.rank, comm.world_size, comm.local_rank)
    assert dist.communicator is comm
    with pytest.raises(SingaError, match="no get_states"):
        dist.get_states()


@pytest.mark.parametrize("mode", ["backward_and_update", "backward_and_update_half",
                                  "backward_and_partial_update", "backward_and_sparse_update"])
def test_verbosity_3_profile_lists_the_dist_nodes(comm, dev, mode):
    """Graph mode: communication nodes are recorded, timed and shown at verbosity 3 only."""
    dist = opt.DistOpt(opt.SGD(lr=0.1), communicator=comm, overlap=True)
    net, tx, ty = make(dev, dist, B, graph=True)
    dev.SetVerbosity(3)
    dev.SetSkipIteration(1)
    try:
        for x, y in batches(3, B * comm.world_size, seed=17):
            step(net, tx, ty, _shard(x, comm), _shard(y, comm), mode, {"threshold": 20})
        report = net._graph.profiling_report()
    finally:
        dev.SetVerbosity(0)
        dev.SetSkipIteration(5)
    lines = report.splitlines()[1:]
    assert lines and all(". Dist." in ln for ln in lines), report
    want = {"backward_and_update": "Dist.AllReduceStart",
            "backward_and_update_half": "Dist.AllReduceWait",
            "backward_and_partial_update": "Dist.PartialAllReduce",
            "backward_and_sparse_update": "Dist.SparseAllReduce"}[mode]
    assert any(want in ln for ln in lines), report
