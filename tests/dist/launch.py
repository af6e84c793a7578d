"""Run a script under ``mpiexec -n N`` from a single-process test (never from inside a rank)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest


def mpiexec_or_skip(comm):
    if comm.world_size > 1:
        pytest.skip("launches its own mpiexec: run this file without mpiexec")
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which(
        "mpiexec")
    if exe is None:
        pytest.skip('no mpiexec: pip install ".[dist]" in the singa checkout (the mpich wheel '
                    "provides it)")
    return exe


def run(exe, n, args, timeout=120, env=None):
    """``(returncode, stdout + stderr, seconds)`` of ``mpiexec -n n python args...``."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("PMI_", "PMIX_", "MPIR_", "HYDRA_", "OMPI_"))}
    clean.update(env or {})
    t0 = time.monotonic()
    proc = subprocess.run([exe, "-n", str(n), sys.executable, *args], capture_output=True,
                          text=True, timeout=timeout, env=clean)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - t0
