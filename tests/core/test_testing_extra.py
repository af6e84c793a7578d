"""Without the ``testing`` extra (pytest, hypothesis), the conformance commands name the extra
and the command that installs it, and what needs neither keeps working.

Each test runs the real command in a virtual environment that sees this one's packages except
the hidden ones (symlinks of site-packages, so editable installs and entry points carry over):
hypothesis, or pytest too, is then really absent. The install command itself is checked by
test_install_hints.py (``singa.testing.TESTING_EXTRA`` is among the hints it runs).
"""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from singa.testing import TESTING_EXTRA

ROOT = Path(__file__).resolve().parents[2]
HINT = 'install the testing extra (pytest and hypothesis) with: ' + TESTING_EXTRA


def _view(dst: Path, hidden: tuple[str, ...]) -> Path:
    """A venv at ``dst`` whose site-packages links every entry of this interpreter's but the
    ``hidden`` top-level names (with their dist-info and ``_name`` helper modules); its
    python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dst)], check=True,
                   capture_output=True, timeout=120)
    python = dst / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    hide = tuple(h.lower() for h in hidden) + tuple("_" + h.lower() for h in hidden)
    for src in dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")):
        for entry in Path(src).iterdir():
            name = entry.name.lower()
            if name.startswith(hide) or (site / entry.name).exists():
                continue
            (site / entry.name).symlink_to(entry)
    return python


def _run(python: Path, *args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SINGA_", "PYTEST_"))}
    env.pop("PYTHONPATH", None)
    return subprocess.run([str(python), *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=300)


@pytest.fixture(scope="module")
def no_hypothesis(tmp_path_factory):
    python = _view(tmp_path_factory.mktemp("venv") / "v", ("hypothesis",))
    probe = _run(python, "-c", "import pytest, singa; import hypothesis", cwd=ROOT)
    assert "No module named 'hypothesis'" in probe.stderr, probe.stderr  # the view works
    return python


@pytest.fixture(scope="module")
def no_testing_extra(tmp_path_factory):
    return _view(tmp_path_factory.mktemp("venv") / "v", ("hypothesis", "pytest"))


def test_report_command_names_the_extra(no_hypothesis, tmp_path):
    proc = _run(no_hypothesis, "-m", "singa.testing", "--backend", "cpu", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == (f"python -m singa.testing: running the kit needs hypothesis, which "
                           f"is not installed here: {HINT} (or classify from the kernel table "
                           "only, with --no-run)\n")


def test_report_command_names_both_missing_modules(no_testing_extra, tmp_path):
    proc = _run(no_testing_extra, "-m", "singa.testing", "--backend", "cpu", cwd=tmp_path)
    assert proc.returncode == 2
    assert "needs pytest and hypothesis, which are not installed here" in proc.stderr
    assert HINT in proc.stderr


@pytest.mark.parametrize("where", ["elsewhere", "checkout"])
def test_conformance_pytest_command_names_the_extra(no_hypothesis, tmp_path, where):
    """From any folder (a plugin's own repository) and from the checkout's root, where
    tests/conftest.py loads first (the README's command)."""
    cwd = ROOT if where == "checkout" else tmp_path
    proc = _run(no_hypothesis, "-m", "pytest", "--pyargs", "singa.testing.conformance",
                "--singa-backend", "cpu", "-p", "no:cacheprovider", cwd=cwd)
    # pytest's exit status: 4 when a conftest fails to load, 2 for a collection error
    assert proc.returncode == (4 if where == "checkout" else 2), proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    what = "singa's test suite" if where == "checkout" else "singa.testing.conformance"
    assert f"ModuleNotFoundError: {what} needs hypothesis, which is not installed here: " \
        f"{HINT}" in out, out


@pytest.mark.skipif(not any(d.metadata["Name"] == "singa-cpu" for d in md.distributions()),
                    reason="needs the CPU backend (singa-cpu)")
def test_what_needs_no_extra_still_works(no_testing_extra, tmp_path):
    """The doctor counts kernels and ``--no-run`` classifies them without pytest."""
    info = _run(no_testing_extra, "-m", "singa", "info", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert "ModuleNotFoundError" not in info.stdout, info.stdout
    assert "op/dtype pairs:" in info.stdout and "smoke: PASS" in info.stdout
    table = _run(no_testing_extra, "-m", "singa.testing", "--backend", "cpu", "--no-run",
                 cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert table.stdout.splitlines()[-1].startswith("summary: cpu: ")
