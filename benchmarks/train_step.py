"""Seconds per training step: SINGA (eager and graph) vs PyTorch, side by side in one run.

    python benchmarks/train_step.py [--models mlp cnn resnet18 transformer lstm] [--reps 3]
        [--device cpu] [--batch N | MODEL=N ...] [--steps N | MODEL=N ...] [--json PATH]
        [--profile | --profile-shapes]

Same model, same SGD (momentum 0.9, weight decay 1e-5), same batch, threads = cores, and the
same device: ``--device cuda:N`` runs PyTorch on ``cuda:N`` too (a device PyTorch has no
backend for, such as ``opencl:0``, leaves it on the CPU; the header says so). Each measurement
is a fresh process that warms up and then times a block of steps; the three configurations
(SINGA eager, SINGA graph, PyTorch) alternate, ``--reps`` times each, so that load changes on
the shared machine hit all of them alike, and no process's idle threads (OpenBLAS, OpenMP)
spin against another's. The report is the median step time of each and the ratios. Targets
(ratios to PyTorch, issue 31): eager <= 1.5 and graph <= 1.0 for mlp, cnn and resnet18 (the
target column shows ``e1.5 g1.0``); graph <= 1.2 for transformer and lstm (``g1.2``).

The transformer and the LSTM start from the same weights in SINGA and PyTorch, so every
process's first loss must agree (relative ``FIRST_LOSS_RTOL``): the run stops with an error
when SINGA's first loss (eager or graph) differs from PyTorch's or eager's from graph's.
``--profile`` has each graph worker time every node of a few more replays (the device's
profiler, ``SetVerbosity(2)``) and prints the time per op, summed over its nodes, largest
first; ``--profile-shapes``, per op and operand shapes (see _profile.py).

``--batch`` and ``--steps`` take either one number for every model or ``MODEL=N`` pairs for
some (``--batch resnet18=128`` is the CIFAR ResNet-18 at batch 128, the others at their
defaults). ``--json PATH`` also writes the results (per model: batch, steps, median seconds
and peak bytes per configuration, ratios; the device, PyTorch's version and the CUDA device
name PyTorch reports), rewritten after each model so that a run cut short keeps the models it
finished. A worker process that fails stops the run: its stderr tail is printed, the JSON
gets an ``error``, and the exit status is 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = {"mlp": 64, "cnn": 64, "resnet18": 32, "transformer": 32, "lstm": 32}
STEPS = {"mlp": 40, "cnn": 20, "resnet18": 5, "transformer": 10, "lstm": 5}
# A GPU step takes milliseconds, so a block of 5 would time little more than launch jitter.
STEPS_BY_BACKEND = {"cpu": STEPS, "cuda": {"mlp": 40, "cnn": 20, "resnet18": 20,
                                           "transformer": 20, "lstm": 20}}
TARGET = {"mlp": 1.5, "cnn": 1.5, "resnet18": 1.5}  # eager / torch
GRAPH_TARGET = {"mlp": 1.0, "cnn": 1.0, "resnet18": 1.0, "transformer": 1.2,
                "lstm": 1.2}  # graph / torch
# Models whose initial weights both frameworks share (so their first losses must agree).
SHARED_INIT = ("transformer", "lstm")
# float32 sums in different orders (SINGA's kernels, PyTorch's fused attention and LSTM
# cell) differ by about 1e-7 relative at the first loss; a misplaced weight moves it by 1e-3
# or more.
FIRST_LOSS_RTOL = 1e-5
PROFILE_RUNS = 3


def backend_of(device_name):
    """``"cuda:1"`` -> ``"cuda"``."""
    return device_name.strip().lower().partition(":")[0]


def torch_device_name(device_name):
    """The PyTorch device for SINGA's ``device_name``: ``cuda[:N]`` -> ``cuda:N`` (``cuda`` is
    SINGA's GPU 0, so it is named explicitly); ``cpu`` for the rest, PyTorch having no backend
    for SINGA's others (``opencl``)."""
    name, _, index = device_name.strip().lower().partition(":")
    return f"cuda:{int(index or 0)}" if name == "cuda" else "cpu"


