"""The NCCL communicator. Its messages are checked everywhere; its collectives run only with a
CUDA GPU, cupy and NCCL's library (otherwise skipped, saying which is missing and the fix for
the installed CUDA stack).

On a GPU the collectives are checked against numpy on the data of every rank, with one rank
per GPU: under ``mpiexec -n N`` (MPI mode, one GPU per local rank), else one process and
``NcclIdHolder`` (multiprocess mode, world size 1). How each collective is ordered against
the device's stream is checked without a GPU in ``test_stream_order.py``; here the ordering
test is the oracle itself: tensors uploaded asynchronously (pinned staging) and written by
kernels on the device's stream just before a collective.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import rank_data
from singa_dist._stack import CUPY_WHEELS, cuda_major, install_hint, nccl_fix


def _nccl_or_skip():
    try:
        from singa_dist.nccl import probe

        probe()
    except Exception as exc:  # no cupy, no NCCL library or no GPU: the probe says which
        pytest.skip(f"NCCL communicator not runnable here ({type(exc).__name__}: {exc}); "
                    f"the whole stack: {install_hint(cuda_major())}")


def test_nccl_is_registered_and_fails_clearly_without_gpu():
    from singa._plugins import registry
    from singa.errors import DeviceUnavailableError

    reg = registry()
    assert "nccl" in reg.communicators
    try:
        reg.communicator("nccl")
    except DeviceUnavailableError as exc:
        assert "fix: pip install" in str(exc)


@pytest.mark.parametrize("major", sorted(CUPY_WHEELS))
def test_fixes_name_the_wheels_of_one_cuda_stack(major):
    other = ({"12", "13"} - {major}).pop()
    assert nccl_fix(major) == f"pip install nvidia-nccl-cu{major}"
    hint = install_hint(major)
    assert f"[cuda{major}]" in hint and f"nvidia-nccl-cu{major}" in hint
    assert f"cu{other}" not in hint and f"cuda{other}" not in hint
    assert '"singa[' not in hint  # the index's singa is an unrelated project
    assert "cu12" in nccl_fix(None) and "cu13" in nccl_fix(None)


def test_without_nccl_the_probe_names_the_wheel_of_the_installed_cupy():
    """cupy 14 without NCCL's library imports ``cupy.cuda.nccl`` as a stub (no
    get_unique_id): the probe must say so and name the NCCL wheel of cupy's CUDA major."""
    cupy = pytest.importorskip("cupy", reason="no cupy: nothing to match the NCCL wheel to")
    from cupy.cuda import nccl

    if hasattr(nccl, "get_unique_id"):
        pytest.skip("NCCL's library is installed: cupy.cuda.nccl is the real module")
    from singa_dist.nccl import NcclIdHolder, probe

    major = str(cupy.cuda.runtime.runtimeGetVersion() // 1000)
    with pytest.raises(RuntimeError, match=f"fix: pip install nvidia-nccl-cu{major}$"):
        probe()
    with pytest.raises(RuntimeError, match="stub"):
        NcclIdHolder()


def test_the_nccl_id_is_the_bytes_cupy_takes():
    import pickle

    from singa_dist.nccl import NcclIdHolder, _id_bytes

    assert _id_bytes((-1, 0, 127)) == b"\xff\x00\x7f"  # cupy 13's signed chars
    held = NcclIdHolder(bytes(range(128)))
    assert pickle.loads(pickle.dumps(held)).id == bytes(range(128))


# ---------------------------------------------------------------------- on a GPU
GPU = pytest.mark.needs_hardware("nvidia gpu")  # run by tools/gpu_check.py (step nccl-tests)


@pytest.fixture(scope="module")
def nccl():
    _nccl_or_skip()
    from singa import dist
    from singa_dist import NcclCommunicator, NcclIdHolder

    if _mpi_world_size() > 1:
        return dist.get_communicator("nccl")  # MPI mode
    return NcclCommunicator(nccl_id=NcclIdHolder(), local_rank=0, world_size=1)


def _mpi_world_size() -> int:
    try:
        from mpi4py import MPI

        return MPI.COMM_WORLD.Get_size()
    except (ImportError, RuntimeError):  # no MPI library: a single process
        return 1


@pytest.fixture(scope="module")
def gpu(nccl):
    from singa import device

    return device.create_cuda_gpu_on(nccl.local_rank)


def _t(arr, dev):
    from singa import tensor

    t = tensor.from_numpy(np.array(arr))  # a copy: the oracle still reads arr
    t.to_device(dev)
    return t


def _all(seed, comm, shape, dtype=np.float32):
    return [rank_data(seed, r, shape, dtype) for r in range(comm.world_size)]


def _np(t):
    from singa import tensor

    return tensor.to_numpy(t)


BIG = (1 << 23,)  # 32 MiB of float32: uploaded through pinned staging, asynchronously


@GPU
def test_nccl_all_reduce_matches_numpy(nccl, gpu):
    xs = [np.arange(1001, dtype=np.float32) * (r + 1) for r in range(nccl.world_size)]
    t = _t(xs[nccl.rank], gpu)
    nccl.all_reduce(t)
    np.testing.assert_allclose(_np(t), np.sum(xs, 0), rtol=1e-6)


@GPU
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_all_reduce_ops_and_dtypes(nccl, gpu, op, dtype):
    xs = _all(1, nccl, (37, 29), dtype)
    t = _t(xs[nccl.rank], gpu)
    nccl.all_reduce(t, op)
    want = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}[op](
        np.stack(xs).astype(np.float64), 0)
    if dtype == np.int32 and op == "mean":
        want = np.sum(xs, 0) // nccl.world_size
    tol = 2e-3 if dtype == np.float16 else 1e-6
    np.testing.assert_allclose(_np(t).astype(np.float64), want, rtol=tol, atol=tol)


