"""Verify a GPU node: install singa from prebuilt wheels, then check the CUDA backend end to end.

    python tools/gpu_check.py [--wheels wheelhouse] [--out DIR] [--only STEP,...] [--budget 480]

For a machine with an NVIDIA GPU and no network (driver, cupy, cuDNN, NCCL, PyTorch, numba,
pytest and pytest-xdist preinstalled, as GPU images ship them). Build the wheels beforehand on a
machine with network: ``nox -s wheels`` puts the project's wheels and the cuDNN frontend wheel
for the node's Python into ``wheelhouse/``. This script never downloads anything: it makes a
folder first on ``PYTHONPATH`` and installs the wheels into it with ``pip --no-index --no-deps
--target``, so the node's own cupy/cuDNN/NCCL/torch are used with this checkout's singa.

Each step runs in its own process under its own timeout, prints one summary line, and the whole
run stops starting new steps once ``--budget`` seconds are spent. ``--out`` gets
``gpu_check.json`` (every step: status, seconds, summary, data, the end of its output) and
``gpu_check.log`` (every step's whole output). The exit status is 0 only when every step
passed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the line a step's process prints last: its result, as JSON
RESULT = "GPU_CHECK_RESULT "


# ---------------------------------------------------------------------------- the steps' bodies
# Each runs in its own process with the installed wheels (``--run-step NAME``) and returns
# (passed, one-line summary, data for the report).

def step_versions():
    """Driver, runtime, NVRTC, cuDNN, NCCL, cupy, torch and the GPU, as the node has them."""
    import cupy
    from cupy_backends.cuda.libs import nvrtc

    rt = cupy.cuda.runtime
    data = {"python": sys.version.split()[0], "cupy": cupy.__version__,
            "driver": rt.driverGetVersion(), "runtime": rt.runtimeGetVersion(),
            "nvrtc": ".".join(map(str, nvrtc.getVersion())),
            "nvrtc_archs": list(nvrtc.getSupportedArchs())}
    props = rt.getDeviceProperties(0)
    name = props["name"]
    data["gpu"] = name.decode() if isinstance(name, bytes) else name
    data["compute_capability"] = f"{props['major']}{props['minor']}"
    data["gpu_memory_mib"] = props["totalGlobalMem"] >> 20
    problems = []
    try:
        import cudnn

        data["cudnn"] = cudnn.backend_version()
        data["cudnn_frontend"] = getattr(cudnn, "__version__", "?")
    except Exception as exc:
        problems.append(f"cuDNN: {type(exc).__name__}: {exc}")
    try:
        from cupy.cuda import nccl

        data["nccl"] = nccl.get_version()
    except Exception as exc:
        problems.append(f"NCCL: {type(exc).__name__}: {exc}")
    try:
        import torch

        data["torch"] = torch.__version__
        data["torch_cuda"] = torch.version.cuda
    except Exception as exc:
        data["torch"] = f"not importable ({type(exc).__name__})"
    import singa
    from singa_cuda import _probe

    data["singa"] = singa.__version__
    data["singa_from"] = str(Path(singa.__file__).parent)
    data["stack"] = _probe.stack_name()
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
        data["nvidia_smi"] = smi.stdout.strip()
    except Exception as exc:
        data["nvidia_smi"] = f"{type(exc).__name__}: {exc}"
    summary = (f"{data['gpu']} sm_{data['compute_capability']}, driver {data['driver']}, "
               f"runtime {data['runtime']}, NVRTC {data['nvrtc']}, cuDNN {data.get('cudnn')}, "
               f"NCCL {data.get('nccl')}, cupy {data['cupy']}, torch {data.get('torch')}")
    if problems:
        summary += "; " + "; ".join(problems)
    return not problems, summary, data


def step_cudnn():
    """cuDNN convolutions (forward with bias, backward data and filter) and batch norm
    (training and backward through cuDNN, inference through the shared code) on cuda:0 against
    the op table's numpy references; cuDNN must have built every batch-norm graph."""
    import numpy as np
    from singa.backend import OPS
    from singa.device import get_device

    gpu = get_device("cuda:0")
    rng = np.random.default_rng(0)
    conv = {"stride": (1, 1), "pads": (1, 1, 1, 1), "dilation": (1, 1), "group": 1}
    x = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    dy = rng.standard_normal((4, 8, 16, 16)).astype(np.float32)
    bn_x = rng.uniform(-2, 3, (8, 16, 12, 12)).astype(np.float32)
    bn_p = [rng.uniform(0.5, 2, 16).astype(np.float32) for _ in range(4)]
    bn_dy = rng.standard_normal(bn_x.shape).astype(np.float32)
    bn_attrs = {"momentum": 0.9, "eps": 1e-5}
    cases = [
        ("Conv2d", [x, w, b], conv, [(4, 8, 16, 16)]),
        ("Conv2dBackwardX", [dy, w], {**conv, "x_shape": x.shape}, [x.shape]),
        ("Conv2dBackwardW", [dy, x], {**conv, "w_shape": w.shape}, [w.shape]),
        ("BatchNormTrain", [bn_x, *bn_p], bn_attrs, [bn_x.shape] + [(16,)] * 4),
        ("BatchNormInfer", [bn_x, *bn_p], {"eps": 1e-5}, [bn_x.shape]),
    ]
    ref_train = OPS["BatchNormTrain"].reference(bn_x.astype(np.float64), *bn_p, **bn_attrs)
    saved_mean, saved_inv = (np.asarray(a, np.float32) for a in ref_train[1:3])
    cases.append(("BatchNormBackward", [bn_dy, bn_x, bn_p[0], saved_mean, saved_inv], {},
                  [bn_x.shape, (16,), (16,)]))
    errors, worst = [], {}
    import cupy

    for name, ins, attrs, out_shapes in cases:
        fn = gpu.kernels[name][0]
        with gpu.cuda_device, gpu.stream:
            d_ins = [cupy.asarray(a) for a in ins]
            d_outs = [cupy.empty(s, cupy.float32) for s in out_shapes]
        fn(d_ins, d_outs, attrs)
        want = OPS[name].reference(*[a.astype(np.float64) for a in ins], **attrs)
        want = want if isinstance(want, (tuple, list)) else [want]
        err = 0.0
        for got, ref in zip(d_outs, want):
            got = gpu.native_to_numpy(got)
            ref = np.asarray(ref)
            scale = max(1.0, float(np.abs(ref).max()))
            err = max(err, float(np.abs(got - ref).max()) / scale)
        worst[name] = err
        if not err < 2e-3:  # TF32 may serve float32 convolutions: relative 1e-3 is its scale
            errors.append(f"{name} rel err {err:.2e}")
    refused = {**gpu.kernels["BatchNormTrain"][0].engine().refused,
               **gpu.kernels["BatchNormBackward"][0].engine().refused}
    if refused:
        errors.append(f"cuDNN refused batch-norm graphs: {refused}")
    summary = ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
    return not errors, ("; ".join(errors) or "max relative error " + summary), {"errors": worst}


