"""Name the rank that died: a small process per host that watches its host's ranks.

When a rank is killed (SIGKILL, the OOM killer, a segfault), MPICH's ``mpiexec`` ends the
others at once and reports only a PID. So that the failure names a rank, the communicator's
local rank 0 forks this watcher (in its own session, so the launcher's clean-up does not take
it down first). It holds a pidfd for every rank on the host and ``poll``s them: the first to
become readable is the first process that ended. A rank that ends normally first writes
``<rank>.done`` (atexit), and a rank that raises writes it after printing its own message, so
only an unexplained end is reported. Linux only (``os.pidfd_open``); elsewhere nothing runs.
"""

from __future__ import annotations

import atexit
import os
import select
import shutil
import socket
import sys
import tempfile

_DIR = None
#: seconds after the first unexplained end during which further ends are reported with it
GRACE = 1.0


def mark_done(rank: int) -> None:
    """Tell the watcher that ``rank`` ends on purpose (normal exit or reported failure)."""
    if _DIR is not None:
        try:
            with open(os.path.join(_DIR, f"{rank}.done"), "w"):
                pass
        except OSError:
            pass


def start(mpi_comm, rank: int, local_rank: int) -> None:
    """Collective over the world: every rank calls it when it creates its first world
    communicator; later calls do nothing (one watcher per host and job)."""
    global _DIR
    if _DIR is not None:
        return
    host = socket.gethostname()
    table = mpi_comm.allgather((host, os.getpid()))
    if not hasattr(os, "pidfd_open"):
        return
    _DIR = os.path.join(tempfile.gettempdir(),
                        f"singa-dist-{table[0][0]}-{table[0][1]}-{mpi_comm.Get_size()}")
    local = [(r, pid) for r, (h, pid) in enumerate(table) if h == host]
    if local_rank == 0:
        os.makedirs(_DIR, exist_ok=True)
        sys.stderr.flush()
        if os.fork() == 0:
            try:
                _watch(local, host, len(table), _DIR)
            finally:
                os._exit(0)
    mpi_comm.Barrier()
    atexit.register(mark_done, rank)


def _watch(local, host, world, folder) -> None:
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.closerange(3, 1 << 16)
    fds = {}
    for r, pid in local:
        try:
            fds[os.pidfd_open(pid)] = (r, pid)
        except OSError:
            pass
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    reported = False
    while fds:
        # Every rank found ended without finishing within GRACE seconds of the first is
        # reported: the launcher (or MPI's own error handling) stops the other ranks right
        # after the first one dies, and under load the watcher cannot tell which went first.
        ended = _collect(poller, fds, folder, None)
        if ended and not reported:
            reported = True
            ended += _collect(poller, fds, folder, GRACE)
            for r, pid in sorted(ended):
                os.write(2, (f"singa.dist: rank {r} of {world} (pid {pid} on {host}) ended "
                             "without finishing (killed by a signal or crashed); the launcher "
                             "is stopping the other ranks\n").encode())
    shutil.rmtree(folder, ignore_errors=True)


def _collect(poller, fds, folder, within):
    """Ranks (rank, pid) that ended without their ``.done`` mark: those one ``poll`` finds
    (``within`` None), or all that end in the next ``within`` seconds."""
    import time

    ended = []
    deadline = None if within is None else time.monotonic() + within
    while fds:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
        events = poller.poll(timeout)
        for fd, _ in events:
            r, pid = fds.pop(fd)
            poller.unregister(fd)
            os.close(fd)
            if not os.path.exists(os.path.join(folder, f"{r}.done")):
                ended.append((r, pid))
        if deadline is None or time.monotonic() >= deadline:
            break
    return ended
