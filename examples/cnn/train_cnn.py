"""Train a model of SINGA's zoo on an image dataset, with per-epoch train/validation metrics,
a checkpoint and a plot of the learning curves.

    python examples/cnn/train_cnn.py cnn digits            # no download, CPU, ~1 minute
    python examples/cnn/train_cnn.py cnn mnist --data-dir DIR -m 10
    python examples/cnn/train_cnn.py resnet cifar10 --data-dir DIR --device cuda:0

Models: cnn (28x28 input), mlp, alexnet (224), resnet (ResNet-50, 224), xceptionnet (299).
Datasets: digits (the 8x8 digits inside scikit-learn, upsampled to the model's input size),
mnist (the four idx files) and cifar10 (binary or python batches) from ``--data-dir``. Images
whose size differs from the model's input are resized (bilinear) batch by batch.

Outputs go to ``--out-dir`` (default ``examples/cnn/runs``; ``train_mpi.py``'s default is
``examples/cnn/runs/mpi``): ``<model>_<data>_checkpoint.zip`` (``Model.save_states``, rewritten
after every epoch, with the optimizer's state and the epoch), ``<model>_<data>_curves.png`` and
``<model>_<data>_history.json``; the last lines of a run say where they are.

    python examples/cnn/train_cnn.py cnn digits -m 20 \
        --resume examples/cnn/runs/cnn_digits_checkpoint.zip   # 10 more epochs
    python examples/cnn/train_cnn.py cnn digits --trace trace.json  # open in ui.perfetto.dev
    python examples/cnn/train_cnn.py cnn digits --tensorboard tb    # tensorboard --logdir tb

``--resume`` continues from a checkpoint's epoch with its weights and optimizer state; each
epoch's shuffle and device randomness are seeded by ``(--seed, epoch)``, so a run resumed after
epoch k ends bit for bit where the uninterrupted run ends, eager (``-g``) or graph mode, as
far as the kernels are deterministic: the CPU's are for a given number of threads (another
thread count groups the convolution's weight-gradient partial sums differently, and its runs
differ in the last bits).
``--trace`` writes the Chrome/Perfetto trace of the graph-mode training steps (per-op times);
``--tensorboard`` logs loss, accuracy and learning rate per step and per epoch (needs
tensorboardX: ``pip install ".[examples]"`` in the singa checkout).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from model import alexnet, cnn, resnet, xceptionnet  # the zoo next to this file
from singa import data as sdata
from singa import device, opt, tensor
from singa.errors import (
    CheckpointError,
    DeviceUnavailableError,
    ExtensionUnavailableError,
    GraphError,
)

DEFAULT_OUT_DIR = os.path.join(HERE, "runs")
MODELS = ("cnn", "mlp", "resnet", "xceptionnet", "alexnet")
DATASETS = ("digits", "mnist", "cifar10")
_ZOO = {"cnn": cnn, "resnet": resnet, "xceptionnet": xceptionnet, "alexnet": alexnet}
_PRECISION = {"float32": (tensor.float32, np.float32), "float16": (tensor.float16, np.float16)}

#: Flag defaults when the flag is not given: SINGA's (for mnist/cifar10), and for the small
#: digits set a schedule that reaches >= 95% validation accuracy in about a minute on 2 cores.
DEFAULTS = {
    "digits": {"max_epoch": 10, "batch_size": 32, "lr": 0.02},
    "mnist": {"max_epoch": 100, "batch_size": 64, "lr": 0.005},
    "cifar10": {"max_epoch": 100, "batch_size": 64, "lr": 0.005},
}


def _load_mlp_module():
    """examples/mlp/model.py, loaded by path (its name would clash with the zoo package)."""
    path = os.path.join(os.path.dirname(HERE), "mlp", "model.py")
    spec = importlib.util.spec_from_file_location("singa_example_mlp_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def create_model(name, num_channels, num_classes, data_size=None):
    """A zoo model by name (``mlp`` needs ``data_size``, the number of input features)."""
    if name == "mlp":
        return _load_mlp_module().create_model(data_size=data_size, num_classes=num_classes)
    if name not in _ZOO:
        raise ValueError(f"unknown model {name!r}; choose one of {MODELS}")
    return _ZOO[name].create_model(num_channels=num_channels, num_classes=num_classes)


def load_data(name, data_dir, image_size=None):
    """``(train_x, train_y, val_x, val_y, num_classes)`` for a dataset name.

    ``image_size`` is the model's input side; digits are upsampled straight to it.
    """
    if name == "digits":
        return (*sdata.load_digits(size=image_size or 28), 10)
    if name == "mnist":
        return (*sdata.load_mnist(data_dir), 10)
    if name == "cifar10":
        return (*sdata.load_cifar10(data_dir), 10)
    raise ValueError(f"unknown dataset {name!r}; choose one of {DATASETS}")


def partition(global_rank, world_size, train_x, train_y, val_x, val_y):
    """This rank's contiguous share of the training and validation sets."""
    def share(a, b):
        n = len(a) // world_size
        return a[global_rank * n:(global_rank + 1) * n], b[global_rank * n:(global_rank + 1) * n]

    return (*share(train_x, train_y), *share(val_x, val_y))