def singa_trainer(name, use_graph, device_name, batch_size, profile_shapes=False):
    sys.path.insert(0, HERE)
    import _models
    from singa import device, tensor

    dev = device.get_device(device_name)
    x, y = _models.batch(name, batch_size)
    m = _models.singa_model(name)
    tx = tensor.Tensor(x.shape, dev, tensor.int32 if x.dtype == "int32" else tensor.float32)
    ty = tensor.Tensor(y.shape, dev, tensor.int32)
    m.compile([tx], is_train=True, use_graph=use_graph, sequential=False)
    if name in SHARED_INIT:
        _models.load_singa(name, m)

    def step():
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        _out, loss = m(tx, ty)
        return float(tensor.to_numpy(loss)[0])  # forces completion on async devices

    # The worker reads the pool's peak (tensors only) over the timed steps.
    step.reset_peak = dev.reset_peak_memory_stats
    step.peak_bytes = lambda: dev.memory_stats()["peak_bytes"]
    step.profile = (lambda: graph_profile(dev, step, shapes=profile_shapes)) if use_graph \
        else None

    def final_info():
        """Whether a CUDA GPU's graph ran as captured CUDA graphs (SINGA_CUDA_GRAPHS)."""
        plan = m._graph.plan if use_graph and m._graph is not None else None
        record = plan.extras.get("cuda.graphs") if plan is not None else None
        return {} if record is None else {"cuda_graphs": record.state,
                                          "cuda_graphs_why": getattr(record, "why", "")}

    step.final_info = final_info
    return step


def graph_profile(dev, step, runs=PROFILE_RUNS, shapes=False):
    """[op, ms per step, nodes] of the last ``runs`` graph replays, by op (and operand shapes
    when ``shapes``), largest first, from the device's per-node profile (``SetVerbosity(2)``;
    see _profile.node_times)."""
    import _profile

    dev.SetVerbosity(2)
    dev.SetSkipIteration(0)
    try:
        for _ in range(runs):
            step()
        return _profile.node_times(dev._last_run_graph, shapes=shapes)
    finally:
        dev.SetVerbosity(0)


def torch_trainer(name, device_name, batch_size):
    sys.path.insert(0, HERE)
    import _models
    import torch

    torch.set_num_threads(int(os.environ.get("SINGA_BENCH_THREADS", os.cpu_count())))
    dev = torch.device(torch_device_name(device_name))
    x, y = _models.batch(name, batch_size)
    net, sgd = _models.torch_model(name, dev)
    hx, hy = torch.from_numpy(x), torch.from_numpy(y.astype("int64"))
    tx, ty = hx.to(dev), hy.to(dev)  # on the CPU these are hx and hy themselves
    staged = dev.type != "cpu"
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        if staged:  # SINGA's step copies the batch in from host memory; so does this one
            tx.copy_(hx)
            ty.copy_(hy)
        sgd.zero_grad()
        loss = lossf(net(tx), ty)
        loss.backward()
        sgd.step()
        return loss.item()  # waits for the device, as SINGA's step does

    step.reset_peak = step.peak_bytes = step.profile = None
    step.info = {"torch_device": str(dev), "cuda_device_name": None}
    if dev.type == "cuda":
        # The caching allocator's peak of live tensor bytes: the same quantity as SINGA's
        # pool peak, so the memory line compares like with like.
        step.reset_peak = lambda: torch.cuda.reset_peak_memory_stats(dev)
        step.peak_bytes = lambda: torch.cuda.max_memory_allocated(dev)
        step.info["cuda_device_name"] = torch.cuda.get_device_name(dev)
    return step


