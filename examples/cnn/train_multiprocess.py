"""Data-parallel training with one process per GPU and NCCL (SINGA's ``train_multiprocess.py``).

    python examples/cnn/train_multiprocess.py cnn mnist --data-dir DIR -w 2

The launcher creates an NCCL unique id (``singa_dist.NcclIdHolder``) and starts ``-w``
processes with ``multiprocessing``; process ``i`` trains on GPU ``i`` with
``opt.DistOpt(sgd, nccl_id=..., local_rank=i, world_size=w)``. Flags are train_mpi.py's plus
``-w/--world-size``. Needs CUDA GPUs and, from a singa checkout, ``pip install
"./packages/singa-cuda[cuda13]" "./packages/singa-dist[cuda13]"`` (``[cuda12]`` both for a CUDA
12 driver); on machines without GPUs use ``mpiexec -n N python train_mpi.py`` (MPI
over any device). A process that fails makes the launcher stop the others and exit non-zero.
"""

from __future__ import annotations

import multiprocessing
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_cnn  # noqa: E402
import train_mpi  # noqa: E402
from singa import device, opt  # noqa: E402


def build_parser():
    p = train_mpi.build_parser()
    p.description = "Train on several GPUs of this host, one process each, with NCCL"
    p.add_argument("-w", "--world-size", type=int, default=2, dest="world_size",
                   help="number of processes (GPUs), default 2")
    return p


def _worker(args, local_rank, world_size, nccl_id):
    sgd = opt.SGD(lr=args.lr, momentum=0.9, weight_decay=1e-5,
                  dtype=train_cnn._PRECISION[args.precision][0])
    sgd = opt.DistOpt(sgd, nccl_id=nccl_id, local_rank=local_rank, world_size=world_size,
                      overlap=args.overlap)
    option = train_mpi.ALIASES.get(args.dist_option, args.dist_option)
    train_cnn.run(sgd.global_rank, sgd.world_size, sgd.local_rank, args.max_epoch,
                  args.batch_size, args.model, args.data, sgd, args.graph, args.verbosity,
                  option, args.spars, args.precision, dev=device.create_cuda_gpu_on(local_rank),
                  data_dir=args.data_dir, out_dir=args.out_dir, subset=args.subset,
                  progress=args.progress, seed=args.seed, resume=args.resume,
                  trace=args.trace, tensorboard=args.tensorboard)


def main(argv=None):
    args = build_parser().parse_args(argv)
    for k, v in train_cnn.DEFAULTS[args.data].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    try:
        from singa_dist.nccl import NcclIdHolder, probe

        probe()
        nccl_id = NcclIdHolder()
    except Exception as exc:
        raise SystemExit(
            f"error: train_multiprocess.py needs CUDA GPUs and NCCL ({type(exc).__name__}: "
            f"{exc}). On CPUs run instead: mpiexec -n 2 python examples/cnn/train_mpi.py with "
            "the same flags") from None
    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be used in forked children
    procs = [ctx.Process(target=_worker, args=(args, i, args.world_size, nccl_id),
                         name=f"rank{i}") for i in range(args.world_size)]
    for p in procs:
        p.start()
    failed = None
    while failed is None and any(p.is_alive() for p in procs):
        for p in procs:
            p.join(timeout=0.5)
            if p.exitcode not in (None, 0):
                failed = p
                break
    if failed is not None:
        for p in procs:
            if p.is_alive():
                p.terminate()
        raise SystemExit(f"error: {failed.name} exited with code {failed.exitcode}; "
                         "stopped the other processes")


if __name__ == "__main__":
    main()