def step_nccl():
    """A one-rank NCCL all-reduce of a kernel's output (the kernel still queued on the device's
    stream when the collective is issued), against numpy."""
    import numpy as np
    from singa import dist, tensor
    from singa.device import get_device
    from singa_dist.nccl import NcclIdHolder

    gpu = get_device("cuda:0")
    comm = dist.get_communicator("nccl", nccl_id=NcclIdHolder(), local_rank=0, world_size=1)
    host = np.random.default_rng(1).standard_normal(1 << 22).astype(np.float32)
    x = tensor.from_numpy(host, gpu)
    y = x * 3.0 + 1.0  # kernels on the device's stream, not yet finished
    comm.all_reduce(y)
    got = tensor.to_numpy(y)
    want = host * np.float32(3.0) + np.float32(1.0)
    err = float(np.abs(got - want).max())
    return err < 1e-5, f"all-reduce of 4 Mi floats, 1 rank: max error {err:.1e}", {"err": err}


BODIES = {"versions": step_versions, "cudnn": step_cudnn, "nccl": step_nccl}


def run_body(name: str) -> int:
    try:
        ok, summary, data = BODIES[name]()
    except Exception as exc:
        import traceback

        traceback.print_exc()
        ok, summary, data = False, f"{type(exc).__name__}: {exc}", {}
    print(RESULT + json.dumps({"ok": bool(ok), "summary": summary, "data": data},
                              default=str), flush=True)
    return 0 if ok else 1


