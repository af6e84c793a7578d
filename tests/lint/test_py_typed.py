"""Every package ships type information (PEP 561): a ``py.typed`` marker in its import package,
inside the folder its wheel is built from (hatchling ships that folder whole)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the lint session runs the default interpreter
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_the_wheel_folder_holds_py_typed(package):
    config = tomllib.loads((package / "pyproject.toml").read_text())
    folders = config["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]
    assert folders, f"{package.name}: no wheel packages configured"
    for folder in folders:
        assert (package / folder / "py.typed").is_file(), f"{package.name}: {folder}/py.typed"
