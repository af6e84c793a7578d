"""SINGA's distributed training: communicators over MPI (mpi4py) and NCCL (cupy).

Install with ``pip install ".[dist]"`` in the singa checkout (mpi4py and the mpich wheel). The
communicators register through the ``singa_communicators`` hook (entry point
``singa_dist.plugin``); use them through :func:`singa.dist.get_communicator` and
:class:`singa.opt.DistOpt`.
"""

from __future__ import annotations

__all__ = ["MpiCommunicator", "NcclCommunicator", "NcclIdHolder"]


def __getattr__(name):
    # lazy: importing singa_dist must not load MPI or cupy
    if name == "MpiCommunicator":
        from .mpi import MpiCommunicator

        return MpiCommunicator
    if name in ("NcclCommunicator", "NcclIdHolder"):
        from . import nccl

        return getattr(nccl, name)
    if name == "DistOpt":
        from singa.opt import DistOpt

        return DistOpt
    raise AttributeError(f"module 'singa_dist' has no attribute {name!r}")
