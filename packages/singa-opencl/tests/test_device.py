"""Device selection, the doctor's description, fp16/fp64 handling, errors and profiling."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import to_device
from singa import _dtype
from singa.errors import DeviceUnavailableError, KernelError

from singa_opencl import _platforms
from singa_opencl.kernels._common import claim, device_dtypes, make_kernel

LINE = re.compile(r"^(\d+):(\d+) (.+) / (.+) / (.+) / fp16 (yes|no)( / .*)?$")


def test_describe_one_line_per_device():
    infos = _platforms.enumerate_devices()
    lines = _platforms.describe()
    assert len(lines) == len(infos) >= 1
    for info, line in zip(infos, lines):
        m = LINE.match(line)
        assert m, line
        assert (int(m.group(1)), int(m.group(2))) == (info.platform_index, info.device_index)
        assert m.group(6) == ("yes" if "cl_khr_fp16" in info.device.extensions else "no")
        if info.problem is not None:
            assert "unusable" in line


def test_describe_through_the_backend_record(cl_device):
    assert cl_device.spec.describe() == _platforms.describe()
    assert cl_device.spec.install_hint == 'pip install ".[opencl]" in the singa checkout'


def test_default_order_puts_usable_devices_first(monkeypatch):
    monkeypatch.delenv("SINGA_OPENCL_DEVICE", raising=False)
    ordered = _platforms.ordered_devices()
    assert ordered and all(i.problem is None for i in ordered)
    gpus = [i.is_gpu for i in ordered]
    assert gpus == sorted(gpus, reverse=True)  # GPUs before other devices
    assert _platforms.device_count() == len(ordered)


@pytest.mark.parametrize("how", ["key", "name"])
def test_env_var_selects_device_zero(monkeypatch, how):
    usable = [i for i in _platforms.enumerate_devices() if i.problem is None]
    target = usable[-1]
    spec = target.key if how == "key" else target.device.name.strip()
    monkeypatch.setenv("SINGA_OPENCL_DEVICE", spec)
    ordered = _platforms.ordered_devices()
    assert ordered[0] is target
    assert len(ordered) == len(usable)


def _usable():
    return [i for i in _platforms.enumerate_devices() if i.problem is None][0]


def test_probe_builds_and_runs_a_16_wide_vector_kernel(tmp_path):
    # the real probe in a child, on a device that passed it, with a cache of its own
    info = _usable()
    assert _platforms.probe_verdict(info, cache=tmp_path) is None
    (entry,) = tmp_path.glob("*.json")
    assert '"problem": null' in entry.read_text()


ABORTING = "import os, sys; sys.stderr.write('LLVM ERROR: Cannot select: fadd\\n'); os.abort()"
FAILING = "print('clBuildProgram failed: BUILD_PROGRAM_FAILURE'); raise SystemExit(1)"


def test_probe_survives_a_compiler_that_aborts_and_caches_the_verdict(tmp_path):
    # the PyPI pocl's LLVM 14 on AMD Zen 4 aborts the process compiling 16-wide vectors: the
    # child dies, the device gets a reason, and the verdict is not probed again
    info = _usable()
    problem = _platforms.probe_verdict(info, script=ABORTING, cache=tmp_path)
    assert "crashes the process (signal 6)" in problem
    assert "LLVM ERROR: Cannot select" in problem
    (entry,) = tmp_path.glob("*.json")
    entry.write_text('{"problem": "planted"}')  # the cached verdict is used, not re-probed
    assert _platforms.probe_verdict(info, script=ABORTING, cache=tmp_path) == "planted"
    entry.write_text("{not json")  # a damaged entry is probed again, and rewritten
    assert _platforms.probe_verdict(info, script=ABORTING, cache=tmp_path) == problem
    assert json.loads(entry.read_text())["problem"] == problem
    # another probe (script or source) is another verdict
    failing = _platforms.probe_verdict(info, script=FAILING, cache=tmp_path / "b")
    assert failing.endswith("clBuildProgram failed: BUILD_PROGRAM_FAILURE")
    assert _platforms.probe_verdict(info, cache=tmp_path / "b") is None


def test_probe_of_a_wrong_result_names_it(tmp_path):
    # a kernel that builds but computes something else is a problem too (the real child)
    info = _usable()
    wrong = _platforms._PROBE_SOURCE.replace("mad(v, v,", "mad(v, v + 1.0f,")
    problem = _platforms.probe_verdict(info, source=wrong, cache=tmp_path)
    assert "16-wide vector mad computed" in problem


def test_a_whole_name_beats_a_substring():
    class Named:
        def __init__(self, name):
            self.name = name

    # pocl names its device "pthread-<arch>-<cpu>"; Intel's CPU runtime just "<cpu>"
    pocl = _platforms.CLDeviceInfo(0, 0, Named("Portable Computing Language"),
                                   Named("pthread-skylake-avx512-AMD EPYC"))
    intel = _platforms.CLDeviceInfo(1, 0, Named("Intel(R) OpenCL"), Named("AMD EPYC "))
    assert _platforms._match("AMD EPYC", [pocl, intel]) is intel
    assert _platforms._match("amd epyc", [pocl, intel]) is intel
    assert _platforms._match("EPYC", [pocl, intel]) is pocl  # substrings: platform order
    assert _platforms._match("Intel", [pocl, intel]) is intel
    assert _platforms._match("1:0", [pocl, intel]) is intel


def test_env_var_selection_reaches_create_opencl_device(monkeypatch):
    from singa import device
    from singa.backend import PluginRegistry, set_registry

    target = [i for i in _platforms.enumerate_devices() if i.problem is None][-1]
    monkeypatch.setenv("SINGA_OPENCL_DEVICE", target.key)
    old = set_registry(PluginRegistry())
    try:
        dev = device.create_opencl_device()
        assert dev.name == "opencl:0" and dev.lang == "opencl"
        assert dev.info is target
        assert device.get_device("opencl:0") is dev
    finally:
        set_registry(old)


def test_env_var_without_match_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("SINGA_OPENCL_DEVICE", "no-such-device-xyz")
    with pytest.raises(DeviceUnavailableError, match="SINGA_OPENCL_DEVICE='no-such-device-xyz'"):
        _platforms.ordered_devices()
    with pytest.raises(DeviceUnavailableError):
        _platforms.probe()


def test_missing_pyopencl_names_the_install_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyopencl", None)
    monkeypatch.setattr(_platforms, "_cache", {})
    with pytest.raises(ImportError, match=r'pip install "\.\[opencl\]"'):
        _platforms.probe()


def test_build_failure_is_a_kernel_error_naming_op_and_device(cl_device):
    with pytest.raises(KernelError) as err:
        cl_device.programs.program("__kernel void broken(__global float* y) { y[0] = ; }",
                                   "MyBrokenOp")
    msg = str(err.value)
    assert "MyBrokenOp" in msg and cl_device.name in msg
    assert "error" in msg.lower()  # the compiler log is included


def test_runtime_failure_is_a_kernel_error_naming_op_and_device(cl_device):
    prg = cl_device.programs.program(
        "__kernel void fill1(__global float* y) { y[get_global_id(0)] = 1.0f; }", "MyOp")
    k = cl_device.programs.kernel(prg, "fill1")
    too_big = cl_device.max_work_group + 1
    y = to_device(np.zeros(too_big, np.float32), cl_device)

    def body(ins, outs, attrs):  # a work-group larger than the device allows: refused
        cl_device.launch(k, (too_big,), (too_big,), outs[0].buf)

    kern = make_kernel(cl_device, "MyOp", body, dtypes=(_dtype.kFloat32,))
    with pytest.raises(KernelError) as err:
        kern([], [cl_device.native(y)], {})
    assert "MyOp" in str(err.value) and cl_device.name in str(err.value)


def test_unsupported_dtype_is_rejected_by_name(cl_device):
    kern = cl_device.kernels["Exp"][0]
    assert _dtype.kInt not in kern.dtypes
    x = to_device(np.arange(3, dtype=np.int32), cl_device)
    with pytest.raises(KernelError, match="int32"):
        kern([cl_device.native(x)], [cl_device.native(x)], {})


def test_float16_is_stored_as_half_on_every_device(cl_device):
    # float16 needs no cl_khr_fp16: kernels load/store half and compute in float
    assert _dtype.kFloat16 in device_dtypes(cl_device)
    assert cl_device.has_fp16 == ("cl_khr_fp16" in cl_device.cl_device.extensions)
    from singa import _math

    x = np.linspace(-2, 2, 11).astype(np.float16)
    got = _math.exp(to_device(x, cl_device)).to_numpy()
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, np.exp(x.astype(np.float32)), rtol=1e-3)


def test_float64_is_claimed_only_with_cl_khr_fp64(cl_device):
    class NoFp64:
        has_fp64 = False

    class Fp64:
        has_fp64 = True

    assert _dtype.kDouble not in claim(NoFp64(), "Add")
    assert _dtype.kDouble in claim(Fp64(), "Add")
    assert (_dtype.kDouble in cl_device.kernels["Add"][0].dtypes) == cl_device.has_fp64
    # copies move bits, so float64 tensors can always be stored and read back
    assert _dtype.kDouble in cl_device.kernels["Copy"][0].dtypes


def test_timed_call_uses_profiling_events(cl_device):
    from singa import _math

    x = to_device(np.ones((256, 256), np.float32), cl_device)
    t = cl_device._timed_call(lambda: _math.exp(x))
    assert 0 < t < 10


def test_graph_replay_matches_eager(cl_device):
    from singa import _math

    a = to_device(np.arange(12, dtype=np.float32).reshape(3, 4), cl_device)
    b = to_device(np.ones((4, 2), np.float32), cl_device)
    eager = _math.relu(_math.matmul(a, b)).to_numpy()
    cl_device.EnableGraph(True)
    try:
        y = _math.relu(_math.matmul(a, b))
    finally:
        cl_device.EnableGraph(False)
    cl_device.RunGraph()
    cl_device.RunGraph(serial=True)
    np.testing.assert_allclose(y.to_numpy(), eager)
    cl_device.ResetGraph()