# ---------------------------------------------------------------------------- the orchestration
@dataclass
class Step:
    name: str
    what: str
    argv: list  # run with this Python in the repository root
    timeout: int
    env: dict = field(default_factory=dict)
    judge: object = None  # (returncode, output) -> (ok, summary, data); default: JSON line


@dataclass
class Outcome:
    name: str
    what: str
    status: str  # "pass", "fail", "timeout", "skipped"
    seconds: float
    summary: str
    data: dict
    tail: str


def _tail(text: str, n: int = 4000) -> str:
    return text[-n:]


def judge_result_line(code, out):
    for line in reversed(out.splitlines()):
        if line.startswith(RESULT):
            res = json.loads(line[len(RESULT):])
            return res["ok"] and code == 0, res["summary"], res["data"]
    return False, f"exit status {code}, no result line", {}


def judge_pytest(code, out):
    lines = [ln for ln in out.splitlines() if ln.strip()]
    counts = next((ln.strip("= ") for ln in reversed(lines)
                   if " passed" in ln or " failed" in ln or " error" in ln), "")
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    summary = counts or f"exit status {code}"
    if failed:
        summary += "; first: " + failed[0][:300]
    return code == 0, summary, {"failed": failed[:50]}


def judge_pytest_ran(code, out):
    """:func:`judge_pytest`, and a fail when a test was skipped for want of the GPU stack (the
    NCCL probe's "not runnable here", a missing mpi4py or cupy): on a GPU node such a step
    would pass having checked nothing."""
    ok, summary, data = judge_pytest(code, out)
    stack = [ln.strip() for ln in out.splitlines() if ln.startswith("SKIPPED")
             and ("not runnable here" in ln or "is not installed" in ln or "no cupy" in ln)]
    if stack:
        return False, f"{summary}; skipped for want of the GPU stack: {stack[0][:300]}", \
            {**data, "skipped": stack[:50]}
    return ok, summary, data


def judge_doctor(code, out):
    block = out.split("\nBackends\n", 1)[-1]
    lines = block.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip().startswith("cuda ")), None)
    if start is None:
        return False, "the doctor lists no cuda backend", {}
    entry = [lines[start]]
    for ln in lines[start + 1:]:
        if ln.startswith("  ") and not ln.startswith("   "):
            break
        entry.append(ln)
    smoke = next((ln.strip() for ln in entry if "smoke:" in ln), "no smoke line")
    return code == 0 and "smoke: PASS" in smoke, smoke, {"entry": entry}


def judge_cnn(code, out):
    import re

    m = re.findall(r"final validation accuracy ([0-9.]+)", out)
    if not m:
        return False, f"exit status {code}, no final accuracy", {}
    acc = float(m[-1])
    return code == 0 and acc >= 0.95, f"validation accuracy {acc:.4f} (target >= 0.95)", \
        {"accuracy": acc}


def judge_bench(path, captured=False):
    """The bench steps' judge: the benchmark exited 0 and wrote its JSON; with ``captured``,
    every model's graph also ran as captured CUDA graphs (else the step times the replay it
    fell back to, and fails naming why)."""
    def judge(code, out):
        try:
            data = json.loads(Path(path).read_text())
        except Exception as exc:
            return False, f"exit status {code}, no benchmark JSON ({exc})", {}
        lines = [ln for ln in out.splitlines() if ln.strip()]
        rows = [ln for ln in lines if ln.split()[:1] and ln.split()[0] in ("cnn", "resnet18")]
        summary = " | ".join(" ".join(r.split()) for r in rows) or "no rows"
        ok = code == 0
        if captured:
            states = {name: rec.get("cuda_graphs") for name, rec in data.get("models", {}).items()}
            missed = {k: v for k, v in states.items() if v != ["captured"] * len(v or [None])}
            if missed or not states:
                ok = False
                summary += f" | not captured: {missed or 'no models'}"
        return ok, summary, data

    return judge


