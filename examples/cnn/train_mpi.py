"""Data-parallel training of train_cnn.py's models with MPI (SINGA's ``train_mpi.py``).

    mpiexec -n 2 python examples/cnn/train_mpi.py cnn digits          # ~1 minute on 2 cores
    mpiexec -n 4 python examples/cnn/train_mpi.py resnet cifar10 --data-dir DIR -d half
    srun -n 8 python examples/cnn/train_mpi.py cnn mnist --data-dir DIR   # Slurm, see docs/dist.md

Each rank trains on its shard of the data (``partition``) with ``opt.DistOpt`` around SGD;
metrics are summed over the ranks, and rank 0 prints and writes the checkpoint. The flags are
train_cnn.py's plus SINGA's ``-d/--dist-option`` (plain, half, partialUpdate, sparseTopK,
sparseThreshold; ``partial`` and ``sparse`` are accepted for partialUpdate and sparseTopK) and
``-s/--sparsification`` (the threshold or the top-K fraction). Needs ``pip install ".[dist]"``
in the singa checkout (mpi4py and the mpich wheel: ``mpiexec`` is then in the venv).
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import train_cnn  # noqa: E402
from model._update import DIST_OPTIONS  # noqa: E402
from singa import opt  # noqa: E402
from singa.errors import DeviceUnavailableError  # noqa: E402

ALIASES = {"partial": "partialUpdate", "sparse": "sparseTopK"}
MPI_OUT_DIR = os.path.join(train_cnn.DEFAULT_OUT_DIR, "mpi")


def build_parser():
    p = train_cnn.build_parser()
    p.description = "Train a CNN/MLP of SINGA's zoo on several MPI ranks with DistOpt"
    p.add_argument("-d", "--dist-option", default="plain",
                   choices=list(DIST_OPTIONS) + list(ALIASES),
                   help="how gradients are synchronised (default plain)")
    p.add_argument("-s", "--sparsification", type=float, default=0.05, dest="spars",
                   help="sparse modes: |g| threshold (sparseThreshold) or kept fraction "
                        "(sparseTopK); default 0.05")
    p.add_argument("--no-overlap", action="store_false", dest="overlap",
                   help="all-reduce gradients after backward instead of during it")
    # its own run folder: never overwrites a single-process run's checkpoint
    p.set_defaults(out_dir=MPI_OUT_DIR)
    return p


def main(argv=None, communicator=None):
    args = build_parser().parse_args(argv)
    for k, v in train_cnn.DEFAULTS[args.data].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    option = ALIASES.get(args.dist_option, args.dist_option)
    try:
        sgd = opt.SGD(lr=args.lr, momentum=0.9, weight_decay=1e-5,
                      dtype=train_cnn._PRECISION[args.precision][0])
        sgd = opt.DistOpt(sgd, communicator=communicator, overlap=args.overlap)
        dev = train_cnn.resolve_device(args.device, args.device_id)
    except DeviceUnavailableError as exc:
        raise SystemExit(f"error: {exc}") from None
    return train_cnn.run(sgd.global_rank, sgd.world_size, sgd.local_rank, args.max_epoch,
                         args.batch_size, args.model, args.data, sgd, args.graph,
                         args.verbosity, option, args.spars, args.precision, dev=dev,
                         data_dir=args.data_dir, out_dir=args.out_dir, subset=args.subset,
                         progress=args.progress, seed=args.seed, resume=args.resume,
                         trace=args.trace, tensorboard=args.tensorboard)


if __name__ == "__main__":
    main()
