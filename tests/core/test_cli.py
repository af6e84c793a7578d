"""``python -m singa``: the command line, run as a user runs it (a fresh interpreter).

``--help``/no command print the help and exit 0 (as pip does), ``--version`` prints
singa-core's version, an unknown command or option exits 2 with argparse's message, and
``info --json`` is the doctor's report as one JSON object: the same facts as the text report,
singa's optional packages (singa-onnx, singa-dist, ...) included.
"""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import subprocess
import sys

import pytest
from core_helpers import PLUGINS_DIR, write_dist

P = "singa_test_plugins."


def singa(*args: str, pythonpath=()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    return subprocess.run([sys.executable, "-m", "singa", *args], capture_output=True,
                          text=True, env=env, timeout=300)


def _installed(dist: str) -> str | None:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


@pytest.mark.parametrize("args", [(), ("--help",), ("-h",)])
def test_help_and_no_command_print_the_help_and_succeed(args):
    proc = singa(*args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m singa"), proc.stdout
    assert "info" in proc.stdout and "--version" in proc.stdout
    assert "python -m singa.testing --backend NAME" in proc.stdout
    assert proc.stderr == ""


def test_version():
    proc = singa("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"singa-core {md.version('singa-core')}"


def test_info_help_names_json():
    proc = singa("info", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m singa info [-h] [--json]")


@pytest.mark.parametrize(("args", "says"), [
    (("bogus",), "invalid choice: 'bogus' (choose from 'info')"),
    (("info", "--bad"), "unrecognized arguments: --bad"),
])
def test_unknown_command_or_option_is_a_usage_error(args, says):
    proc = singa(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("usage: python -m singa") and says in proc.stderr, proc.stderr


def test_info_json_is_the_text_report_as_data():
    as_json, as_text = singa("info", "--json"), singa("info")
    assert as_json.returncode == 0 and as_text.returncode == 0, as_json.stderr + as_text.stderr
    data = json.loads(as_json.stdout)
    text = as_text.stdout
    assert data["singa_core"] == md.version("singa-core")
    assert f"singa-core    {data['singa_core']}  (backend API v{data['backend_api']})" in text
    # singa's own packages, installed or not, each with its version or its install command
    packages = {p["distribution"]: p for p in data["packages"]}
    assert set(packages) == {"singa-cpu", "singa-opencl", "singa-cuda", "singa-dist",
                             "singa-onnx"}
    for dist, p in packages.items():
        assert p["version"] == _installed(dist), dist
        line = next(ln for ln in text.splitlines() if ln.startswith(f"  {dist} "))
        if p["version"] is None:
            assert "not installed" in line and p["install"] in line, line
        else:
            assert p["version"] in line and p["adds"] in line, line
    # every installed plugin and backend appears in both
    eps = {ep.name for ep in md.entry_points(group="singa")}
    assert {p["name"] for p in data["plugins"]} | set(data["skipped"]) \
        | {f["plugin"] for f in data["failures"]} == eps
    backends = text.split("\nBackends\n", 1)[1]
    for b in data["backends"]:
        assert f"  {b['name']:<8} from {b['distribution']}" in backends
        assert ("smoke: PASS" if b["smoke"]["passed"] else "smoke: FAIL") in backends
    if _installed("singa-cpu"):
        cpu = next(b for b in data["backends"] if b["name"] == "cpu")
        assert cpu["smoke"]["passed"] and cpu["devices"] >= 1 and cpu["kernels"] > 0
        assert cpu["op_dtype_pairs"]["native"] > 0
    env = {v["name"]: v for v in data["env"]}
    assert {"SINGA_DEVICE", "SINGA_LOG_LEVEL"} <= set(env)
    assert all(v["value"] is None and v["doc"] for v in env.values())  # SINGA_* unset above


def test_info_lists_singa_onnx_which_is_no_plugin():
    """singa-onnx has no entry point in the 'singa' group, yet the doctor names it: with its
    version where it is installed, else with the command that installs it."""
    data = json.loads(singa("info", "--json").stdout)
    onnx = next(p for p in data["packages"] if p["distribution"] == "singa-onnx")
    assert "singa.sonnx" in onnx["adds"] and onnx["plugins"] == []
    assert onnx["version"] == _installed("singa-onnx")
    assert onnx["install"] == 'pip install ".[onnx]" in the singa checkout'


def test_info_json_reports_a_failed_plugin(tmp_path):
    write_dist(tmp_path, "singa-broken", {"broken": P + "broken_import"})
    proc = singa("info", "--json", pythonpath=[tmp_path, PLUGINS_DIR])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (failure,) = [f for f in data["failures"] if f["plugin"] == "broken"]
    assert failure["distribution"] == "singa-broken" and failure["stage"] == "import"
    assert failure["summary"].startswith("plugin 'broken' from distribution singa-broken 0.1 "
                                         "failed at import")
    assert proc.stderr == ""  # quiet: the report says it, logging does not
