"""The CUDA C kernels of ``cu/*.cu``, built unchanged for the CPU with g++ and driven by the
GPU's own launchers (``cu_kernels.kernels``), pass the conformance kit: pooling forward and
backward (every window rule), ReLUBackward, the fused pooling/ReLU backward and Add+ReLU
(bitwise against the kernels they fuse), the losses, ScatterAdd and the Philox draws. And
philox.cu draws exactly the numbers the shared array-module generator draws."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import TEST_BACKEND_PATHS
from hostcu import compiler
from singa.device import get_device
from singa.tensor import Tensor, float16, float32, float64

needs_gxx = pytest.mark.skipif(compiler() is None,
                               reason="no C++ compiler (g++) to build the .cu kernels for the CPU")


@needs_gxx
def test_cu_kernels_pass_the_conformance_kit(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        TEST_BACKEND_PATHS + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                              if p])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "singa.testing.conformance",
         "--singa-backend", "cudahost", "-q", "-rA", "-p", "no:cacheprovider", "--singa-no-shrink"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    tail = proc.stdout[-6000:]
    assert proc.returncode == 0, tail
    summary = next(ln for ln in proc.stdout.splitlines() if ln.startswith("singa conformance:"))
    # every CUDA C kernel, every dtype: 10 ops + the 4 fusions, and the shared Copy, Conv2d,
    # Add and ReLU that the fused kernels are compared with or built on
    assert "of 18 ops checked" in summary, summary
    for fused in ("Conv2d+ReLU", "Conv2d+ReLU+Pooling2d", "Pooling2dBackward+ReLUBackward",
                  "Add+ReLU"):
        assert f"test_fused[{fused}" in proc.stdout, f"the kit did not check {fused}"


@needs_gxx
@pytest.mark.parametrize("dtype", [float32, float16, float64], ids=["f32", "f16", "f64"])
@pytest.mark.parametrize("op, args", [
    ("uniform", (-1.5, 2.0)), ("bernoulli", (0.3,)), ("gaussian", (0.5, 2.0))])
def test_philox_cu_draws_what_the_shared_generator_draws(op, args, dtype):
    draws = []
    for name in ("cudahost", "cudaxp"):
        dev = get_device(name)
        dev.SetRandSeed(20261123)
        t = Tensor((37, 5), dev, dtype)
        getattr(t, op)(*args)
        getattr(t, op)(*args)  # the second call: the counter advanced
        draws.append(t.to_numpy())
    assert np.unique(draws[0]).size > 1
    if op == "gaussian":  # log/cos of the C library and of numpy may differ in the last bit
        np.testing.assert_allclose(draws[0], draws[1], rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(draws[0], draws[1])
