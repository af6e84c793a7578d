"""Plant known bugs one at a time in a copy of the repository and check that tests catch each.

    python tools/mutation_check.py [-k NAME] [--from-head [--with PATH ...]] [--json FILE]
                                   [--timeout 600] [--keep] [--list]

Each entry of :data:`MUTANTS` is a bug a regression could bring back: a file, the exact text
to replace (it must occur exactly once), the text that replaces it, and the few pytest targets
that must fail on it (run under ``mpiexec -n ranks`` when ``ranks`` > 1: a divide by the world
size, for one, is invisible on one rank). For each mutant the script runs the targets on the
unchanged copy first (a target that already fails proves nothing), then with the bug planted,
then puts the file back. The working tree is never touched: the copy is a temporary folder
(every tracked and untracked, not ignored file of the working tree; or, with ``--from-head``,
``git archive HEAD`` plus the ``--with`` files of the working tree), and the copy's packages
are put first on ``PYTHONPATH``, ahead of the editable installs of this checkout (checked
before anything runs).

Outcomes, one line each: ``caught`` (the targets failed; a timeout counts, a hang is caught
too), ``MISSED`` (they passed with the bug in), ``STALE`` (the original text is not in the file
once: the code moved, update the entry), ``BASELINE FAILS`` (the targets fail without the
bug), ``not run`` (a module the targets need, e.g. onnx, is not installed). Exit status 1 when
any mutant is missed, stale or has a failing baseline; ``--require-all`` also fails on
``not run``. Run it from the virtual environment the tests run in (README: the development
install, with ``singa-dist[mpi]``, ``singa-onnx``, onnx and onnxruntime for every entry).
The last result is in docs/testing.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    """A planted bug: ``original`` (exactly once in ``path``) becomes ``mutated``."""

    name: str
    what: str
    path: str
    original: str
    mutated: str
    targets: tuple
    ranks: int = 1
    needs: tuple = ()  # modules the targets import (else: not run)


ONNX = ("onnx", "onnxruntime", "singa_onnx")
DIST = ("mpi4py", "singa_dist")

MUTANTS = [
    Mutant(
        "distopt-divide-by-world-size", "DistOpt.update applies the all-reduced sum undivided "
        "(SINGA's manual step, and the sparse update)",
        "packages/singa-core/src/singa/_distopt.py",
        "        _math.imul(grad.data, 1.0 / self.world_size)\n",
        "",
        ("tests/dist/test_distopt_mean.py", "tests/dist/test_distopt.py", "-k", "sparse"),
        ranks=2, needs=DIST),
    Mutant(
        "overlap-wait-after-update", "the overlapped all-reduce is waited for after the update",
        "packages/singa-core/src/singa/_distopt.py",
        "        for w in works:\n            w.wait()\n        self._begin_step()\n"
        "        for p, g in seen:\n            self._apply(p, g)  # already the mean over ranks\n",
        "        self._begin_step()\n        for p, g in seen:\n"
        "            self._apply(p, g)  # already the mean over ranks\n"
        "        for w in works:\n            w.wait()\n",
        ("tests/dist/test_overlap.py", "tests/dist/test_distopt_mean.py"), ranks=2, needs=DIST),
    Mutant(
        "half-double-rounding", "numba's float16 conversion ignores the sticky bits a subnormal's "
        "shift drops: truncate, then round (a double rounding)",
        "packages/singa-dist/src/singa_dist/half.py",
        "fs += 0x1000 if ((fs & 0x3FFF) != 0x1000 or (f & 0x7FF) != 0) else 0",
        "fs += 0x1000 if (fs & 0x3FFF) != 0x1000 else 0",
        ("tests/dist/test_half.py",), needs=DIST + ("numba",)),
    Mutant(
        "half-fallback-partial-rounding", "core's numpy half all-reduce (no numba) rounds each "
        "partial sum to float16",
        "packages/singa-core/src/singa/dist.py",
        "        for r in range(1, recv.shape[0]):\n            out += recv[r]\n",
        "        for r in range(1, recv.shape[0]):\n"
        "            out[...] = (out + recv[r]).astype(np.float16)\n",
        ("tests/dist/test_half_fallback.py",), needs=DIST),
    Mutant(
        "topk-keeps-k-minus-1", "the top-K sparse all-reduce keeps K-1 entries on ties",
        "packages/singa-core/src/singa/dist.py",
        "ties = xp.flatnonzero(mag == kth)[:k - above.size]",
        "ties = xp.flatnonzero(mag == kth)[:k - above.size - 1]",
        ("tests/dist/test_ops.py", "-k", "sparse"), needs=DIST),
    Mutant(
        "arena-overlap", "the arena planner lets groups whose lifetimes touch share bytes",
        "packages/singa-core/src/singa/graph/_memory.py",
        "for o, e, f, la in placed if f <= hi and lo <= la)",
        "for o, e, f, la in placed if f < hi and lo < la)",
        ("tests/core/test_scheduler_memory.py",)),
    Mutant(
        "fused-conv-drops-relu", "the CPU's fused Conv2d+ReLU skips the ReLU on the im2col path",
        "packages/singa-cpu/src/singa_cpu/kernels/conv.py",
        "_im2col_forward(x, w2, b, y, g, act, pooled if chunk_pool else None)",
        "_im2col_forward(x, w2, b, y, g, ACT_NONE, pooled if chunk_pool else None)",
        ("tests/backend/test_conformance.py::test_fused[Conv2d+ReLU-float32]",
         "tests/backend/test_conformance.py::test_fused[Conv2d+ReLU-float64]",
         "tests/backend/test_conformance.py::test_large[Conv2d+ReLU-float32]",
         "tests/backend/test_conformance.py::test_large[Conv2d+ReLU-float64]",
         "--singa-backend", "cpu")),
    Mutant(
        "gemm-ignores-transB", "the CPU's GEMM kernel ignores transB",
        "packages/singa-cpu/src/singa_cpu/kernels/linalg.py",
        '    if attrs.get("transB"):\n        b = b.T\n',
        "",
        ("tests/backend/test_conformance.py", "-k", "GEMM", "--singa-backend", "cpu")),
    Mutant(
        "checkpoint-skips-missing", "load_states silently skips a state the checkpoint lacks",
        "packages/singa-core/src/singa/model.py",
        "missing = sorted(set(states) - model_names)",
        "missing = []",
        ("tests/nn/test_checkpoint.py", "-k", "missing")),
    Mutant(
        "adam-bias-correction", "Adam's bias correction uses step + 2 (off by one)",
        "packages/singa-core/src/singa/opt.py",
        "_math.as_type(self.step_counter.data, p.dtype_code), 1.0)",
        "_math.as_type(self.step_counter.data, p.dtype_code), 2.0)",
        ("tests/nn/test_opt.py", "-k", "adam or Adam"), needs=("torch",)),
    Mutant(
        "remat-stale-input", "rematerialisation recomputes from an input changed since the "
        "forward pass",
        "packages/singa-core/src/singa/graph/_remat.py",
        "            if self._changed(a, p, hi):\n                return False\n",
        "",
        ("tests/nn/test_graph_remat_inputs.py",)),
    Mutant(
        "onnx-conv-dilations", "ONNX import of Conv ignores dilations",
        "packages/singa-onnx/src/singa_onnx/handlers/nn.py",
        'dil = _at_least(ctx, attrs, "dilations", nsp, [1] * nsp)',
        "dil = [1] * nsp",
        ("tests/onnx/test_import_attributes.py", "-k", "Conv"), needs=ONNX),
    Mutant(
        "onnx-export-softmax-axis", "the ONNX exporter writes Softmax with axis=-1 whatever the "
        "op's axis",
        "packages/singa-core/src/singa/autograd/_products.py",
        'onnx=Onnx("Softmax", (("axis", "axis"),))))',
        'onnx=Onnx("Softmax", (("axis", "axis"),), convert=(("axis", lambda v: -1),))))',
        ("tests/onnx/test_export_attributes.py", "-k", "softmax"), needs=ONNX),
    Mutant(
        "distopt-step-sums", "DistOpt's synchronous step sums the gradients instead of "
        "averaging them (a fourteenth: the step's own division)",
        "packages/singa-core/src/singa/_distopt.py",
        '[g for _, g in bucket], "mean", half=half',
        '[g for _, g in bucket], "sum", half=half',
        ("tests/dist/test_distopt_mean.py",
         "tests/dist/test_distopt.py::test_plain_and_half_equal_one_rank_on_joined_batch"),
        ranks=2, needs=DIST),
    Mutant(
        "opt-state-by-name", "optimizer state keyed by parameter name: two parameters that "
        "carry one name share a momentum buffer",
        "packages/singa-core/src/singa/_optstate.py",
        "        rec = self._records.get(id(param))\n"
        "        if rec is not None and rec.ref() is param:\n",
        "        rec = next((r for r in self._live() if r.name == name), None)\n"
        "        if rec is not None:\n",
        ("tests/nn/test_opt_state.py", "-k", "own_state")),
    Mutant(
        "recorded-write-keeps-version", "a write recorded in graph mode does not count for "
        "autograd's in-place check: backward through a recorded update goes unnoticed",
        "packages/singa-core/src/singa/_device.py",
        "            for b in writes:\n                b.version += 1\n"
        "            graph.add_operation(fn, reads, writes, name)\n",
        "            graph.add_operation(fn, reads, writes, name)\n",
        ("tests/nn/test_singa_patterns.py", "-k", "gan")),
    Mutant(
        "reduce-mean-grad-unscaled", "ReduceMean's gradient rule (its record) does not divide "
        "dy by the number of cells",
        "packages/singa-core/src/singa/ops/_reductions.py",
        "ops.mul(dy, 1.0 / max(n, 1))",
        "dy",
        ("tests/nn/test_reduction_records.py", "-k", "finite_differences")),
    Mutant(
        "reduce-extreme-ties-doubled", "ReduceMax/ReduceMin's rule gives every tied cell the "
        "whole of dy",
        "packages/singa-core/src/singa/ops/_reductions.py",
        "ops.broadcast_to(ops.div(dy, count), shape)",
        "ops.broadcast_to(dy, shape)",
        ("tests/nn/test_reduction_records.py", "-k", "ties")),
    Mutant(
        "onnx-export-reduce-axes-form", "the exporter writes a reduction's axes as an input where "
        "the export opset wants an attribute, and the reverse",
        "packages/singa-onnx/src/singa_onnx/frontend.py",
        "    axes_as_input = any(",
        "    axes_as_input = not any(",
        ("tests/onnx/test_reduction_records.py", "-k", "exports"), needs=ONNX),
    Mutant(
        "rearrangement-grad-not-inverted", "the rearrangements' shared backward permutes dy by "
        "the forward's permutation instead of its inverse",
        "packages/singa-core/src/singa/autograd/_rearrangements.py",
        "dy = _math.transpose(dy, list(np.argsort([a % len(perm) for a in perm])))",
        "dy = _math.transpose(dy, list(perm))",
        ("tests/nn/test_rearrangement_records.py", "-k", "finite_differences")),
    Mutant(
        "onnx-export-rearrangement-operand-form", "the rearrangement exporter writes an operand "
        "as an attribute where the export opset wants an input, and the reverse",
        "packages/singa-onnx/src/singa_onnx/frontend.py",
        "            if name in inputs:\n",
        "            if name not in inputs:\n",
        ("tests/onnx/test_rearrangement_records.py", "-k", "exports"), needs=ONNX),
    Mutant(
        "onnx-declared-form-swaps-attributes", "a declared function's ONNX form maps SeLU's "
        "alpha to ONNX's gamma and gamma to alpha (export and the built import handler)",
        "packages/singa-core/src/singa/autograd/_elementwise.py",
        'onnx=Onnx("Selu", (("alpha", "alpha"), ("gamma", "gamma")))))',
        'onnx=Onnx("Selu", (("alpha", "gamma"), ("gamma", "alpha")))))',
        ("tests/onnx/test_declared_onnx_forms.py", "-k", "selu or Selu"), needs=ONNX),
    Mutant(
        "sigmoid-mul-bound-gate-multiplies", "the bound Sigmoid+Mul gate writes x * sigmoid(x) "
        "into its scratch instead of sigmoid(x)",
        "packages/singa-cpu/src/singa_cpu/kernels/elementwise.py",
        "sig_args = (flat, s.reshape(-1), flat, False)",
        "sig_args = (flat, s.reshape(-1), flat, True)",
        ("tests/backend/test_cpu_bind.py", "-k", "sigmoid_mul")),
    Mutant(
        "relu-scalar-drops-nan", "the CPU's one ReLU expression (ReLU, Add+ReLU, the fused "
        "convolutions' epilogues) turns NaN into 0",
        "packages/singa-cpu/src/singa_cpu/kernels/elementwise.py",
        "return v if (v > zero or v != v) else zero",
        "return v if v > zero else zero",
        ("tests/backend/test_conformance.py", "-k", "special and (ReLU or Relu)",
         "--singa-backend", "cpu")),
]


# ---------------------------------------------------------------------------- the copy
_IGNORE = shutil.ignore_patterns("__pycache__", ".nox", ".hypothesis", "*.egg-info")


def _git(*args) -> bytes:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True).stdout


def make_copy(dest: Path, from_head: bool, extra=()) -> None:
    """The repository's files in ``dest``: the working tree's tracked and untracked files (not
    ignored), or HEAD's plus ``extra`` paths of the working tree."""
    if from_head:
        with tarfile.open(fileobj=io.BytesIO(_git("archive", "HEAD")), mode="r:") as tar:
            tar.extractall(dest, filter="data")
        names = list(extra)
    else:
        listed = _git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        names = [n for n in listed.decode().split("\0") if n]
    for name in names:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=_IGNORE, dirs_exist_ok=True)
        elif src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def copy_env(copy: Path) -> dict:
    srcs = sorted(str(p) for p in (copy / "packages").glob("*/src"))
    env = {k: v for k, v in os.environ.items() if k != "SINGA_SKIP_REPORT_DIR"}
    env["PYTHONPATH"] = os.pathsep.join([*srcs, *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("SINGA_DEVICE", "cpu")
    return env


def check_imports_from(copy: Path, env: dict) -> None:
    """Fail unless the copy's packages are the ones imported (not the editable installs)."""
    code = ("import importlib, sys\nfor m in sys.argv[1:]:\n    try:\n"
            "        print(m, importlib.import_module(m).__file__)\n"
            "    except ImportError:\n        pass\n")
    out = subprocess.run([sys.executable, "-c", code, "singa", "singa_cpu", "singa_dist",
                          "singa_onnx"], cwd=copy, env=env, capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        mod, path = line.split(" ", 1)
        if not path.startswith(str(copy)):
            raise SystemExit(f"mutation_check: {mod} imports from {path}, not from the copy "
                             f"{copy}: the copy's packages must come first on sys.path")


# ---------------------------------------------------------------------------- running
def _command(m: Mutant) -> list[str]:
    pytest = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
              *m.targets]
    if m.ranks > 1:
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or "mpiexec"
        return [mpiexec, "-n", str(m.ranks), *pytest]
    return pytest


def _run(cmd, copy, env, timeout):
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=copy, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        code = None
    return code, out, time.monotonic() - t0


def _last_line(out: str) -> str:
    lines = [ln.strip("= ") for ln in out.splitlines() if ln.strip()]
    first_fail = next((ln for ln in lines if ln.startswith(("FAILED", "ERROR"))), None)
    # under mpiexec tests/dist/conftest.py aborts every rank at the first failure, saying which
    aborted = next((ln for ln in lines if ln.endswith("failed; aborting every rank")), None)
    return first_fail or aborted or (lines[-1] if lines else "")


def missing_modules(m: Mutant) -> list[str]:
    return [n for n in m.needs if importlib.util.find_spec(n) is None]


def check(m: Mutant, copy: Path, env: dict, timeout: float, baselines: dict) -> dict:
    res = {"name": m.name, "what": m.what, "path": m.path, "targets": list(m.targets),
           "ranks": m.ranks}
    missing = missing_modules(m)
    if missing:
        return {**res, "status": "not run", "detail": f"not installed: {', '.join(missing)}"}
    target = copy / m.path
    text = target.read_text() if target.is_file() else ""
    if text.count(m.original) != 1:
        return {**res, "status": "STALE",
                "detail": f"the original text occurs {text.count(m.original)} times"}
    cmd = _command(m)
    key = (m.targets, m.ranks)
    if key not in baselines:
        baselines[key] = _run(cmd, copy, env, timeout)
    code, out, secs = baselines[key]
    if code != 0:
        return {**res, "status": "BASELINE FAILS", "seconds": round(secs, 1),
                "detail": ("timeout" if code is None else f"exit {code}: ") + _last_line(out)}
    try:
        target.write_text(text.replace(m.original, m.mutated))
        code, out, secs = _run(cmd, copy, env, timeout)
    finally:
        target.write_text(text)
    if code is None:
        return {**res, "status": "caught", "seconds": round(secs, 1),
                "detail": f"timed out after {timeout:.0f} s"}
    if code == 0:
        return {**res, "status": "MISSED", "seconds": round(secs, 1), "detail": _last_line(out)}
    return {**res, "status": "caught", "seconds": round(secs, 1), "detail": _last_line(out)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="select", action="append", default=[],
                    help="only mutants whose name contains this (repeatable)")
    ap.add_argument("--from-head", action="store_true",
                    help="copy HEAD (git archive) instead of the working tree")
    ap.add_argument("--with", dest="extra", action="append", default=[],
                    help="with --from-head: a working-tree file or folder to copy over HEAD's")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per pytest run")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--require-all", action="store_true",
                    help="fail when a mutant cannot run here (a module it needs is missing)")
    args = ap.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.select or any(s in m.name for s in args.select)]
    if args.list:
        for m in chosen:
            print(f"{m.name:32s} {m.path}\n    {m.what}\n    targets: {' '.join(m.targets)}"
                  + (f" (mpiexec -n {m.ranks})" if m.ranks > 1 else ""))
        return 0
    if not chosen:
        print("mutation_check: no mutant matches", args.select)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="singa-mutants-"))
    copy = tmp / "repo"
    copy.mkdir()
    results = []
    t0 = time.monotonic()
    try:
        make_copy(copy, args.from_head, args.extra)
        env = copy_env(copy)
        check_imports_from(copy, env)
        baselines: dict = {}
        for m in chosen:
            r = check(m, copy, env, args.timeout, baselines)
            results.append(r)
            secs = f"{r['seconds']:6.1f}s" if "seconds" in r else " " * 7
            print(f"{r['status']:14s} {secs}  {m.name}: {r.get('detail', '')[:150]}",
                  flush=True)
    finally:
        if args.keep:
            print(f"mutation_check: the copy is kept in {copy}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    counts = {s: sum(r["status"] == s for r in results)
              for s in ("caught", "MISSED", "STALE", "BASELINE FAILS", "not run")}
    print(f"mutation_check: {counts['caught']}/{len(results)} caught; "
          + ", ".join(f"{n} {s}" for s, n in counts.items() if n and s != "caught")
          + f" ({time.monotonic() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "counts": counts}, indent=1))
    bad = counts["MISSED"] + counts["STALE"] + counts["BASELINE FAILS"]
    if args.require_all:
        bad += counts["not run"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
