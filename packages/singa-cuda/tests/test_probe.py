"""Diagnosis: the probe names the problem and its fix; without a GPU, ``get_device("cuda")``
and ``python -m singa info`` say why, and the other backends are unaffected."""

from __future__ import annotations

import subprocess
import sys

import pytest
from singa.errors import DeviceUnavailableError

from singa_cuda._probe import REASONS, CudaFacts, explain, facts

OK = CudaFacts(driver_version=12040, runtime_version=12090, device_count=2)


def test_a_working_machine_has_no_problem():
    assert explain(OK) is None


@pytest.mark.parametrize("facts_, reason, in_fix", [
    (CudaFacts(cupy_error="ModuleNotFoundError: No module named 'cupy'"), "no-cupy",
     '".[cuda13]"'),
    (CudaFacts(driver_version=0, runtime_version=12090), "no-driver", "NVIDIA driver"),
    (CudaFacts(driver_version=11080, runtime_version=12090, device_count=1), "old-driver",
     "upgrade the driver"),
    (CudaFacts(driver_version=12040, runtime_version=12090, device_count=0,
               device_error="cudaErrorNoDevice"), "no-device", "CUDA_VISIBLE_DEVICES"),
    (CudaFacts(driver_version=12040, runtime_version=12090, device_count=1,
               nvrtc_error="OSError: libnvrtc.so.12"), "no-nvrtc", "nvidia-cuda-nvrtc-cu12"),
    (CudaFacts(driver_version=12040, runtime_version=12090, device_count=1,
               cudnn_error="ModuleNotFoundError: No module named 'cudnn'"), "no-cudnn",
     "nvidia-cudnn-frontend"),
])
def test_each_problem_is_named_with_its_fix(facts_, reason, in_fix):
    err = explain(facts_)
    assert err is not None and err.reason == reason
    assert in_fix in err.fix and in_fix in str(err)


@pytest.mark.parametrize("facts_, reason, in_fix", [
    (CudaFacts(driver_version=13000, runtime_version=13020, device_count=1,
               nvrtc_error="FileNotFoundError: cuda_fp16.h"), "no-nvrtc",
     '"nvidia-cuda-nvrtc>=13,<14" "nvidia-cuda-runtime>=13,<14"'),
    (CudaFacts(driver_version=13000, runtime_version=13020, device_count=1,
               cudnn_error="ModuleNotFoundError: No module named 'cudnn'"), "no-cudnn",
     "nvidia-cudnn-cu13 nvidia-cudnn-frontend"),
    # a CUDA 12 driver under cupy-cuda13x: upgrade, or the CUDA 12 stack
    (CudaFacts(driver_version=12080, runtime_version=13020, device_count=1), "old-driver",
     '".[cuda12]"'),
])
def test_fixes_name_the_installed_stack(facts_, reason, in_fix):
    err = explain(facts_)
    assert err is not None and err.reason == reason
    assert in_fix in err.fix, err.fix
    assert "-cu12" not in err.fix  # never the other stack's wheels


def test_stack_comes_from_the_runtime_then_the_cupy_wheel():
    assert CudaFacts(runtime_version=12090).stack == 12
    assert CudaFacts(runtime_version=13020).stack == 13
    # no runtime version (cupy failed to import): the installed wheel decides
    assert CudaFacts(cupy_error="x", cupy_dist="cupy-cuda12x 14.2.0").stack == 12
    assert CudaFacts(cupy_error="x", cupy_dist="cupy-cuda13x 14.2.0").stack == 13


def test_minor_version_compatibility_is_not_an_old_driver():
    # a CUDA 12.0 driver runs the 12.9 runtime (kernels are built to SASS, no PTX JIT)
    assert explain(CudaFacts(driver_version=12000, runtime_version=12090, device_count=1)) is None


def test_missing_wheels_are_named_behind_a_machine_problem():
    err = explain(CudaFacts(driver_version=0, runtime_version=12090,
                            cudnn_error="ModuleNotFoundError: No module named 'cudnn'"))
    assert err.reason == "no-driver"
    assert "cuDNN" in str(err) and "nvidia-cudnn-cu12" in str(err)
    assert "no CUDA device" not in str(err)  # consequences of no driver are not listed


def test_reasons_are_listed():
    assert set(REASONS) == {"no-cupy", "no-driver", "old-driver", "no-device", "no-nvrtc",
                            "no-cudnn"}


needs_no_gpu = pytest.mark.skipif(
    explain(facts()) is None, reason="a usable CUDA GPU is present; these tests check the "
    "behaviour without one")


@needs_no_gpu
def test_probe_here_fails_for_the_real_reason():
    # with cupy, NVRTC and the runtime headers of either stack installed and no driver, the
    # probe blames the driver, and never NVRTC (CUDA 13's headers are in nvidia/cu13)
    import cupy

    err = explain(facts())
    if cupy.cuda.runtime.driverGetVersion() == 0:
        assert err.reason == "no-driver"
    assert not cupy.cuda.is_available()
    assert facts().nvrtc_error is None, facts().nvrtc_error
    assert "NVRTC" not in str(err)


@needs_no_gpu
def test_get_device_raises_the_probe_reason():
    from singa.device import create_cuda_gpu, get_device

    reason = explain(facts())
    for call in (lambda: get_device("cuda"), lambda: get_device("cuda:1"), create_cuda_gpu,
                 lambda: get_device("gpu")):
        with pytest.raises(DeviceUnavailableError) as info:
            call()
        assert reason.detail in str(info.value) and reason.fix in str(info.value)


@needs_no_gpu
def test_other_backends_are_unaffected():
    code = ("import numpy as np, singa\n"
            "from singa import tensor\n"
            "from singa.device import get_device, list_devices\n"
            "assert 'cuda:0' not in list_devices()\n"
            "x = tensor.from_numpy(np.ones((2, 3), np.float32))\n"
            "print((x + x).to_numpy().sum(), get_device('cpu').name)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["12.0", "cpu"]


@needs_no_gpu
def test_doctor_prints_the_reason():
    out = subprocess.run([sys.executable, "-m", "singa", "info"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    backends = out.stdout.split("\nBackends\n", 1)[1]
    line = next(ln for ln in backends.splitlines() if ln.strip().startswith("cuda "))
    err = explain(facts())
    assert "unavailable" in line and err.detail in line and err.fix in line
