"""The README's ONNX block, as pasted after the README's training command: its Python heredoc
runs unchanged (in a folder laid out like the checkout, with a checkpoint from a short run of
the training command), writes the ONNX file where it says, and prints differences from
onnxruntime that are float32 rounding. Oracle: onnxruntime (the block's own printout)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

pytest.importorskip("sklearn")


def onnx_block() -> str:
    text = README.read_text()
    section = text.split("## ONNX", 1)[1]
    match = re.search(r"python - <<'PY'\n(.*?)\nPY\n", section, re.S)
    assert match, "the README's ONNX section has no `python - <<'PY'` block"
    return match.group(1)


def test_the_readme_onnx_block_runs_as_pasted(tmp_path):
    cnn = tmp_path / "examples" / "cnn"
    cnn.mkdir(parents=True)
    os.symlink(ROOT / "examples" / "cnn" / "model", cnn / "model")
    # the README's training command, shortened: its checkpoint where the block reads it
    train = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "cnn" / "train_cnn.py"), "cnn", "digits",
         "-m", "1", "--subset", "320", "--no-progress", "-o", str(cnn / "runs")],
        capture_output=True, text=True, timeout=600)
    assert train.returncode == 0, train.stdout[-3000:] + train.stderr[-3000:]
    assert (cnn / "runs" / "cnn_digits_checkpoint.zip").is_file(), train.stdout[-2000:]
    proc = subprocess.run([sys.executable, "-"], input=onnx_block(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (cnn / "runs" / "cnn_digits.onnx").is_file()
    assert "wrote examples/cnn/runs/cnn_digits.onnx" in proc.stdout
    diffs = [float(v) for v in re.findall(r"= ([0-9.eE+-]+)\n", proc.stdout)]
    assert len(diffs) == 2 and max(diffs) < 1e-4, proc.stdout
    assert not any(p.name.endswith(".onnx") for p in tmp_path.iterdir())  # nothing at the root