def worker(config, name, device_name, batch_size, steps, warmup, clock=time.perf_counter,
           profile=False, profile_shapes=False):
    """Run in a fresh process: time ``steps`` steps after ``warmup``, print them as JSON
    (with the first step's loss, and the graph's op profile when ``profile``: by op, or by op
    and operand shapes when ``profile_shapes``)."""
    step = torch_trainer(name, device_name, batch_size) if config == "torch" else \
        singa_trainer(name, config == "graph", device_name, batch_size, profile_shapes)
    first_loss = None
    for _ in range(warmup):
        loss = step()
        first_loss = loss if first_loss is None else first_loss
    if step.reset_peak is not None:
        step.reset_peak()
    times = []
    for _ in range(steps):
        t0 = clock()
        loss = step()
        times.append(clock() - t0)
        first_loss = loss if first_loss is None else first_loss
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    pool = step.peak_bytes() if step.peak_bytes is not None else None
    out = {"times": times, "rss": peak_rss, "pool": pool, "first_loss": first_loss}
    if profile and step.profile is not None:
        out["profile"] = step.profile()
    out.update(getattr(step, "info", {}))
    if getattr(step, "final_info", None) is not None:
        out.update(step.final_info())
    print(json.dumps(out))


class WorkerFailed(Exception):
    """A worker process exited non-zero or printed no result; ``stderr`` is what it wrote."""

    def __init__(self, message, stderr):
        super().__init__(message)
        self.stderr = stderr


def run_config(config, name, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", config, "--models", name,
           "--device", args.device, "--warmup", str(args.warmup), "--clock", args.clock,
           "--batch", str(args.batch[name]), "--steps", str(args.steps[name])]
    if args.profile and config == "graph":
        cmd.append("--profile")
        if args.profile_shapes:
            cmd.append("--profile-shapes")
    env = dict(os.environ)
    if args.threads:  # numpy's BLAS (and so our kernel threads) and torch's intra-op threads
        env.update(OPENBLAS_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
                   SINGA_BENCH_THREADS=str(args.threads))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    what = f"the {config} worker for {name} (batch {args.batch[name]}) on {args.device}"
    if proc.returncode != 0:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")
        raise WorkerFailed(f"{what} {how}", proc.stderr)
    lines = proc.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise WorkerFailed(f"{what} printed no result line (stdout ends {lines[-1:]!r})",
                           proc.stderr) from None


def first_loss_mismatch(name, losses, rtol=FIRST_LOSS_RTOL):
    """None, or why the first losses ({config: [one per process]}) of a model with shared
    initial weights disagree: SINGA's (eager, graph) against PyTorch's, or against each
    other without PyTorch."""
    flat = [(c, v) for c, vs in losses.items() for v in vs]
    ref_c, ref = next(((c, v) for c, v in flat if c == "torch"), flat[0])
    bad = [(c, v) for c, v in flat if abs(v - ref) > rtol * max(abs(ref), 1.0)]
    if not bad:
        return None
    return (f"{name}: first losses differ from {ref_c}'s {ref:.7g} by more than {rtol:g} "
            f"relative: " + ", ".join(f"{c} {v:.7g}" for c, v in bad))


def profile_lines(prof, top=10):
    """The profile's largest ``top`` ops (or op and shapes) as lines: ms per step, share,
    node count."""
    total = sum(ms for _, ms, _ in prof) or 1e-9
    lines = [f"{'':<9} graph profile ({total:.1f} ms per step in nodes, {PROFILE_RUNS} runs):"]
    lines += [f"{'':<11}{op:<32} {ms:8.2f} ms {100 * ms / total:5.1f}%  {n:4d} nodes"
              for op, ms, n in prof[:top]]  # a longer op-and-shapes key pushes the columns
    return lines


def tail(text, lines=40):
    return "\n".join(text.rstrip().splitlines()[-lines:])


MB = 1e6


