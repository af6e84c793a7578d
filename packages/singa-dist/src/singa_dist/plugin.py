"""singa-dist's plugin module: registers the MPI and NCCL communicators."""

from __future__ import annotations

from singa.backend import BACKEND_API_VERSION, CommunicatorSpec, hookimpl

from ._stack import cuda_major, install_hint


def _create_mpi(**options):
    from .mpi import MpiCommunicator

    return MpiCommunicator(**options)


def _probe_mpi():
    from .mpi import probe

    probe()


def _create_nccl(**options):
    from .nccl import NcclCommunicator

    return NcclCommunicator(**options)


def _probe_nccl():
    from .nccl import probe

    probe()


@hookimpl
def singa_communicators():
    """Declare the ``mpi`` (mpi4py) and ``nccl`` (cupy) communicators, each with its probe,
    install hint and options.
    """
    return [
        CommunicatorSpec(name="mpi", api_version=BACKEND_API_VERSION, create=_create_mpi,
                         probe=_probe_mpi,
                         install_hint='pip install ".[dist]" in the singa checkout',
                         options={"buffSize": "fused buffer elements", "comm": "mpi4py comm"}),
        CommunicatorSpec(name="nccl", api_version=BACKEND_API_VERSION, create=_create_nccl,
                         probe=_probe_nccl,
                         install_hint=install_hint(cuda_major(load_cupy=False)),
                         options={"nccl_id": "NcclIdHolder", "local_rank": "GPU index",
                                  "world_size": "ranks", "buffSize": "fused buffer elements"}),
    ]
