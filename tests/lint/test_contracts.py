"""The import-linter contracts catch what they promise to (run in the ``lint`` nox session).

Each test copies the sources of every package into a temporary tree, plants one violation of
one contract, and runs ``lint-imports`` on the copy: the planted contract must be reported
broken. The untouched copy must pass, so a failure is the plant's doing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the import roots the lint session puts on PYTHONPATH (noxfile.IMPORT_ROOTS), less tools/lint
SOURCES = [*sorted((ROOT / "packages").glob("singa-*/src")), ROOT / "tests" / "plugins",
           ROOT / "examples" / "plugin-template" / "src"]

pytest.importorskip("importlinter", reason="the lint session installs import-linter")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of every package's sources, the contract config and the custom contract type."""
    for src in SOURCES:
        for pkg in src.iterdir():
            if pkg.is_dir() and (pkg / "__init__.py").exists():
                shutil.copytree(pkg, tmp_path / "src" / pkg.name,
                                ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "tools" / "lint", tmp_path / "tools")
    return tmp_path


def lint(tree: Path, contract: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(tree / "src"), str(tree / "tools")])}
    cmd = [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
           "--config", str(tree / "pyproject.toml"), "--no-cache"]
    if contract:
        cmd += ["--contract", contract]
    return subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def plant(tree: Path, module: str, code: str) -> None:
    path = tree / "src" / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    with open(path, "a") as f:
        f.write("\n\n" + code + "\n")


def test_the_repository_keeps_every_contract(tree):
    res = lint(tree)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("contract, module, code, message", [
    ("core-imports-no-plugin", "singa.tensor",
     "def _probe():\n    import singa_cpu  # noqa", "singa is not allowed to import singa_cpu"),
    ("plugins-independent", "singa_cpu.device",
     "import singa_opencl.device  # noqa", "singa_cpu is not allowed to import singa_opencl"),
    ("plugins-independent", "singa_dist",
     "from singa_cuda import plugin  # noqa", "singa_dist is not allowed to import singa_cuda"),
    ("public-surface", "singa_opencl.plugin",
     "from singa._dtype import NP_DTYPE  # noqa", "imports private singa._dtype"),
    ("public-surface", "singa_pyref.kernels",
     "from singa.ops._nn_ops import conv2d_geometry  # noqa", "imports private singa.ops._nn_ops"),
    ("core-layers", "singa.memory",
     "def _late():\n    from singa import model  # noqa", "singa.memory -> singa.model"),
    ("device-below-graph", "singa._device",
     "def _late():\n    from singa.graph import Graph  # noqa",
     "singa._device is not allowed to import singa.graph"),
    ("core-layers", "singa._device",
     "def _late():\n    from singa import graph  # noqa", "singa._device -> singa.graph"),
    ("core-layers", "singa._plugins",
     "def _late():\n    from singa import _device_api  # noqa",
     "singa._plugins -> singa._device_api"),
])
def test_a_planted_violation_breaks_its_contract(tree, contract, module, code, message):
    assert lint(tree, contract).returncode == 0  # kept before the plant
    plant(tree, module, code)
    res = lint(tree, contract)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "BROKEN" in out and message in out, out