def memory_line(name, mem):
    """Peak RSS (whole process: interpreter, libraries, JIT code, caches) and peak pool bytes
    (tensors only: SINGA's device pool; PyTorch's CUDA caching allocator, none on the CPU)
    per configuration: the largest over its processes."""
    cells = []
    for c, runs in mem.items():
        rss = max(r["rss"] for r in runs) / MB
        pool = [r["pool"] for r in runs if r["pool"] is not None]
        cells.append(f"{c} rss {rss:.0f} MB" + (f" (pool {max(pool) / MB:.0f} MB)" if pool else ""))
    graphs = {r["cuda_graphs"] for r in mem.get("graph", []) if r.get("cuda_graphs")}
    line = f"{'':<9} memory: " + ", ".join(cells)
    return line + (f"; CUDA graphs: {', '.join(sorted(graphs))}" if graphs else "")


def model_record(name, args, times, mem):
    """One model's entry in the ``--json`` file."""
    t = {c: statistics.median(v) for c, v in times.items()}
    ratios = {"eager/graph": t["eager"] / t["graph"]}
    if "torch" in t:
        ratios.update({"eager/torch": t["eager"] / t["torch"],
                       "graph/torch": t["graph"] / t["torch"]})

    def peak(key):
        return {c: max((r[key] for r in runs if r[key] is not None), default=None)
                for c, runs in mem.items()}

    rec = {"batch": args.batch[name], "steps": args.steps[name], "median_s": t,
           "ratios": ratios, "peak_pool_bytes": peak("pool"), "peak_rss_bytes": peak("rss")}
    if name in TARGET:
        rec["target_eager/torch"] = TARGET[name]
    if name in GRAPH_TARGET:
        rec["target_graph/torch"] = GRAPH_TARGET[name]
    rec["first_loss"] = {c: [r.get("first_loss") for r in runs] for c, runs in mem.items()}
    graphs = [r.get("cuda_graphs") for r in mem.get("graph", []) if r.get("cuda_graphs")]
    if graphs:
        rec["cuda_graphs"] = graphs
    profiles = [r["profile"] for r in mem.get("graph", []) if r.get("profile")]
    if profiles:
        rec["graph_profile"] = profiles[-1]
    return rec


