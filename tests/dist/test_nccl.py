"""The NCCL communicator: runs only with a CUDA GPU, cupy and NCCL; otherwise skipped."""

from __future__ import annotations

import numpy as np
import pytest


def _nccl_or_skip():
    try:
        from singa_dist.nccl import probe

        probe()
    except Exception as exc:  # no cupy, no NCCL library or no GPU: say which
        pytest.skip(f"NCCL communicator not runnable here ({type(exc).__name__}: {exc}); it "
                    "needs a CUDA GPU, cupy-cuda12x and nvidia-nccl-cu12")


def test_nccl_is_registered_and_fails_clearly_without_gpu():
    from singa._plugins import registry
    from singa.errors import DeviceUnavailableError

    reg = registry()
    assert "nccl" in reg.communicators
    try:
        reg.communicator("nccl")
    except DeviceUnavailableError as exc:
        assert "fix: pip install" in str(exc)


def test_nccl_all_reduce_matches_numpy(comm):
    _nccl_or_skip()
    from singa import device, dist, tensor

    nc = dist.get_communicator("nccl")
    dev = device.create_cuda_gpu_on(nc.local_rank)
    xs = [np.arange(1001, dtype=np.float32) * (r + 1) for r in range(nc.world_size)]
    t = tensor.from_numpy(xs[nc.rank].copy())
    t.to_device(dev)
    nc.all_reduce(t)
    np.testing.assert_allclose(tensor.to_numpy(t), np.sum(xs, 0), rtol=1e-6)
