"""Tests that need a CUDA GPU (they skip here with the probe's reason). What ran on which GPU,
and what never did, is in docs/cuda.md ("On a GPU")."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from singa_cuda._probe import explain, facts

_why = explain(facts())
pytestmark = [pytest.mark.needs_hardware("nvidia gpu"),
              pytest.mark.skipif(_why is not None,
                                 reason=f"needs a usable CUDA GPU: {_why.detail if _why else ''}")]


@pytest.fixture(scope="module")
def gpu():
    from singa.device import create_cuda_gpu

    return create_cuda_gpu()


def test_devices_are_singletons_per_id(gpu):
    from singa.device import create_cuda_gpu_on, create_cuda_gpus, get_device

    assert get_device("cuda:0") is gpu is create_cuda_gpu_on(0)
    assert create_cuda_gpus(1) == [gpu] and gpu.id() == 0 and gpu.lang == "cuda"


def test_sub_buffers_alias_their_parent(gpu):
    import cupy

    buf, cls = gpu.pool.malloc(4096)
    part = gpu.pool.allocator.sub(buf, 1024, 1024)
    with gpu.cuda_device:
        whole = cupy.ndarray((1024,), cupy.float32, buf)
        whole[...] = 0
        cupy.ndarray((256,), cupy.float32, part)[...] = 7
        got = whole.get()
    gpu.pool.free(buf, cls)
    assert (got[256:512] == 7).all() and (got[:256] == 0).all() and (got[512:] == 0).all()


def test_cupy_temporaries_come_from_the_singa_pool(gpu):
    import cupy
    from singa import tensor

    before = gpu.memory_stats()["num_allocs"]
    x = tensor.from_numpy(np.random.default_rng(0).random((64, 64), np.float32), gpu)
    tensor.sum(x * 2.0).to_numpy()
    assert gpu.memory_stats()["num_allocs"] > before
    assert cupy.get_default_memory_pool().total_bytes() == 0


def test_event_timing_is_positive(gpu):
    import cupy

    with gpu.cuda_device, gpu.stream:
        a = cupy.random.rand(512, 512, dtype=cupy.float32)
        assert gpu._timed_call(lambda: a @ a) > 0


def test_philox_cu_matches_the_shared_generator_on_the_gpu(gpu):
    from singa.tensor import Tensor

    from singa_cuda.xp.random import unit, words

    gpu.SetRandSeed(5)
    t = Tensor((1000,), gpu)
    t.uniform(0.0, 1.0)
    import cupy

    with gpu.cuda_device:
        w = words(cupy, 1000, (5, 0, 0, 0))
        want = unit(cupy, w[0], w[1], False).astype(cupy.float32).get()
    np.testing.assert_array_equal(t.to_numpy(), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("op", ["Add+ReLU", "ReLUBackward"])
def test_one_launch_kernels_equal_the_shared_kernels_bitwise(gpu, op, dtype):
    """elementwise.cu's kernels against the shared cupy code they replace (Add then ReLU,
    dy times the mask), compared as unsigned integers: NaN payloads and signed zeros count."""
    import cupy

    from singa_cuda.xp.elementwise import kernels as shared_elementwise

    rng = np.random.default_rng(11)
    host = [rng.standard_normal((7, 129, 33)).astype(dtype) for _ in range(2)]
    for h in host:
        flat = h.reshape(-1)
        pick = rng.choice(flat.size, flat.size // 5, replace=False)
        flat[pick] = rng.choice(np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], dtype), pick.size)
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    with gpu.cuda_device, gpu.stream:
        ins = [cupy.asarray(h) for h in host]
        got, want = cupy.empty_like(ins[0]), cupy.empty_like(ins[0])
        gpu.kernels[op][0](ins, [got], {})
        shared_elementwise(gpu.am)[op](ins, [want], {})
        got, want = got.get(), want.get()
    np.testing.assert_array_equal(got.view(uint), want.view(uint))


def test_large_copies_go_through_pinned_staging(gpu):
    # (the fused convolutions are checked on the GPU by the conformance kit below: test_fused
    # runs every fusion the device registers against its own Conv2d, ReLU and Pooling2d)
    from singa import tensor

    from singa_cuda.staging import THRESHOLD

    rng = np.random.default_rng(1)
    for n in (3 * THRESHOLD // 4, THRESHOLD // 8 + 5):  # 3 MiB (staged) and ~0.5 MiB (direct)
        data = rng.standard_normal(n).astype(np.float32)
        want = data.copy()
        t = tensor.from_numpy(data, gpu)
        data[...] = 0  # the staged upload returned: it must not read the caller's array again
        np.testing.assert_array_equal((t * 1.0).to_numpy(), want)
    assert gpu.staging.buffers, "a 3 MiB copy did not use a pinned buffer"
    assert gpu.staging.allocated <= gpu.staging.max_bytes


def _bn_inputs(rng, dtype, shape=(8, 16, 12, 12)):
    c = shape[1]
    x = rng.uniform(-2, 3, shape).astype(dtype)
    params = [rng.uniform(0.5, 2, c).astype(dtype) for _ in range(4)]
    return x, params


@pytest.mark.parametrize("mode", ["auto", "graph"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_batch_norm_runs_through_cudnn(gpu, monkeypatch, mode, dtype):
    # the kit checks the values of the table's path; this runs both cuDNN paths (the NCHW
    # kernels, 'auto', and the channels-last graph, 'graph') against the float64 reference,
    # training and backward, and checks that the path asked for served the call
    import cupy
    from singa.backend import OPS

    from singa_cuda import cudnn_bn

    monkeypatch.setenv("SINGA_CUDA_BATCHNORM", mode)
    table = cudnn_bn.kernels(gpu, fallback={})  # no fallback: a refused call raises KeyError
    train, back = gpu.on_device(table["BatchNormTrain"]), gpu.on_device(
        table["BatchNormBackward"])
    rng = np.random.default_rng(3)
    x, params = _bn_inputs(rng, dtype)
    dy = rng.uniform(-1, 1, x.shape).astype(dtype)
    tol = 1e-4 if dtype == np.float32 else 2e-2
    with gpu.cuda_device, gpu.stream:
        ins = [cupy.asarray(a) for a in (x, *params)]
        outs = [cupy.empty_like(ins[0])] + [cupy.empty(16, dtype) for _ in range(4)]
    train(ins, outs, {"momentum": 0.9, "eps": 1e-5})
    want = OPS["BatchNormTrain"].reference(x.astype(np.float64), *params, momentum=0.9,
                                           eps=1e-5)
    for got, ref in zip(outs, want):
        np.testing.assert_allclose(gpu.native_to_numpy(got).astype(np.float64), ref,
                                   rtol=tol, atol=tol)
    with gpu.cuda_device, gpu.stream:
        bins = [cupy.asarray(dy), ins[0], ins[1], outs[1], outs[2]]
        bouts = [cupy.empty_like(ins[0]), cupy.empty(16, dtype), cupy.empty(16, dtype)]
    back(bins, bouts, {})
    bwant = OPS["BatchNormBackward"].reference(
        dy.astype(np.float64), x.astype(np.float64), params[0].astype(np.float64),
        gpu.native_to_numpy(outs[1]).astype(np.float64),
        gpu.native_to_numpy(outs[2]).astype(np.float64))
    for got, ref in zip(bouts, bwant):
        np.testing.assert_allclose(gpu.native_to_numpy(got).astype(np.float64), ref,
                                   rtol=10 * tol, atol=10 * tol)
    fn = table["BatchNormTrain"]
    if mode == "auto":
        assert fn.legacy() is not None and not fn.legacy_refused, fn.legacy_refused
    else:
        assert not fn.engine().refused, fn.engine().refused


def test_running_statistics_update_in_place_on_the_nchw_path(gpu):
    # graph mode hands BatchNormTrain the running statistics as both input and output
    import cupy
    from singa.backend import OPS

    rng = np.random.default_rng(4)
    x, params = _bn_inputs(rng, np.float32)
    fn = gpu.kernels["BatchNormTrain"][0]
    with gpu.cuda_device, gpu.stream:
        ins = [cupy.asarray(a) for a in (x, *params)]
        outs = [cupy.empty_like(ins[0]), cupy.empty(16, cupy.float32),
                cupy.empty(16, cupy.float32), ins[3], ins[4]]
    gpu.on_device(fn)(ins, outs, {"momentum": 0.8, "eps": 1e-3})
    want = OPS["BatchNormTrain"].reference(x.astype(np.float64), *params, momentum=0.8,
                                           eps=1e-3)
    np.testing.assert_allclose(gpu.native_to_numpy(ins[3]), want[3], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gpu.native_to_numpy(ins[4]), want[4], rtol=1e-5, atol=1e-6)


def test_float32_precision_switches_tf32(gpu):
    # 'highest' is full float32 (error of float32 sums); 'high' may use TF32 (10-bit
    # mantissa inputs, about 1e-3). The default follows SINGA_CUDA_TF32 (on, as PyTorch)
    import cupy
    from singa import config
    from singa.backend import OPS
    from singa.errors import HyperparameterError

    assert gpu.float32_precision in ("high", "highest")
    with pytest.raises(HyperparameterError, match="float32_precision"):
        gpu.float32_precision = "medium"
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 64, 20, 20)).astype(np.float32)
    w = rng.standard_normal((32, 64, 3, 3)).astype(np.float32)
    attrs = {"stride": 1, "pads": 1}
    ref = OPS["Conv2d"].reference(x.astype(np.float64), w.astype(np.float64), **attrs)
    fn = gpu.kernels["Conv2d"][0]
    errors = {}
    before = gpu.float32_precision
    try:
        for precision in ("highest", "high"):
            gpu.float32_precision = precision
            with gpu.cuda_device, gpu.stream:
                ins = [cupy.asarray(x), cupy.asarray(w)]
                out = cupy.empty(ref.shape, cupy.float32)
            gpu.on_device(fn)(ins, [out], attrs)
            got = gpu.native_to_numpy(out).astype(np.float64)
            errors[precision] = np.abs(got - ref).max() / np.abs(ref).max()
    finally:
        gpu.float32_precision = before
    assert errors["highest"] < 1e-5, errors
    assert errors["high"] < 1e-2, errors
    assert config.get("SINGA_CUDA_TF32") in (True, False)
    # both graphs ran through the frontend's ordered execution (no per-call mapping)
    graphs = list(fn.engine().cache._d.values())
    assert graphs and all(g.ordered for g in graphs), [g.ordered for g in graphs]


def test_conformance_kit_on_the_gpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "singa.testing.conformance",
         "--singa-backend", "cuda", "-q", "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-6000:]