@GPU
def test_a_collective_reads_what_the_kernels_before_it_wrote(nccl, gpu):
    """A matrix product (milliseconds on the GPU, queued in microseconds) on the device's
    stream, then at once an all-gather of it: ordered against any other stream, the gather
    reads the buffer before the product wrote it. The oracle is the product itself, read
    back in the device's order."""
    from singa import tensor

    xs = _all(2, nccl, (2048, 2048))
    products = [tensor.mult(_t(x, gpu), _t(x, gpu)) for x in xs]
    got = _np(nccl.all_gather(products[nccl.rank]))
    want = np.stack([_np(p) for p in products])
    np.testing.assert_array_equal(got, want)


@GPU
@pytest.mark.parametrize("inplace", [False, True])
def test_a_started_all_reduce_is_seen_by_the_kernels_after_its_wait(nccl, gpu, inplace):
    xs = _all(3, nccl, BIG)
    t = _t(xs[nccl.rank], gpu) * 2.0  # written by a kernel just before the start
    work = nccl.start_all_reduce(t, op="mean", inplace=inplace)
    work.wait()
    got = _np(t + 0.0)  # read by a kernel right after the wait
    np.testing.assert_allclose(got, np.mean(np.stack(xs) * np.float32(2), 0), rtol=1e-5,
                               atol=1e-5)


@GPU
def test_fused_half_sparse_broadcast_and_barrier(nccl, gpu):
    n = nccl.world_size
    xs = [_all(4 + i, nccl, s) for i, s in enumerate([(1001,), (3, 5), (64,)])]
    ts = [_t(x[nccl.rank], gpu) for x in xs]
    nccl.fused_all_reduce(ts, op="mean")
    for t, x in zip(ts, xs):
        np.testing.assert_allclose(_np(t), np.mean(x, 0), rtol=1e-5, atol=1e-6)
    h = _t(xs[0][nccl.rank], gpu)
    nccl.all_reduce_half(h)
    want = np.sum([x.astype(np.float16).astype(np.float32) for x in xs[0]], 0)
    np.testing.assert_allclose(_np(h), want, rtol=1e-6)
    s = _t(xs[0][nccl.rank], gpu)
    nccl.sparse_all_reduce(s, 1.0)  # threshold: |g| >= 1 travels
    want = np.sum([np.where(np.abs(x) >= 1.0, x, 0) for x in xs[0]], 0)
    np.testing.assert_allclose(_np(s), want, rtol=1e-6)
    b = _t(xs[1][nccl.rank], gpu)
    nccl.broadcast(b, root=n - 1)
    np.testing.assert_array_equal(_np(b), xs[1][n - 1])
    nccl.barrier()
    assert nccl._allgather_object({"rank": nccl.rank}) == [{"rank": r} for r in range(n)]


@GPU
def test_a_tensor_on_another_device_is_refused_by_name(nccl):
    from singa import device
    from singa.dist import DistError

    with pytest.raises(DistError, match="moves CUDA tensors only"):
        nccl.all_reduce(_t(np.ones(3, np.float32), device.create_cpu_device()))
