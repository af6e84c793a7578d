"""Ranks that never meet at a check end the job with a message instead of hanging.

A collective on one rank against a put/get on the other, and a rank that is still busy (or
never calls), used to block every rank forever (the agreement check of a collective and the
exchange of a put/get never matched). With ``SINGA_DIST_TIMEOUT`` a rank that waited that many
seconds prints the call and the fix and aborts the job (MPI_Abort: every rank ends non-zero).
Oracle: the exit status, the time taken, the message.
"""

from __future__ import annotations

import pytest
from launch import mpiexec_or_skip, run

SCRIPT = """
import sys, time
import numpy as np
from singa import dist, tensor
comm = dist.get_communicator("mpi")
t = tensor.from_numpy(np.ones(4, np.float32))
comm.all_reduce(t)  # connected, and a matched check passes
case = sys.argv[1]
if case == "collective-vs-put":
    if comm.rank == 0:
        comm.all_reduce(t)
    else:
        comm.put(t, 0)
elif case == "get-vs-all-gather":
    if comm.rank == 0:
        comm.get(t, 1)
    else:
        comm.all_gather(t)
elif case == "busy-rank":
    if comm.rank == 1:
        time.sleep(20)  # still working: rank 0 gives up first
    comm.all_reduce(t)
print(f"rank {comm.rank} finished: must not happen", flush=True)
"""


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "timeouts.py"
    path.write_text(SCRIPT)
    return str(path)


@pytest.mark.parametrize("case", ["collective-vs-put", "get-vs-all-gather"])
def test_a_collective_against_a_put_or_get_times_out_on_both_ranks(comm, script, case):
    exe = mpiexec_or_skip(comm)
    rc, out, secs = run(exe, 2, [script, case], timeout=90, env={"SINGA_DIST_TIMEOUT": "2"})
    assert rc != 0, out
    assert secs < 40, f"took {secs:.1f} s\n{out}"
    assert "must not happen" not in out, out
    # at least the rank that reports first; usually both (the abort may cut the second)
    assert "waited 2 s (SINGA_DIST_TIMEOUT)" in out, out
    assert "same calls in the same order" in out and "Aborting all 2 ranks" in out, out


def test_a_busy_rank_makes_the_waiting_rank_raise(comm, script):
    exe = mpiexec_or_skip(comm)
    rc, out, secs = run(exe, 2, [script, "busy-rank"], timeout=90,
                        env={"SINGA_DIST_TIMEOUT": "2"})
    assert rc != 0, out
    assert secs < 18, f"took {secs:.1f} s: rank 0 did not give up before rank 1 woke\n{out}"
    assert "singa.dist: all_reduce: rank 0 of 2 waited 2 s" in out, out
    assert "some of the 2 ranks did not reach it" in out, out


def test_the_timeout_is_validated():
    import os

    from singa import config

    old = os.environ.get("SINGA_DIST_TIMEOUT")
    try:
        for bad in ("-1", "nan", "inf", "soon"):
            os.environ["SINGA_DIST_TIMEOUT"] = bad
            with pytest.raises(ValueError, match="SINGA_DIST_TIMEOUT"):
                config.get("SINGA_DIST_TIMEOUT")
        os.environ["SINGA_DIST_TIMEOUT"] = "0"
        assert config.get("SINGA_DIST_TIMEOUT") == 0.0
    finally:
        if old is None:
            os.environ.pop("SINGA_DIST_TIMEOUT", None)
        else:
            os.environ["SINGA_DIST_TIMEOUT"] = old
