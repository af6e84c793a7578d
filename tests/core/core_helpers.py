"""Helpers shared by the core tests: fake distributions and fresh interpreters."""

from __future__ import annotations

import importlib.metadata as md
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PLUGINS_DIR = TESTS / "plugins"


def write_dist(
    root: Path,
    name: str,
    entry_points: dict[str, str],
    version: str = "0.1",
    requires: tuple[str, ...] = (),
) -> Path:
    """Write ``<name>-<version>.dist-info`` with METADATA and a ``[singa]`` entry_points.txt."""
    norm = name.replace("-", "_")
    info = root / f"{norm}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(meta) + "\n")
    lines = ["[singa]"] + [f"{k} = {v}" for k, v in entry_points.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return info


def entry_points_in(root: Path) -> list:
    """The ``singa`` entry points of the distributions under ``root``, by distribution name."""
    dists = sorted(md.distributions(path=[str(root)]), key=lambda d: d.metadata["Name"])
    return [ep for d in dists for ep in d.entry_points if ep.group == "singa"]


def run_python(code: str, *, pythonpath=(), env=None, cwd=None, timeout=300):
    """Run ``code`` in a fresh interpreter of this venv; returns the CompletedProcess."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    full_env.pop("PYTHONPATH", None)
    if pythonpath:
        full_env["PYTHONPATH"] = os.pathsep.join(str(p) for p in pythonpath)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )
