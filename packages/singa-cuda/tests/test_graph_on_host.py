"""Graph mode over the CUDA backend's whole kernel table, without a GPU: on the ``cudafull``
test backend (the shared kernels plus every CUDA C kernel built for the CPU, the fused
convolutions running the shared Conv2d where the GPU runs cuDNN's), the repository's
graph-equivalence tests train the seed CNN, a residual block and the other cases eagerly and
as graphs, with fusion on and off: the scheduler picks ``Conv2d+ReLU+Pooling2d`` and
``Pooling2dBackward+ReLUBackward`` from this table and every loss and parameter is bitwise what
the unfused graph gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TEST_BACKEND_PATHS
from hostcu import compiler

ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "tests" / "nn" / "test_graph_equivalence.py"


@pytest.mark.skipif(compiler() is None, reason="no C++ compiler (g++) to build the .cu kernels")
@pytest.mark.skipif(not SUITE.is_file(), reason=f"the repository's {SUITE} is not here")
def test_graph_equivalence_on_the_cuda_table():
    env = {**os.environ, "SINGA_DEVICE": "cudafull", "PYTHONPATH": os.pathsep.join(
        TEST_BACKEND_PATHS + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                              if p])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(SUITE), "--singa-backend", "cudafull", "-q",
         "-p", "no:cacheprovider"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]
