"""tools/skip_report.py: what the pytest plugin records, and the aggregation that fails on a
test every session skipped (oracle: hand-made reports whose answer is known, and a pytest run
of a small file with one test of each outcome)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("skip_report", ROOT / "tools" / "skip_report.py")
skip_report = importlib.util.module_from_spec(_spec)
sys.modules["skip_report"] = skip_report  # dataclasses look their module up while defined
_spec.loader.exec_module(skip_report)
Run = skip_report.Run


def _e(outcome, reason=None, hardware=None):
    return {"outcome": outcome, "reason": reason, "hardware": hardware}


def test_a_test_skipped_in_every_session_is_listed_with_each_reason():
    runs = [
        Run("cpu", "a", {"t.py::always": _e("skipped", "no opencl"),
                         "t.py::somewhere": _e("skipped", "needs two ranks"),
                         "t.py::runs": _e("passed")}),
        Run("dist", "b", {"t.py::always": _e("skipped", "no numba"),
                          "t.py::somewhere": _e("passed"),
                          "t.py::runs": _e("failed")}),
    ]
    s = skip_report.aggregate(runs)
    assert s.always_skipped == {"t.py::always": {"cpu": "no opencl", "dist": "no numba"}}
    assert s.reasons["cpu"] == {"no opencl": 1, "needs two ranks": 1}
    assert s.reasons["dist"] == {"no numba": 1}
    assert s.runs == {"cpu": 1, "dist": 1}
    text = skip_report.format_summary(s)
    assert "FAIL: 1 test(s)" in text and "t.py::always" in text and "no numba" in text


def test_hardware_marked_xfailed_unreached_and_empty_parametrizations_do_not_fail_it():
    runs = [
        Run("cuda", "a", {"g.py::gpu": _e("skipped", "no GPU", "nvidia gpu"),
                          "g.py::xf": _e("xfailed"),
                          "g.py::stopped": _e("not run"),
                          "g.py::kit[NOTSET]": _e("skipped", "got empty parameter set ['c']")}),
        Run("cpu", "b", {"g.py::stopped": _e("passed")}),
    ]
    s = skip_report.aggregate(runs)
    assert s.always_skipped == {}
    assert s.hardware == {"g.py::gpu": "nvidia gpu"}
    assert s.deselected == {"g.py::kit[NOTSET]": "got empty parameter set"}
    assert "OK:" in skip_report.format_summary(s)


def test_a_deselection_reason_does_not_hide_a_real_skip_elsewhere():
    onnx = 'matched exclude pattern "^test_(abs)_cpu$"'
    runs = [Run("onnx", "a", {"n.py::test_abs_cpu": _e("skipped", onnx)}),
            Run("onnx-cl", "b", {"n.py::test_abs_cpu": _e("skipped", "no device")})]
    s = skip_report.aggregate(runs)
    assert s.always_skipped == {"n.py::test_abs_cpu": {"onnx": onnx, "onnx-cl": "no device"}}


def test_the_same_test_from_two_virtual_environments_has_one_id():
    a = "../../.nox/template/lib/python3.11/site-packages/singa/testing/conformance.py::t[x]"
    b = "../.nox/dist/lib/python3.12/site-packages/singa/testing/conformance.py::t[x]"
    assert skip_report.normalize_id(a) == skip_report.normalize_id(b) == (
        "singa/testing/conformance.py::t[x]")
    runs = [Run("template", "a", {a: _e("skipped", "r")}), Run("dist", "b", {b: _e("passed")})]
    assert skip_report.aggregate(runs).always_skipped == {}


def test_no_reports_is_not_a_failure_and_says_so(tmp_path, capsys):
    assert skip_report.main([str(tmp_path / "none")]) == 0
    assert "no reports" in capsys.readouterr().out


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_the_plugin_records_each_outcome_and_the_command_fails_on_it(tmp_path, workers):
    """The same report from one process and from pytest-xdist's controller (whose workers
    collect the tests: the kit's stable id and the hardware marker come from them)."""
    if workers:
        pytest.importorskip("xdist", reason="pytest-xdist is not installed")
    (tmp_path / "test_sample.py").write_text(textwrap.dedent("""
        import pytest

        def test_ok():
            pass

        def test_skipped():
            pytest.skip("nothing to run on")

        @pytest.mark.needs_hardware("nvidia gpu")
        def test_gpu():
            pytest.skip("no GPU")

        @pytest.mark.xfail(reason="known")
        def test_xfail():
            assert False
    """))
    pkg = tmp_path / "kitpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "kit.py").write_text("import pytest\n\n@pytest.mark.parametrize('x', [1])\n"
                                "def test_shared(x):\n    pytest.skip('no kernel here')\n")
    (tmp_path / "test_imports_kit.py").write_text("from kitpkg.kit import test_shared\n")
    (tmp_path / "test_module_skip.py").write_text(
        "import pytest\npytest.skip('module needs x', allow_module_level=True)\n")
    reports = tmp_path / "reports"
    env = {**os.environ, skip_report.ENV: str(reports / "sess"), "PYTHONPATH": os.pathsep.join(
        [str(ROOT / "tools"), str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "skip_report",
                           "-p", "no:cacheprovider", *workers, str(tmp_path)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (report,) = (reports / "sess").glob("*.json")
    tests = json.loads(report.read_text())["tests"]
    assert tests["test_sample.py::test_ok"]["outcome"] == "passed"
    assert tests["test_sample.py::test_skipped"] == _e("skipped", "nothing to run on")
    assert tests["test_sample.py::test_gpu"] == _e("skipped", "no GPU", "nvidia gpu")
    assert tests["test_sample.py::test_xfail"]["outcome"] == "xfailed"
    assert tests["test_module_skip.py"] == _e("skipped", "module needs x")
    # a kit's test has its package's id, whichever test file imported it
    assert tests["kitpkg.kit::test_shared[1]"] == _e("skipped", "no kernel here")
    s = skip_report.aggregate(skip_report.load(reports))
    assert set(s.always_skipped) == {"test_sample.py::test_skipped", "test_module_skip.py",
                                     "kitpkg.kit::test_shared[1]"}
    assert s.hardware == {"test_sample.py::test_gpu": "nvidia gpu"}
    assert skip_report.main([str(reports)]) == 1