def augment(x, rng):
    """CIFAR augmentation: zero-pad 4, random 32x32 crop, random horizontal flip.

    (SINGA applied it to every dataset; flipping digits changes what they are, so it is used
    for cifar10 only.)
    """
    n, _, h, w = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (4, 4), (4, 4)))
    out = np.empty_like(x)
    offs = rng.integers(0, 9, size=(n, 2))
    flips = rng.random(n) < 0.5
    for i in range(n):
        dy, dx = offs[i]
        patch = padded[i, :, dy:dy + h, dx:dx + w]
        out[i] = patch[:, :, ::-1] if flips[i] else patch
    return out


@dataclass
class RunResult:
    """What :func:`run` returns: the trained model, metrics per epoch and the files written."""

    model: object
    history: dict = field(default_factory=dict)
    checkpoint: str | None = None
    plot: str | None = None
    history_file: str | None = None
    wall_time: float = 0.0
    trace: str | None = None
    tensorboard: str | None = None


def _log_softmax_loss(logits, labels):
    """Mean cross entropy of softmax(logits) against int labels, in float64."""
    z = logits.astype(np.float64)
    z -= z.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return float(-logp[np.arange(len(labels)), labels].sum())


def _prepare(x, model, rng, data_name, training):
    """A numpy batch in the model's input layout (augmented and resized as needed)."""
    if training and data_name == "cifar10":
        x = augment(x, rng)
    size = getattr(model, "input_size", None)
    if model.dimension == 4 and size is not None and x.shape[-1] != size:
        x = sdata.resize_images(x, size)
    if model.dimension == 2:
        x = x.reshape(len(x), -1)
    return x


def _train_epoch(net, tx, ty, train_x, train_y, rng, data_name, np_dtype, dist_option,
                 spars, bar, on_step=None):
    """One pass over a shuffled training set (the incomplete last batch is dropped);
    ``on_step(batch index, mean loss of the batch)`` after each step.

    Returns (sum of per-sample losses, correct predictions, samples seen).
    """
    batch_size = tx.shape[0]
    net.train()
    perm = rng.permutation(len(train_x))
    n_batch = len(train_x) // batch_size
    loss_sum, correct = 0.0, 0
    for b in range(n_batch):
        idx = perm[b * batch_size:(b + 1) * batch_size]
        x = _prepare(train_x[idx], net, rng, data_name, True)
        y = train_y[idx]
        tx.copy_from_numpy(x.astype(np_dtype, copy=False))
        ty.copy_from_numpy(y)
        out, loss = net(tx, ty, dist_option, spars)
        step_loss = float(tensor.to_numpy(loss)[0])
        loss_sum += step_loss * batch_size
        correct += int((tensor.to_numpy(out).argmax(1) == y).sum())
        if on_step is not None:
            on_step(b, step_loss)
        bar.set_postfix_str(f"loss {loss_sum / ((b + 1) * batch_size):.4f}", refresh=False)
        bar.update(1)
    bar.close()
    return loss_sum, correct, n_batch * batch_size


