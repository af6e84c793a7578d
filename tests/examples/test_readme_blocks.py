"""The README's conformance command as pasted (after its install part, which the install
session checks): it is valid shell, its pytest options exist, and it runs the kit on the CPU.
Here `-k` keeps it to one op (tests/backend runs the whole kit); the rest of the command line
is the README's, split by the shell's rules. Oracle: pytest's exit status and summary."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def conformance_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    lines = [ln for ln in text.splitlines() if "singa.testing.conformance" in ln
             and ln.startswith("python -m venv")]
    assert len(lines) == 1, lines
    last = lines[0].split(" && ")[-1]  # after the venv and the install
    argv = shlex.split(last)  # a shell syntax error would raise here
    assert argv[0] == "pytest", argv
    return argv


def test_the_readme_conformance_command_runs(tmp_path):
    argv = conformance_command()
    assert argv[argv.index("--singa-backend") + 1] == "cpu"
    proc = subprocess.run([sys.executable, "-m", *argv, "-q", "-p", "no:cacheprovider", "-k",
                           "test_forward and Abs"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"\b[1-9]\d* passed\b", proc.stdout), proc.stdout[-2000:]
    assert " failed" not in proc.stdout