def steps(out_dir: Path, workers: int) -> list[Step]:
    me = str(Path(__file__).resolve())
    bench_json = out_dir / "train_step.json"
    graphs_json = out_dir / "train_step_graphs.json"
    return [
        Step("versions", "driver, runtime, NVRTC, cuDNN, NCCL, cupy, torch",
             [me, "--run-step", "versions"], 60),
        Step("doctor", "python -m singa info: the cuda backend and its smoke kernel",
             ["-m", "singa", "info"], 90, judge=judge_doctor),
        Step("cudnn", "cuDNN convolution and batch norm against numpy",
             [me, "--run-step", "cudnn"], 120),
        Step("seed-cnn", "the seed CNN on digits on cuda:0 (>= 95%)",
             ["examples/cnn/train_cnn.py", "cnn", "digits", "--device", "cuda:0",
              "--no-progress", "-o", str(Path(tempfile.gettempdir()) / "singa-gpu-check-cnn")],
             180, judge=judge_cnn),
        Step("nccl", "one-rank NCCL all-reduce of a kernel's output",
             [me, "--run-step", "nccl"], 90),
        Step("nccl-tests", "tests/dist/test_nccl.py on one rank: NCCL's collectives on the GPU",
             ["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/dist/test_nccl.py"], 90,
             judge=judge_pytest_ran),
        Step("cuda-tests", "singa-cuda's own tests, GPU tests included",
             ["-m", "pytest", "-v", "--tb=short", "-p", "no:cacheprovider",
              "packages/singa-cuda/tests", "-k", "not conformance_kit_on_the_gpu",
              "-n", str(min(workers, 8))], 240, judge=judge_pytest),
        Step("conformance", "the conformance kit on cuda (parallel workers)",
             ["-m", "pytest", "-v", "--tb=short", "-p", "no:cacheprovider", "--pyargs",
              "singa.testing.conformance", "--singa-backend", "cuda", "-n", str(workers)],
             300, judge=judge_pytest),
        Step("backend-tests", "tests/backend on cuda (float32 tolerances of full float32: "
             "the device fixture sets float32_precision='highest')",
             ["-m", "pytest", "-q", "--tb=short", "-p", "no:cacheprovider", "tests/backend",
              "--singa-backend", "cuda", "-n", str(min(workers, 8))], 300,
             judge=judge_pytest),
        Step("bench", "training step, this framework and PyTorch on the same GPU",
             ["benchmarks/train_step.py", "--device", "cuda:0", "--models", "cnn", "resnet18",
              "--batch", "cnn=64", "resnet18=128", "--reps", "2", "--json", str(bench_json)],
             240, judge=judge_bench(bench_json)),
        Step("bench-graphs", "the same training step with graph mode captured as CUDA graphs "
             "(SINGA_CUDA_GRAPHS=1)",
             ["benchmarks/train_step.py", "--device", "cuda:0", "--models", "cnn", "resnet18",
              "--batch", "cnn=64", "resnet18=128", "--reps", "2", "--json",
              str(graphs_json)],
             240, env={"SINGA_CUDA_GRAPHS": "1"}, judge=judge_bench(graphs_json, captured=True)),
    ]