def git_commit():
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def write_json(path, report):
    """Write ``report`` to ``path`` atomically: readers see the old file or the new one."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def per_model(values, defaults, flag, parser):
    """``["128"]`` (every model) or ``["resnet18=128", "cnn=64"]`` (those models) over
    ``defaults`` -> {model: positive int}."""
    out = dict(defaults)
    for v in values or []:
        model, sep, number = v.rpartition("=")
        if sep and model not in out:
            parser.error(f"{flag} {v}: unknown model {model!r} (models: {', '.join(out)})")
        try:
            n = int(number)
        except ValueError:
            n = 0
        if n < 1:
            parser.error(f"{flag} {v}: expected a positive integer N or MODEL=N")
        out.update({model: n} if sep else dict.fromkeys(out, n))
    return out


def torch_version():
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def target_label(name: str) -> str:
    """The report's target column: ``e1.5 g1.0`` (eager / graph ratio to PyTorch)."""
    parts = [f"e{TARGET[name]:.1f}"] if name in TARGET else []
    if name in GRAPH_TARGET:
        parts.append(f"g{GRAPH_TARGET[name]:.1f}")
    return " ".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", choices=list(BATCH), default=list(BATCH))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--device", default="cpu",
                    help="SINGA device string (cpu, cuda, cuda:1, opencl:0); PyTorch runs on "
                         "the same CUDA device, and on the CPU for the others")
    ap.add_argument("--batch", nargs="+", metavar="N|MODEL=N",
                    help=f"batch size for every model, or per model (default {BATCH})")
    ap.add_argument("--steps", nargs="+", metavar="N|MODEL=N",
                    help=f"timed steps per process, for every model or per model (default "
                         f"{STEPS} on the CPU, {STEPS_BY_BACKEND['cuda']} on CUDA)")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads for both frameworks (default: all cores)")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: the process's CPU time per step, which other processes on a "
                         "shared machine can only inflate (use with --threads 1)")
    ap.add_argument("--profile", action="store_true",
                    help="print the per-op node times of each model's graph step")
    ap.add_argument("--profile-shapes", action="store_true",
                    help="with --profile: one row per op and operand shapes (implies "
                         "--profile)")
    ap.add_argument("--worker", choices=["eager", "graph", "torch"], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.profile = args.profile or args.profile_shapes
    args.batch = per_model(args.batch, BATCH, "--batch", ap)
    args.steps = per_model(args.steps, STEPS_BY_BACKEND.get(backend_of(args.device), STEPS),
                           "--steps", ap)
    if args.worker:
        name = args.models[0]
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        worker(args.worker, name, args.device, args.batch[name], args.steps[name],
               args.warmup, clock, args.profile, args.profile_shapes)
        return
    configs = ["eager", "graph"] + ([] if args.no_torch else ["torch"])
    torch_dev = None if args.no_torch else torch_device_name(args.device)
    on = f", torch on {torch_dev}" if torch_dev and torch_dev != "cpu" else ""
    if torch_dev == "cpu" and backend_of(args.device) != "cpu":
        on = ", torch on cpu (it has no backend for this device)"
    print(f"device {args.device}{on}, {os.cpu_count()} cores, threads {args.threads or 'all'}, "
          f"{args.clock} clock; per configuration {args.reps} fresh "
          f"processes (alternating), each timing a block of steps after {args.warmup} warm-up")
    print(f"{'model':<11} {'batch':>5} {'eager s':>9} {'graph s':>9} {'torch s':>9} "
          f"{'eager/torch':>11} {'graph/torch':>11} {'eager/graph':>11} {'target':>9}")
    report = {
        "argv": sys.argv[1:] if argv is None else list(argv),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "commit": git_commit(), "device": args.device, "torch_device": torch_dev,
        "torch_version": None if args.no_torch else torch_version(), "cuda_device_name": None,
        "cpu_count": os.cpu_count(), "threads": args.threads or None, "clock": args.clock,
        "reps": args.reps, "warmup": args.warmup, "models": {}, "complete": False,
        "error": None,
    }
    for name in args.models:
        times = {c: [] for c in configs}
        mem = {c: [] for c in configs}
        try:
            for _ in range(args.reps):
                for c in configs:
                    run = run_config(c, name, args)
                    times[c].extend(run["times"])
                    mem[c].append(run)
                    report["cuda_device_name"] = run.get("cuda_device_name",
                                                         report["cuda_device_name"])
        except WorkerFailed as e:
            print(f"--- stderr of {e} (last 40 lines) ---\n{tail(e.stderr)}\n---",
                  file=sys.stderr, flush=True)
            report["error"] = f"{e}; stderr ends:\n{tail(e.stderr, 10)}"
            if args.json:
                write_json(args.json, report)
            kept = f" (the models before it are in {args.json})" if args.json else ""
            raise SystemExit(f"train_step: {e}; stopping{kept}") from None
        t = {c: statistics.median(v) for c, v in times.items()}
        line = f"{name:<11} {args.batch[name]:>5} {t['eager']:9.4f} {t['graph']:9.4f}"
        if "torch" in t:
            target = target_label(name)
            line += (f" {t['torch']:9.4f} {t['eager'] / t['torch']:11.2f} "
                     f"{t['graph'] / t['torch']:11.2f} {t['eager'] / t['graph']:11.2f} "
                     f"{target:>9}")
        print(line)
        print(memory_line(name, mem), flush=True)
        for run in mem["graph"][-1:]:
            if run.get("profile"):
                print("\n".join(profile_lines(run["profile"])), flush=True)
        if args.json:
            report["models"][name] = model_record(name, args, times, mem)
            write_json(args.json, report)
        if name in SHARED_INIT:
            why = first_loss_mismatch(name, {c: [r["first_loss"] for r in runs]
                                             for c, runs in mem.items()})
            if why:
                report["error"] = why
                if args.json:
                    write_json(args.json, report)
                raise SystemExit(f"train_step: {why}")
    if args.json:
        report["complete"] = True
        write_json(args.json, report)


if __name__ == "__main__":
    main()
