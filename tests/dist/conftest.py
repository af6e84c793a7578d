"""Fixtures for the distributed tests, which run under ``mpiexec -n N pytest tests/dist``.

Every rank runs the same tests in the same order. Inputs are a function of (seed, rank), so
each rank computes the numpy oracle on the data of every rank without communicating. On any
failure with more than one rank the run is aborted (MPI_Abort) after the report is printed:
the other ranks would otherwise wait forever in the next collective.
"""

from __future__ import annotations

import numpy as np
import pytest

mpi4py = pytest.importorskip(
    "mpi4py", reason='mpi4py is not installed: pip install ".[dist]" in the singa checkout '
    "(mpi4py + mpich)")


@pytest.fixture(scope="session")
def comm():
    from singa import dist

    return dist.get_communicator("mpi")


@pytest.fixture
def dev(singa_device):
    return singa_device


def rank_data(seed, rank, shape, dtype):
    """The input of ``rank`` for test ``seed``: reproducible on every rank."""
    rng = np.random.default_rng([seed, rank])
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def pytest_runtest_logreport(report):
    if report.failed:
        from mpi4py import MPI

        if MPI.COMM_WORLD.Get_size() > 1:
            import sys

            sys.stderr.write(f"\n{report.longreprtext}\nrank {MPI.COMM_WORLD.Get_rank()}: "
                             f"{report.nodeid} failed; aborting every rank\n")
            sys.stderr.flush()
            MPI.COMM_WORLD.Abort(1)