def run_step(step: Step, python: str, env: dict, log) -> Outcome:
    t0 = time.monotonic()
    log.write(f"\n===== {step.name}: {step.what}\n$ {python} {' '.join(step.argv)}\n")
    log.flush()
    proc = subprocess.Popen([python, *step.argv], cwd=ROOT, env={**env, **step.env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # a timeout kills pytest's workers too
    try:
        out, _ = proc.communicate(timeout=step.timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    seconds = time.monotonic() - t0
    log.write(out)
    log.flush()
    if timed_out:
        return Outcome(step.name, step.what, "timeout", seconds,
                       f"no result within {step.timeout} s", {}, _tail(out))
    judge = step.judge or judge_result_line
    try:
        ok, summary, data = judge(proc.returncode, out)
    except Exception as exc:
        ok, summary, data = False, f"could not read the output: {exc}", {}
    return Outcome(step.name, step.what, "pass" if ok else "fail", seconds, summary, data,
                   _tail(out))


def install(site: Path, wheels: Path, log) -> str:
    """Install the wheels into ``site`` (a folder put first on ``PYTHONPATH``), over this
    Python's own packages: a GPU image's Python is often a virtual environment itself, which a
    ``--system-site-packages`` venv made from it would not see."""
    found, other = _wheels_for_this_python(sorted(wheels.glob("*.whl")))
    if not any(w.name.startswith("singa_core-") for w in found):
        raise SystemExit(f"no singa_core wheel in {wheels}: build them first (nox -s wheels) "
                         "and copy the folder here")
    if other:  # e.g. the cuDNN frontend built for another Python: the node's own one is used
        log.write(f"===== not for this Python, left out: {', '.join(w.name for w in other)}\n")
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps",
           "--no-cache-dir", "--disable-pip-version-check", "--upgrade", "--target", str(site),
           *map(str, found)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    log.write(f"===== install\n$ {' '.join(cmd)}\n{res.stdout}{res.stderr}")
    if res.returncode != 0:
        raise SystemExit(f"installing the wheels failed:\n{res.stderr[-3000:]}")
    return f"{len(found)} wheels into {site}: " + ", ".join(w.name.split("-")[0] for w in found)


def _wheels_for_this_python(wheels):
    """(installable here, built for another Python or platform)."""
    try:
        from packaging.tags import sys_tags
        from packaging.utils import parse_wheel_filename
    except ImportError:
        from pip._vendor.packaging.tags import sys_tags
        from pip._vendor.packaging.utils import parse_wheel_filename
    here = set(sys_tags())
    ok = [w for w in wheels if parse_wheel_filename(w.name)[3] & here]
    return ok, [w for w in wheels if w not in ok]


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", default=str(ROOT / "wheelhouse"),
                    help="folder with the project's wheels and the cuDNN frontend wheel")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "gpu-check"),
                    help="where gpu_check.json and gpu_check.log go")
    ap.add_argument("--site", default=str(Path(tempfile.gettempdir()) / "singa-gpu-check"),
                    help="folder the wheels are installed into (put first on PYTHONPATH)")
    ap.add_argument("--only", default="", help="comma-separated step names (default: all)")
    ap.add_argument("--skip", default="", help="comma-separated step names to leave out")
    ap.add_argument("--budget", type=float, default=480,
                    help="seconds: no step starts after this (each has its own timeout too)")
    ap.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 1),
                    help="pytest-xdist workers for the conformance kit")
    ap.add_argument("--timeout", action="append", default=[], metavar="STEP=SECONDS",
                    help="another timeout for a step (repeatable)")
    ap.add_argument("--run-step", choices=sorted(BODIES), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_step:
        return run_body(args.run_step)

    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start = time.monotonic()
    report = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "steps": []}
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        report["commit"] = commit + ("+changes" if dirty else "")
    except OSError:
        report["commit"] = "unknown"
    site = Path(args.site)
    if site.exists():
        shutil.rmtree(site)
    cache = site.parent / (site.name + "-cache")
    # the installed wheels, not a checkout, are what is checked
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(site),
           "CUPY_CACHE_DIR": str(cache / "cupy"), "XDG_CACHE_HOME": str(cache),
           "MPLBACKEND": "Agg"}
    chosen = [s for s in steps(out_dir, args.workers)
              if (not args.only or s.name in args.only.split(","))
              and s.name not in args.skip.split(",")]
    limits = dict(t.split("=", 1) for t in args.timeout)
    for step in chosen:
        step.timeout = int(limits.get(step.name, step.timeout))
    with open(out_dir / "gpu_check.log", "w") as log:
        summary = install(site, Path(args.wheels), log)
        python = sys.executable
        print(f"{'install':<12} pass     {time.monotonic() - t_start:6.1f}s  {summary}",
              flush=True)
        report["install"] = summary
        for step in chosen:
            spent = time.monotonic() - t_start
            if spent > args.budget:
                res = Outcome(step.name, step.what, "skipped", 0.0,
                              f"budget of {args.budget:.0f} s spent", {}, "")
            else:
                step.timeout = int(min(step.timeout, max(10, args.budget - spent + 30)))
                res = run_step(step, python, env, log)
            print(f"{res.name:<12} {res.status:<8} {res.seconds:6.1f}s  {res.summary}",
                  flush=True)
            report["steps"].append(asdict(res))
            report["seconds"] = round(time.monotonic() - t_start, 1)
            write_atomic(out_dir / "gpu_check.json", json.dumps(report, indent=1, default=str))
    bad = [s["name"] for s in report["steps"] if s["status"] != "pass"]
    print(f"gpu_check: {len(report['steps']) - len(bad)}/{len(report['steps'])} steps passed "
          f"in {report['seconds']:.0f} s" + (f"; not passed: {', '.join(bad)}" if bad else "")
          + f"; report {out_dir / 'gpu_check.json'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
