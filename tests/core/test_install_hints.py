"""Every install hint is a command that works in a singa checkout.

The package index hosts an unrelated ``singa`` 3.0.0.dev1, so no hint may name ``singa`` or
``singa[extra]`` as a package to fetch: hints name this checkout (``pip install ".[extra]"``).
The hints that code shows (the registry's "not installed" table, every installed plugin's
``install_hint``, the doctor's package table, the testing extra's command, the CUDA probe's and
the NCCL communicator's commands) are collected and each
``pip install`` target in them is run with ``pip install --dry-run --no-deps`` from the
repository's root; the documentation and sources are scanned for the old, broken form.
"""

from __future__ import annotations

import importlib
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: ``pip install singa``, ``pip install singa[x]``, ``pip install "singa[x]"``: the index's
#: unrelated project
BROKEN = re.compile(r"""pip install\s+(?:-\S+\s+)*['"]?singa(?:\[|['"\s`]|$)""", re.M)
SCANNED = ["README.md", "SECURITY.md", "docs", "examples", "packages"]


def _texts():
    for top in SCANNED:
        path = ROOT / top
        files = [path] if path.is_file() else [
            p for p in path.rglob("*") if p.suffix in (".py", ".md", ".toml", ".txt", ".cfg")
            and ".nox" not in p.parts and "node_modules" not in p.parts]
        for f in files:
            yield f, f.read_text(encoding="utf-8", errors="replace")


def test_no_hint_names_the_index_singa():
    bad = [f"{f.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)!r}"
           for f, text in _texts() for m in BROKEN.finditer(text)]
    assert not bad, "hints that would install the index's unrelated singa:\n" + "\n".join(bad)


def _shown_hints() -> list[str]:
    """The install commands code shows to users, from every source that is importable here."""
    from singa import _doctor, _plugins
    from singa.testing import TESTING_EXTRA

    hints = [*_plugins.KNOWN_BACKENDS.values(), *_plugins.KNOWN_COMMUNICATORS.values()]
    hints += [TESTING_EXTRA, *(hint for _adds, hint in _doctor.PACKAGES.values())]
    reg = _plugins.registry()
    hints += [e.spec.install_hint for e in reg.backends.values()
              if getattr(e, "spec", None) is not None and e.spec.install_hint]
    hints += [e.spec.install_hint for e in reg.communicators.values()
              if getattr(e, "spec", None) is not None and e.spec.install_hint]
    for module, attr in (("singa_cuda._probe", "INSTALL"),
                         ("singa_opencl._platforms", "INSTALL_HINT")):
        try:
            hints.append(getattr(importlib.import_module(module), attr))
        except ImportError:
            pass
    try:
        from singa_dist._stack import install_hint

        hints += [install_hint(m) for m in ("12", "13", None)]
    except ImportError:
        pass
    return hints


def _local_targets(hint: str) -> list[str]:
    """The checkout paths a hint installs (``.``, ``".[cuda13]"``, ``./packages/x[y]``)."""
    targets = []
    for cmd in re.findall(r"pip install ([^;()]+)", hint):
        cmd = cmd.split(" in the singa checkout")[0]
        for tok in shlex.split(cmd):
            if tok.startswith("."):
                targets.append(tok)
    return targets


def test_hints_shown_by_code_name_this_checkout():
    hints = _shown_hints()
    assert hints
    for hint in hints:
        assert not BROKEN.search(hint), hint
    assert any(_local_targets(h) for h in hints)


def _extras(target: str) -> tuple[Path, set[str]]:
    m = re.fullmatch(r"([^\[]+)(?:\[([^\]]*)\])?", target)
    return ROOT / m.group(1), {e.strip() for e in (m.group(2) or "").split(",") if e.strip()}


@pytest.mark.parametrize("target", sorted({t for h in _shown_hints() for t in _local_targets(h)}))
def test_each_hinted_target_installs(target):
    """``pip install --dry-run --no-deps TARGET`` from the checkout's root succeeds, and the
    folder's project has every extra the hint names (pip does not report a missing extra, so
    the extras are read from the project's pyproject.toml too)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the TOML reader pip vendors
        from pip._vendor import tomli as tomllib

    path, extras = _extras(target)
    meta = tomllib.loads((path / "pyproject.toml").read_text())["project"]
    missing = extras - set(meta.get("optional-dependencies", {}))
    assert not missing, f"{target}: {meta['name']} has no extra {sorted(missing)}"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps",
                           "-q", "--disable-pip-version-check", target],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
