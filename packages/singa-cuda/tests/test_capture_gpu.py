"""CUDA graphs on a GPU (``SINGA_CUDA_GRAPHS=1``; they skip here with the probe's reason): a
captured training step computes what the kernel-by-kernel replay computes, a tensor made
between launches keeps its values, a capture the driver refuses falls back, random ops stay
uncaptured. What ran on which GPU, and what never did, is in docs/cuda.md ("CUDA graphs")."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_capture import make_net

from singa_cuda import capture
from singa_cuda._probe import explain, facts

_why = explain(facts())
pytestmark = [pytest.mark.needs_hardware("nvidia gpu"),
              pytest.mark.skipif(_why is not None,
                                 reason=f"needs a usable CUDA GPU: {_why.detail if _why else ''}")]

STEPS = 6


@pytest.fixture(scope="module")
def gpu():
    from singa.device import create_cuda_gpu

    return create_cuda_gpu()


def _train(gpu, monkeypatch, graphs: bool, conv: bool, dropout=False, between=None):
    """Train STEPS graph-mode steps on new data each step; the losses, the parameters and
    the plan's ``cuda.graphs`` record."""
    from singa import opt, tensor

    monkeypatch.setenv("SINGA_CUDA_GRAPHS", "1" if graphs else "0")
    gpu.SetRandSeed(0)
    rng = np.random.default_rng(0)
    shape = (8, 3, 12, 12) if conv else (8, 20)
    xs = [rng.standard_normal(shape).astype(np.float32) for _ in range(STEPS)]
    ys = [rng.integers(0, 5, 8).astype(np.int32) for _ in range(STEPS)]
    m = make_net(conv, dropout)
    m.set_optimizer(opt.SGD(0.05, momentum=0.9, weight_decay=1e-4))
    tx = tensor.from_numpy(xs[0], gpu)
    ty = tensor.from_numpy(ys[0], gpu)
    m.compile([tx], is_train=True, use_graph=True)
    np_rng = np.random.default_rng(1)
    for _name, p in sorted(m.get_params().items()):  # the same start for both runs
        p.copy_from_numpy(np_rng.standard_normal(p.shape).astype(np.float32) * 0.1)
    losses = []
    for x, y in zip(xs, ys):
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _, loss = m(tx, ty)
        losses.append(float(tensor.to_numpy(loss).reshape(-1)[0]))
        if between is not None:
            between(m)
    params = {k: tensor.to_numpy(v) for k, v in m.get_params().items()}
    record = m._graph.plan.extras.get(capture.STAGE_NAME)
    return losses, params, record, m


@pytest.mark.parametrize("conv", [False, True], ids=["mlp", "conv-bn-pool"])
def test_captured_training_equals_the_kernel_by_kernel_replay(gpu, monkeypatch, conv):
    want_losses, want, _, _ = _train(gpu, monkeypatch, False, conv)
    again_losses, again, _, _ = _train(gpu, monkeypatch, False, conv)
    got_losses, got, record, _ = _train(gpu, monkeypatch, True, conv)
    assert record.state == "captured", getattr(record, "why", "")
    assert len(set(got_losses)) == STEPS  # every launched step trained on its own batch
    deterministic = all(np.array_equal(want[k], again[k]) for k in want)
    for k in want:  # bitwise where the kernels are deterministic (cuDNN's may not be)
        if deterministic:
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)
        else:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-5)


def test_a_tensor_made_between_launches_keeps_its_values(gpu, monkeypatch):
    """Every step makes and keeps tensors of the sizes the step's temporaries have; a
    launch writing memory the pool handed them would change them."""
    from singa import tensor

    kept = []

    def between(m):
        for n in (64, 256, 8 * 32, 8 * 8 * 6 * 6, 4096):
            data = np.random.default_rng(len(kept)).standard_normal(n).astype(np.float32)
            kept.append((tensor.from_numpy(data, gpu), data))

    _, _, record, m = _train(gpu, monkeypatch, True, True, between=between)
    assert record.state == "captured", getattr(record, "why", "")
    for t, data in kept:
        np.testing.assert_array_equal(tensor.to_numpy(t), data)
    before = gpu.pool.current_bytes
    reserved = record.reservation.nbytes
    m.graph(False)  # drops the plan: the reservation goes back to the pool
    assert record.state == "released" and gpu.pool.reserved_bytes == 0
    assert gpu.pool.current_bytes <= before - reserved


def test_a_refused_capture_falls_back_to_the_replay(gpu, monkeypatch):
    want_losses, want, _, _ = _train(gpu, monkeypatch, False, False)

    def sync_in_first_kernel(m):  # after the first step: the plan exists, not yet captured
        record = m._graph.plan.extras[capture.STAGE_NAME]
        if record.runs != 1:
            return
        calls = record.segs[0][1]
        f, i, o, a, node = calls[0]

        def syncing(ins, outs, attrs):
            gpu.stream.synchronize()  # refused while the stream captures (fine otherwise)
            f(ins, outs, attrs)

        calls[0] = (syncing, i, o, a, node)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got_losses, got, record, _ = _train(gpu, monkeypatch, True, False,
                                            between=sync_in_first_kernel)
    assert record.state == "failed" and record.why
    assert any("CUDA graph failed" in str(w.message) for w in caught)
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    assert got_losses == want_losses


def test_random_ops_stay_uncaptured_and_train(gpu, monkeypatch):
    want_losses, want, _, _ = _train(gpu, monkeypatch, False, False, dropout=True)
    got_losses, got, record, _ = _train(gpu, monkeypatch, True, False, dropout=True)
    assert record.state == "uncapturable" and "Bernoulli" in record.why
    for k in want:
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