def _evaluate(net, tx, val_x, val_y, rng, data_name, np_dtype):
    """(sum of per-sample losses, correct predictions) over the whole validation set; the
    last batch is zero-padded to the placeholder's size and the padding ignored."""
    batch_size = tx.shape[0]
    net.eval()
    loss_sum, correct = 0.0, 0
    for start in range(0, len(val_x), batch_size):
        x = _prepare(val_x[start:start + batch_size], net, rng, data_name, False)
        y = val_y[start:start + batch_size]
        real = len(x)
        if real < batch_size:
            x = np.concatenate([x, np.zeros((batch_size - real,) + x.shape[1:], x.dtype)])
        tx.copy_from_numpy(x.astype(np_dtype, copy=False))
        logits = tensor.to_numpy(net(tx))[:real]
        loss_sum += _log_softmax_loss(logits, y)
        correct += int((logits.argmax(1) == y).sum())
    return loss_sum, correct


def run(global_rank, world_size, local_rank, max_epoch, batch_size, model, data, sgd, graph,
        verbosity, dist_option="plain", spars=None, precision="float32", *, dev=None,
        data_dir="/tmp", out_dir=DEFAULT_OUT_DIR, subset=None, progress=None, seed=0,
        quiet=False, resume=None, trace=None, tensorboard=None):
    """Train ``model`` (a name of :data:`MODELS`) on ``data`` (a name of :data:`DATASETS`).

    The positional parameters are SINGA's, so a distributed launcher can pass a ``DistOpt``
    as ``sgd``. ``dev`` is the device; None means CUDA GPU ``local_rank``, as in SINGA.
    ``subset`` keeps only the first N training images. ``resume`` is a checkpoint of an
    earlier run to continue (weights, optimizer state, epoch); ``trace`` a path for the
    Chrome/Perfetto trace of the graph-mode steps; ``tensorboard`` a folder for TensorBoard
    event files (needs tensorboardX). Returns a :class:`RunResult`.
    """
    t_start = time.perf_counter()
    say = (lambda *a, **k: None) if quiet or global_rank != 0 else print
    if trace and not graph:
        raise ValueError("--trace records the graph-mode training steps, but the graph is "
                         "disabled (-g); drop -g to write a trace")
    writer = _tensorboard_writer(tensorboard) if tensorboard and global_rank == 0 else None
    if dev is None:
        dev = device.create_cuda_gpu_on(local_rank)
    dev.SetRandSeed(seed)
    singa_dtype, np_dtype = _PRECISION[precision]

    # the model's input size first: digits are upsampled straight to it (28 for the mlp)
    image_size = getattr(create_model(model, 1, 10, data_size=1), "input_size", None) or 28
    train_x, train_y, val_x, val_y, num_classes = load_data(data, data_dir, image_size)
    if subset:
        train_x, train_y = train_x[:subset], train_y[:subset]
    if world_size > 1:
        train_x, train_y, val_x, val_y = partition(global_rank, world_size, train_x, train_y,
                                                   val_x, val_y)
    num_channels = train_x.shape[1]
    data_size = int(np.prod(train_x.shape[1:]))
    net = create_model(model, num_channels, num_classes, data_size)

    if len(train_x) < batch_size:
        raise ValueError(f"batch size {batch_size} is larger than the training set "
                         f"({len(train_x)} images); use a smaller -b")
    if net.dimension == 4:
        tx = tensor.Tensor((batch_size, num_channels, net.input_size, net.input_size), dev,
                           singa_dtype)
    else:
        tx = tensor.Tensor((batch_size, data_size), dev, singa_dtype)
    ty = tensor.Tensor((batch_size,), dev, tensor.int32)

    net.set_optimizer(sgd)
    net.compile([tx], is_train=True, use_graph=graph, sequential=False)
    dev.SetVerbosity(verbosity)
    start_epoch = _resume(net, resume, say) if resume else 0

    num_train_batch = len(train_x) // batch_size
    profiling = (dev.verbosity(), dev.skip_iteration())  # restored after the trace
    if trace:
        # profile every step after a warm-up of at most the default 5, so short runs trace too
        steps = (max_epoch - start_epoch) * num_train_batch
        dev.SetVerbosity(max(verbosity, 1))
        dev.SetSkipIteration(min(dev.skip_iteration(), max(steps - 1, 0)))
    say(f"{model} on {data}: {len(train_x)} training and {len(val_x)} validation images "
        f"{tuple(train_x.shape[1:])}, input {tuple(tx.shape[1:])}, batch {batch_size}, "
        f"{max_epoch} epochs, device {dev.name}, graph {'on' if graph else 'off'}, "
        f"{precision}")

    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.join(out_dir, f"{model}_{data}")
    ckpt = stem + "_checkpoint.zip"
    history = _earlier_history(resume, start_epoch)
    show = sys.stdout.isatty() if progress is None else progress
    lr_of = _lr_reader(sgd)

    for epoch in range(start_epoch, max_epoch):
        t0 = time.perf_counter()
        # each epoch's randomness from (seed, epoch): a resumed run draws what this one would
        seeds = np.random.SeedSequence([seed, epoch])
        rng = np.random.default_rng(seeds)
        dev.SetRandSeed(int(seeds.generate_state(1)[0]))
        on_step, lr_used = None, None
        if writer is not None:
            lr_used = [lr_of(), float("nan")]  # [the next step's rate, the last step's]

            def on_step(b, loss, base=epoch * num_train_batch, lr=lr_used):
                # the rate this step used; the optimizer has already moved to the next one
                writer.add_scalar("step/train_loss", loss, base + b + 1)
                writer.add_scalar("step/learning_rate", lr[0], base + b + 1)
                lr[1], lr[0] = lr[0], lr_of()

        # the batches of one epoch; cleared when done (leave=False), the epoch line stays
        bar = tqdm(total=num_train_batch, desc=f"epoch {epoch + 1}/{max_epoch}", unit="batch",
                   leave=False, file=sys.stdout, dynamic_ncols=True,
                   disable=not show or quiet or num_train_batch == 0)
        loss_sum, correct, n_train = _train_epoch(net, tx, ty, train_x, train_y, rng, data,
                                                  np_dtype, dist_option, spars, bar, on_step)
        val_loss, val_correct = _evaluate(net, tx, val_x, val_y, rng, data, np_dtype)
        metrics = np.array([loss_sum, correct, n_train, val_loss, val_correct,
                            len(val_x)], np.float32)
        if world_size > 1:
            metrics = _all_reduce(sgd, metrics, dev)
        train_loss, train_acc = metrics[0] / metrics[2], metrics[1] / metrics[2]
        v_loss, v_acc = metrics[3] / metrics[5], metrics[4] / metrics[5]
        elapsed = time.perf_counter() - t0
        for k, v in zip(history, (epoch + 1, train_loss, train_acc, v_loss, v_acc, elapsed)):
            history[k].append(float(v))
        if writer is not None:
            for tag, v in (("train_loss", train_loss), ("train_accuracy", train_acc),
                           ("val_loss", v_loss), ("val_accuracy", v_acc),
                           ("learning_rate", lr_used[1])):
                writer.add_scalar(f"epoch/{tag}", float(v), epoch + 1)
            writer.flush()
        say(f"epoch {epoch + 1:3d}/{max_epoch}  train loss {train_loss:.4f}  "
            f"train acc {train_acc:.4f}  val loss {v_loss:.4f}  val acc {v_acc:.4f}  "
            f"({elapsed:.1f} s)", flush=True)
        if global_rank == 0:
            net.save_states(ckpt, aux_states={
                "epoch": tensor.from_numpy(np.array([epoch + 1], np.int32))})

    result = RunResult(net, history, wall_time=time.perf_counter() - t_start)
    if writer is not None:
        writer.close()
        result.tensorboard = tensorboard
        say(f"TensorBoard logs {tensorboard} (view: tensorboard --logdir {tensorboard})")
    if trace:
        try:
            if global_rank == 0:
                dev.export_chrome_trace(trace)
                result.trace = trace
                say(f"trace {trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
        finally:
            dev.SetVerbosity(profiling[0])
            dev.SetSkipIteration(profiling[1])
    if global_rank == 0:
        result.checkpoint = ckpt
        result.history_file = stem + "_history.json"
        with open(result.history_file, "w") as fh:
            json.dump({"model": model, "data": data, "batch_size": batch_size,
                       "precision": precision, "graph": graph, **history}, fh, indent=1)
        result.plot = plot_history(history, stem + "_curves.png", f"{model} on {data}", say)
    if not quiet and global_rank == 0 and verbosity > 0:
        dev.PrintTimeProfiling()
    if resume and start_epoch >= max_epoch:
        say(f"nothing to train: the checkpoint is at epoch {start_epoch} and -m is {max_epoch}")
    if history["epoch"]:
        say(f"final validation accuracy {history['val_acc'][-1]:.4f}; "
            f"total time {result.wall_time:.1f} s; checkpoint {result.checkpoint}")
        say(f"learning curves {result.plot or '(not plotted)'}; history {result.history_file}")
    return result


def _tensorboard_writer(logdir):
    """A tensorboardX SummaryWriter for ``logdir``; names the install command if missing."""
    try:
        from tensorboardX import SummaryWriter
    except ImportError as exc:
        raise ExtensionUnavailableError(
            f"--tensorboard needs tensorboardX, which is not installed ({exc}); in the singa "
            'checkout run: pip install ".[examples]"  (or: pip install tensorboardX)') from None
    return SummaryWriter(logdir)


def _lr_reader(sgd):
    """A function returning the optimizer's current learning rate as a float (NaN when the
    optimizer does not expose one)."""
    def read():
        value = getattr(sgd, "lr_value", None)
        return float(tensor.to_numpy(value).reshape(-1)[0]) if value is not None \
            else float("nan")

    return read


def _resume(net, path, say):
    """Load weights and optimizer state from checkpoint ``path``; returns its epoch."""
    aux = net.load_states(path)
    if "epoch" not in aux:
        raise CheckpointError(f"{path} has no 'epoch' aux state, so it was not written by "
                              "train_cnn.py and cannot be resumed; load it with "
                              "model.load_states instead")
    epoch = int(tensor.to_numpy(aux["epoch"]).reshape(-1)[0])
    say(f"resumed from {path} after epoch {epoch}")
    return epoch


def _earlier_history(resume, start_epoch):
    """The first ``start_epoch`` epochs of the resumed run's history (the JSON beside its
    checkpoint), so the curves and history cover the whole run; empty lists otherwise."""
    history = {k: [] for k in ("epoch", "train_loss", "train_acc", "val_loss", "val_acc",
                               "time")}
    if not resume or not start_epoch:
        return history
    stem = os.path.splitext(resume)[0]
    path = (stem[:-len("_checkpoint")] if stem.endswith("_checkpoint") else stem) \
        + "_history.json"
    try:
        with open(path) as fh:
            earlier = json.load(fh)
    except (OSError, ValueError):
        return history
    if all(isinstance(earlier.get(k), list) and len(earlier[k]) >= start_epoch
           for k in history):
        history = {k: earlier[k][:start_epoch] for k in history}
    return history


def _all_reduce(sgd, metrics, dev):
    """Sum per-rank metrics over all ranks with the distributed optimizer."""
    t = tensor.from_numpy(metrics)
    t.to_device(dev)
    sgd.all_reduce(t.data)
    sgd.wait()
    return tensor.to_numpy(t)


def plot_history(history, path, title, say=print):
    """Loss and accuracy curves (train and validation) per epoch, as a PNG; returns the path
    (None when matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        say("matplotlib is not installed, so no plot was written (pip install matplotlib)")
        return None
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))
    ep = history["epoch"]
    ax_loss.plot(ep, history["train_loss"], "o-", label="train")
    ax_loss.plot(ep, history["val_loss"], "s-", label="validation")
    ax_loss.set(xlabel="epoch", ylabel="cross-entropy loss", title=f"{title}: loss")
    ax_acc.plot(ep, history["train_acc"], "o-", label="train")
    ax_acc.plot(ep, history["val_acc"], "s-", label="validation")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title=f"{title}: accuracy")
    for ax in (ax_loss, ax_acc):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def resolve_device(spec, device_id):
    """The device for ``--device`` and SINGA's ``-i/--device-id`` (which means cuda:<id>);
    neither: the default device (``SINGA_DEVICE``, else the CPU)."""
    if device_id is not None:
        want = f"cuda:{device_id}"
        if spec is not None and device.parse_device_string(spec) != ("cuda", device_id):
            raise SystemExit(f"--device {spec} contradicts -i {device_id} (which means {want})")
        spec = want
    return device.get_device(spec) if spec else device.get_default_device()


def build_parser():
    p = argparse.ArgumentParser(
        description="Train a CNN/MLP of SINGA's zoo on digits, MNIST or CIFAR-10",
        epilog="Defaults for -m/-b/-l depend on the dataset: " + "; ".join(
            f"{k}: -m {v['max_epoch']} -b {v['batch_size']} -l {v['lr']}"
            for k, v in DEFAULTS.items()))
    p.add_argument("model", choices=MODELS)
    p.add_argument("data", choices=DATASETS)
    p.add_argument("-p", choices=list(_PRECISION), default="float32", dest="precision",
                   help="float32 or float16")
    p.add_argument("-m", "--max-epoch", type=int, default=None, dest="max_epoch",
                   help="number of epochs")
    p.add_argument("-b", "--batch-size", type=int, default=None, dest="batch_size")
    p.add_argument("-l", "--learning-rate", type=float, default=None, dest="lr")
    p.add_argument("-i", "--device-id", type=int, default=None, dest="device_id",
                   help="CUDA device id (SINGA's flag): same as --device cuda:<id>")
    p.add_argument("--device", default=None,
                   help="cpu, opencl, cuda:0, ... (default: SINGA_DEVICE, else cpu)")
    p.add_argument("-g", "--disable-graph", action="store_false", dest="graph",
                   help="run eagerly instead of recording and replaying the graph")
    p.add_argument("-v", "--log-verbosity", type=int, default=0, dest="verbosity",
                   help="time-profiling verbosity (0: off, 1: totals, 2: per op)")
    p.add_argument("--data-dir", default="/tmp",
                   help="folder with the MNIST idx files or the CIFAR-10 batches "
                        "(default /tmp, as SINGA)")
    p.add_argument("-o", "--out-dir", default=DEFAULT_OUT_DIR,
                   help="folder for the checkpoint, plot and history (default: runs/ next "
                        "to this script)")
    p.add_argument("--subset", type=int, default=None,
                   help="use only the first N training images (quick runs)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar (default: when stdout is a terminal)")
    p.add_argument("--resume", default=None, metavar="CHECKPOINT",
                   help="continue the run that wrote CHECKPOINT (weights, optimizer state, "
                        "epoch) up to -m epochs")
    p.add_argument("--trace", default=None, metavar="PATH",
                   help="write a Chrome/Perfetto trace (JSON) of the graph-mode training "
                        "steps to PATH")
    p.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="log loss, accuracy and learning rate to TensorBoard event files in "
                        'DIR (needs tensorboardX: pip install ".[examples]")')
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.trace and not args.graph:
        parser.error("--trace records the graph-mode training steps; drop -g")
    for k, v in DEFAULTS[args.data].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    try:
        dev = resolve_device(args.device, args.device_id)
    except DeviceUnavailableError as exc:
        raise SystemExit(f"error: {exc}") from None
    sgd = opt.SGD(lr=args.lr, momentum=0.9, weight_decay=1e-5,
                  dtype=_PRECISION[args.precision][0])
    try:
        return run(0, 1, args.device_id or 0, args.max_epoch, args.batch_size, args.model,
                   args.data, sgd, args.graph, args.verbosity, precision=args.precision,
                   dev=dev, data_dir=args.data_dir, out_dir=args.out_dir, subset=args.subset,
                   progress=args.progress, seed=args.seed, resume=args.resume,
                   trace=args.trace, tensorboard=args.tensorboard)
    except (sdata.DatasetNotFoundError, CheckpointError, ExtensionUnavailableError,
            GraphError) as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
