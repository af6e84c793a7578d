"""examples/cnn/train_mpi.py on 2 ranks (the README's command) and train_multiprocess.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from launch import mpiexec_or_skip, run

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN_MPI = os.path.join(ROOT, "examples", "cnn", "train_mpi.py")


def test_readme_command_reaches_95_percent_on_digits(comm, tmp_path):
    exe = mpiexec_or_skip(comm)
    rc, out, _ = run(exe, 2, [TRAIN_MPI, "cnn", "digits", "-o", str(tmp_path),
                              "--no-progress"], timeout=600)
    assert rc == 0, out
    hist = json.loads((tmp_path / "cnn_digits_history.json").read_text())
    assert hist["val_acc"][-1] >= 0.95, out
    assert out.count("final validation accuracy") == 1, out  # rank 0 reports


@pytest.mark.parametrize("option", ["half", "partial", "sparseTopK", "sparseThreshold"])
def test_every_dist_option_trains(comm, tmp_path, option):
    exe = mpiexec_or_skip(comm)
    rc, out, _ = run(exe, 2, [TRAIN_MPI, "cnn", "digits", "-d", option, "-s", "0.05",
                              "-m", "2", "--subset", "512", "-o", str(tmp_path),
                              "--no-progress"], timeout=300)
    assert rc == 0, out
    hist = json.loads((tmp_path / "cnn_digits_history.json").read_text())
    assert hist["train_loss"][-1] < hist["train_loss"][0], out  # it learns


def test_multiprocess_without_gpu_says_what_it_needs():
    try:
        from singa_dist.nccl import probe

        probe()
        pytest.skip("a GPU with NCCL is present: the error path does not apply")
    except Exception:
        pass
    script = os.path.join(ROOT, "examples", "cnn", "train_multiprocess.py")
    proc = subprocess.run([sys.executable, script, "cnn", "digits"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert "needs CUDA GPUs and NCCL" in proc.stderr and "train_mpi.py" in proc.stderr
