"""A rank that raises or dies makes every other rank exit non-zero within 30 s, naming it."""

from __future__ import annotations

import os

import pytest
from launch import mpiexec_or_skip, run

SCRIPT = """
import os, signal, sys, time
import numpy as np
from singa import dist, tensor
comm = dist.get_communicator("mpi")
t = tensor.from_numpy(np.ones(1000, np.float32))
comm.all_reduce(t)  # everyone is connected
if comm.rank == 1:
    time.sleep(0.5)
    if sys.argv[1] == "raise":
        raise RuntimeError("injected failure on rank 1")
    os.kill(os.getpid(), signal.SIGKILL)
# the survivors block in the next collective, which rank 1 never joins
for _ in range(10**6):
    comm.all_reduce(t)
print("survivor finished: must not happen", flush=True)
"""

BOUND = 30.0


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "fault.py"
    path.write_text(SCRIPT)
    return str(path)


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_raising_ends_every_rank(comm, script, n):
    exe = mpiexec_or_skip(comm)
    rc, out, secs = run(exe, n, [script, "raise"], timeout=BOUND + 30)
    assert rc != 0, out
    assert secs < BOUND, f"took {secs:.1f} s\n{out}"
    assert "rank 1 of" in out and "injected failure on rank 1" in out, out
    assert "must not happen" not in out


@pytest.mark.parametrize("n", [2, 3])
def test_a_rank_killed_ends_every_rank(comm, script, n):
    exe = mpiexec_or_skip(comm)
    rc, out, secs = run(exe, n, [script, "kill"], timeout=BOUND + 30)
    assert rc != 0, out
    assert secs < BOUND, f"took {secs:.1f} s\n{out}"
    # the watcher names the rank; MPICH's launcher only its PID
    assert f"rank 1 of {n}" in out and "ended without finishing" in out, out
    assert "must not happen" not in out


HOOKED = ["-c", "import singa_dist.mpi as m, sys; "
          "from singa import dist; c = dist.get_communicator('mpi'); "
          # one write per rank: print's separate writes of 'hooked', ' ' and 'False'
          # interleave between ranks
          "sys.stdout.write(f'hooked {sys.excepthook is not sys.__excepthook__}\\n'); "
          "sys.stdout.flush()"]


@pytest.mark.parametrize("value, hooked", [("1", False), ("0", True)])
def test_abort_hook_can_be_disabled_for_debugging(comm, script, value, hooked):
    exe = mpiexec_or_skip(comm)
    rc, out, secs = run(exe, 2, HOOKED, env={"SINGA_DIST_NO_ABORT_HOOK": value})
    assert rc == 0, out
    assert out.count(f"hooked {hooked}") == 2, out
    assert os.path.exists(script)


def test_a_value_the_abort_hook_switch_refuses_is_a_config_error(comm):
    # read through singa.config like every other variable: a typo is an error on every rank,
    # not a silent "off"
    exe = mpiexec_or_skip(comm)
    rc, out, secs = run(exe, 2, HOOKED, env={"SINGA_DIST_NO_ABORT_HOOK": "please"})
    assert rc != 0, out
    assert out.count("ConfigError: environment variable SINGA_DIST_NO_ABORT_HOOK='please' "
                     "is invalid") == 2, out
    assert "hooked" not in out, out
