"""Every Communicator operation against numpy on the data of every rank."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import rank_data
from singa import tensor
from singa.dist import DistError

DTYPES = [np.float32, np.float16, np.int32]
SIZES = [(1,), (7,), (3, 5), (1001,), (37, 29)]  # odd sizes: no multiple of ranks or buffers
TOL = {np.float32: 1e-5, np.float16: 2e-3, np.int32: 0}


def _t(arr, dev):
    t = tensor.from_numpy(np.array(arr))  # a copy: the oracle still reads arr
    t.to_device(dev)
    return t


def _close(got, want, dtype):
    tol = TOL[dtype]
    if tol == 0:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tol * 4, atol=tol * 4 * max(1.0, np.abs(want).max()))


def _all(seed, comm, shape, dtype):
    return [rank_data(seed, r, shape, dtype) for r in range(comm.world_size)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SIZES, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_all_reduce(comm, dev, dtype, shape, op):
    xs = _all(1, comm, shape, dtype)
    t = _t(xs[comm.rank], dev)
    comm.all_reduce(t, op)
    acc = np.stack([x.astype(np.float64) for x in xs])
    want = {"sum": acc.sum(0), "mean": acc.sum(0) / comm.world_size, "max": acc.max(0),
            "min": acc.min(0)}[op]
    if dtype == np.int32 and op == "mean":
        want = np.floor_divide(acc.sum(0).astype(np.int64), comm.world_size)
    got = tensor.to_numpy(t)
    assert got.dtype == dtype
    _close(got, want.astype(dtype), dtype)


@pytest.mark.parametrize("buff", [5, 64, 4194304])
def test_fused_all_reduce_mixed_dtypes_and_buffers(comm, dev, buff):
    from singa import dist

    small = dist.get_communicator("mpi", buffSize=buff)  # buffers smaller than the tensors
    shapes = [(3,), (100,), (7, 9), (1,), (250,)]
    dts = [np.float32, np.int32, np.float32, np.float16, np.float32]
    xs = [_all(10 + i, comm, s, d) for i, (s, d) in enumerate(zip(shapes, dts))]
    ts = [_t(x[comm.rank], dev) for x in xs]
    small.fused_all_reduce(ts)
    for t, x, d in zip(ts, xs, dts):
        _close(tensor.to_numpy(t), np.sum([a.astype(np.float64) for a in x], 0).astype(d), d)


@pytest.mark.parametrize("shape", [(5,), (1001,), (64, 33)], ids=str)
def test_all_reduce_half(comm, dev, shape):
    xs = _all(3, comm, shape, np.float32)
    t = _t(xs[comm.rank], dev)
    comm.all_reduce_half(t)
    got = tensor.to_numpy(t)
    assert got.dtype == np.float32
    # float16 on the wire, float32 sum in rank order: the same bits on every rank
    want = xs[0].astype(np.float16).astype(np.float32)
    for x in xs[1:]:
        want += x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("buff", [4, 7, 4194304])
def test_half_paths_agree_for_any_buffer(comm, dev, buff):
    """all_reduce_half, fused half and the started half all-reduce give the same bits."""
    from singa import dist

    small = dist.get_communicator("mpi", buffSize=buff)
    shapes = [(5,), (33,), (4, 4)]
    xs = [_all(50 + i, comm, s, np.float32) for i, s in enumerate(shapes)]
    a = [_t(x[comm.rank], dev) for x in xs]
    b = [_t(x[comm.rank], dev) for x in xs]
    c = [_t(x[comm.rank], dev) for x in xs]
    for t in a:
        small.all_reduce_half(t)
    small.fused_all_reduce(b, half=True)
    small.start_all_reduce(c, half=True).wait()
    for x, ta, tb, tc in zip(xs, a, b, c):
        want = x[0].astype(np.float16).astype(np.float32)
        for y in x[1:]:
            want += y.astype(np.float16).astype(np.float32)
        for t in (ta, tb, tc):
            np.testing.assert_array_equal(tensor.to_numpy(t), want)


def test_all_reduce_half_rejects_other_dtypes(comm, dev):
    with pytest.raises(DistError, match="float32"):
        comm.all_reduce_half(_t(np.zeros(3, np.int32), dev))


def _sparse_oracle(gs, residuals, spars, topk):
    """numpy simulation: error feedback, selection, residual, sum of the kept entries."""
    out = np.zeros_like(gs[0])
    new_res = []
    for g, res in zip(gs, residuals):
        g = g + res if res is not None else g.copy()
        if topk:
            k = int(np.ceil(spars * g.size))
            keep = np.argsort(-np.abs(g), kind="stable")[:k]
        else:
            keep = np.flatnonzero(np.abs(g) >= spars)
        r = g.copy()
        r[keep] = 0
        new_res.append(r if res is not None else None)
        np.add.at(out, keep, g[keep])
    return out, new_res


@pytest.mark.parametrize("topk,spars", [(False, 1.0), (False, 2.5), (True, 0.01),
                                        (True, 0.3), (True, 1.0)])
@pytest.mark.parametrize("corr", [True, False])
def test_sparse_all_reduce_three_steps(comm, dev, topk, spars, corr):
    n = 1003
    res_np = [np.zeros(n, np.float32) if corr else None for _ in range(comm.world_size)]
    res_t = _t(np.zeros(n, np.float32), dev) if corr else None
    for step in range(3):
        gs = _all(20 + step, comm, (n,), np.float32)
        t = _t(gs[comm.rank], dev)
        comm.sparse_all_reduce(t, spars, topk, res_t)
        want, res_np = _sparse_oracle(gs, res_np, spars, topk)
        np.testing.assert_allclose(tensor.to_numpy(t), want, rtol=1e-6, atol=1e-5)
        if corr:
            np.testing.assert_array_equal(tensor.to_numpy(res_t), res_np[comm.rank])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("root", [0, -1])
def test_broadcast(comm, dev, dtype, root):
    root = root % comm.world_size
    xs = _all(4, comm, (13, 3), dtype)
    t = _t(xs[comm.rank], dev)
    comm.broadcast(t, root)
    np.testing.assert_array_equal(tensor.to_numpy(t), xs[root])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_all_gather(comm, dev, dtype):
    xs = _all(5, comm, (3, 7), dtype)
    out = comm.all_gather(_t(xs[comm.rank], dev))
    assert out.shape == (comm.world_size, 3, 7)
    np.testing.assert_array_equal(tensor.to_numpy(out), np.stack(xs))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_put_get_ring(comm, dev, dtype):
    n = comm.world_size
    xs = _all(6, comm, (11,), dtype)
    send = _t(xs[comm.rank], dev)
    recv = _t(np.zeros(11, dtype), dev)
    nxt, prv = (comm.rank + 1) % n, (comm.rank - 1) % n
    if n == 1:
        pytest.skip("point to point needs two ranks")
    # even ranks send first: blocking sends never deadlock
    if comm.rank % 2 == 0:
        comm.put(send, nxt)
        comm.get(recv, prv)
    else:
        comm.get(recv, prv)
        comm.put(send, nxt)
    np.testing.assert_array_equal(tensor.to_numpy(recv), xs[prv])


def test_start_wait_equals_all_reduce(comm, dev):
    shapes = [(1001,), (3, 4), (50,)]
    xs = [_all(30 + i, comm, s, np.float32) for i, s in enumerate(shapes)]
    a = [_t(x[comm.rank], dev) for x in xs]
    b = [_t(x[comm.rank], dev) for x in xs]
    small = comm.buff_size
    comm.buff_size = 97  # several requests per tensor
    try:
        work = comm.start_all_reduce(a)
        comm.progress()
        work.wait()
        work.wait()  # idempotent
    finally:
        comm.buff_size = small
    comm.fused_all_reduce(b)
    for x, y in zip(a, b):
        np.testing.assert_allclose(tensor.to_numpy(x), tensor.to_numpy(y), rtol=1e-6)


def test_barrier(comm):
    comm.barrier()


def test_shape_mismatch_names_both_ranks(comm, dev):
    if comm.world_size == 1:
        pytest.skip("needs two ranks")
    t = _t(np.zeros(3 + comm.rank, np.float32), dev)
    with pytest.raises(DistError, match=r"rank \d has float32 \(\d,\) but rank \d has "
                                        r"float32 \(\d,\)"):
        comm.all_reduce(t)


def test_dtype_mismatch_names_both_ranks(comm, dev):
    if comm.world_size == 1:
        pytest.skip("needs two ranks")
    dt = np.float32 if comm.rank == 0 else np.int32
    with pytest.raises(DistError, match="float32.*int32|int32.*float32"):
        comm.broadcast(_t(np.zeros(4, dt), dev))


def test_bad_arguments(comm, dev):
    t = _t(np.zeros(4, np.float32), dev)
    with pytest.raises(ValueError, match="op must be one of"):
        comm.all_reduce(t, "prod")
    from singa.dist import DistError as E

    with pytest.raises(E, match="does not exist"):
        comm.broadcast(t, root=comm.world_size)


def test_graph_mode_records_named_nodes(comm, dev):
    """Collectives recorded in a graph run at replay, in order, named Dist.*."""
    xs = _all(40, comm, (9,), np.float32)
    t = _t(xs[comm.rank], dev)
    from singa.scheduler import Graph

    g = Graph(dev)
    prev = dev.use_graph(g)
    try:
        dev.EnableGraph(True)
        comm.all_reduce(t)
        comm.broadcast(t, 0)
        dev.EnableGraph(False)
        names = [n.name for n in g.recording.nodes]
        assert names == ["Dist.AllReduce", "Dist.Broadcast"], names
        np.testing.assert_array_equal(tensor.to_numpy(t), xs[comm.rank])  # not run yet
        dev.RunGraph()
    finally:
        dev.EnableGraph(False)
        dev.use_graph(prev)
    want = np.sum(xs, 0)
    np.testing.assert_allclose(tensor.to_numpy(t), want, rtol=1e-6)
