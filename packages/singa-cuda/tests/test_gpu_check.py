"""tools/gpu_check.py, the one command that verifies a GPU node: its judges read the output of
each step as intended, it installs only the wheels this Python can use, and, on a machine
without a GPU, it installs singa from freshly built wheels and reports each step as failed with
the probe's reason (a JSON report, a log, one summary line per step, exit status 1)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from singa_cuda._probe import explain, facts

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check"] = gpu_check  # dataclasses look their module up while being defined
_spec.loader.exec_module(gpu_check)


def test_pytest_judge():
    ok, summary, data = gpu_check.judge_pytest(1, "..F.\nFAILED a.py::t - boom\n"
                                                  "==== 1 failed, 3 passed in 2.0s ====\n")
    assert not ok and summary.startswith("1 failed, 3 passed") and "a.py::t" in summary
    assert data["failed"] == ["FAILED a.py::t - boom"]
    ok, summary, _ = gpu_check.judge_pytest(0, "====== 1553 passed, 1 skipped in 47s ======\n")
    assert ok and summary == "1553 passed, 1 skipped in 47s"
    assert not gpu_check.judge_pytest(1, "==== 5 passed ====\n")[0]  # exit status counts


def test_pytest_judge_of_a_gpu_step_fails_when_the_stack_was_missing():
    legit = ("SKIPPED [1] tests/dist/test_nccl.py:61: NCCL's library is installed: "
             "cupy.cuda.nccl is the real module\n==== 12 passed, 1 skipped in 9s ====\n")
    assert gpu_check.judge_pytest_ran(0, legit)[:2] == (True, "12 passed, 1 skipped in 9s")
    for reason in ("tests/dist/test_nccl.py:84: NCCL communicator not runnable here (boom)",
                   "tests/dist/conftest.py:14: mpi4py is not installed: pip install x"):
        out = f"SKIPPED [7] {reason}\n==== 5 passed, 7 skipped in 1s ====\n"
        ok, summary, data = gpu_check.judge_pytest_ran(0, out)
        assert not ok and reason in summary and data["skipped"]


def test_doctor_judge():
    out = ("Plugins\n...\nBackends\n  cuda     from singa-cuda 0.1.0; API ok; 1 device(s)\n"
           "           smoke: PASS - cuda:0: Add, Matmul and host copies match numpy\n"
           "  cpu      from singa-cpu 0.1.0\n           smoke: FAIL - broken\n")
    ok, summary, _ = gpu_check.judge_doctor(0, out)
    assert ok and summary.startswith("smoke: PASS - cuda:0")
    ok, summary, _ = gpu_check.judge_doctor(0, out.replace("PASS - cuda", "FAIL - cuda"))
    assert not ok  # the cpu line's smoke result is not the cuda one's
    assert not gpu_check.judge_doctor(0, "Backends\n  cpu  x\n")[0]


def test_cnn_judge():
    assert gpu_check.judge_cnn(0, "final validation accuracy 0.9694; ...")[:2] == (
        True, "validation accuracy 0.9694 (target >= 0.95)")
    assert not gpu_check.judge_cnn(0, "final validation accuracy 0.9411; ...")[0]
    assert not gpu_check.judge_cnn(1, "final validation accuracy 0.99")[0]
    assert not gpu_check.judge_cnn(0, "Traceback ...")[0]


def test_bench_judges(tmp_path):
    path = tmp_path / "bench.json"
    out = "model batch ...\ncnn 64 0.009 0.0024 0.0017 5.3 1.4 3.8 g1.2\n"

    def write(states):
        path.write_text(json.dumps({"models": {
            name: ({"cuda_graphs": s} if s is not None else {}) for name, s in states.items()}}))

    write({"cnn": None, "resnet18": None})
    assert gpu_check.judge_bench(path)(0, out)[:2] == (True, "cnn 64 0.009 0.0024 0.0017 5.3 "
                                                            "1.4 3.8 g1.2")
    assert not gpu_check.judge_bench(path)(1, out)[0]
    captured = gpu_check.judge_bench(path, captured=True)
    assert not captured(0, out)[0]  # the stage never ran: no record of a capture
    write({"cnn": ["captured", "captured"], "resnet18": ["captured", "captured"]})
    assert captured(0, out)[0]
    write({"cnn": ["captured", "captured"], "resnet18": ["captured", "failed"]})
    ok, summary, _ = captured(0, out)
    assert not ok and "not captured: {'resnet18': ['captured', 'failed']}" in summary
    path.unlink()
    assert not captured(0, out)[0]


def test_only_wheels_for_this_python_are_installed(tmp_path):
    names = ["singa_core-0.1.0-py3-none-any.whl",
             "nvidia_cudnn_frontend-1.32.0-cp399-cp399-manylinux_2_28_x86_64.whl"]
    ok, other = gpu_check._wheels_for_this_python([tmp_path / n for n in names])
    assert [w.name for w in ok] == names[:1] and [w.name for w in other] == names[1:]


needs_no_gpu = pytest.mark.skipif(explain(facts()) is None,
                                  reason="a usable CUDA GPU is present: the steps would pass")


@needs_no_gpu
def test_without_a_gpu_every_step_fails_with_the_reason(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(wheels), *(str(ROOT / "packages" / p)
                              for p in ("singa-core", "singa-cpu", "singa-cuda"))],
        capture_output=True, text=True, timeout=600)
    if build.returncode != 0 and "hatchling" in build.stderr:
        build = subprocess.run(  # hatchling not in this environment: let pip fetch it
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels),
             *(str(ROOT / "packages" / p) for p in ("singa-core", "singa-cpu", "singa-cuda"))],
            capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gpu_check.py"), "--wheels", str(wheels),
         "--out", str(out), "--site", str(tmp_path / "site"), "--only", "versions,doctor,cudnn"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("install") and "3 wheels" in lines[0], lines
    report = json.loads((out / "gpu_check.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert list(steps) == ["versions", "doctor", "cudnn"]
    assert all(s["status"] == "fail" for s in steps.values()), steps
    reason = explain(facts()).detail
    assert "smoke: FAIL" in steps["doctor"]["summary"]
    assert reason.split(" (")[0] in steps["cudnn"]["tail"]  # the probe's reason reaches the user
    # the installed wheels, not this environment's singa, ran
    assert str(tmp_path / "site") in (out / "gpu_check.log").read_text()
    assert lines[-1].startswith("gpu_check: 0/3 steps passed")
