"""Test sessions: one per backend, plus lint and the distributed tests (``dist``).

``nox`` runs them all (what CI runs); ``nox -s "tests(backend='opencl')"`` runs one. Each
backend session installs singa-core and that backend from this checkout, asserts that the
backend it asked for is the one that runs, and fails if pytest collects no test.
"""

from __future__ import annotations

import functools
import os
import platform
import re
import shutil
import sys

import nox

# `nox` runs these; "tests(backend='cuda')" needs a GPU and runs only when named
# (`nox -s "tests(backend='cuda')"`); the `cuda` session is what a machine without one verifies
nox.options.sessions = ["lint", "docs", "install", "tests(backend='cpu')", "pythons",
                        "tests(backend='opencl')", "template", "cuda", "dist", "onnx", "skips"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True

# Disk: each session's environment (torch alone is 750 MB installed; a full run made 12 GB
# of .nox) is removed once the session has passed, so .nox holds at most the environment of
# the session running (about 2.5 GB at the largest) plus those of failed sessions, kept for
# debugging. SINGA_NOX_KEEP_VENVS=1 keeps them all, for `nox -r` reruns that skip the installs.
KEEP_VENVS = os.environ.get("SINGA_NOX_KEEP_VENVS", "") == "1"


def _remove(session: nox.Session, path: str, what: str) -> None:
    if KEEP_VENVS or not path or not os.path.isdir(path):
        return
    shutil.rmtree(path, ignore_errors=True)
    session.log(f"removed {what} {path} (SINGA_NOX_KEEP_VENVS=1 keeps it)")


def drops_venv(fn):
    """Remove the session's virtual environment after the session passed."""

    @functools.wraps(fn)
    def session_fn(session: nox.Session, *args, **kwargs):
        fn(session, *args, **kwargs)
        location = getattr(session.virtualenv, "location", None)
        nox_dir = os.path.abspath(".nox") + os.sep
        if location and os.path.abspath(location).startswith(nox_dir):
            _remove(session, location, "the session's environment")

    return session_fn


CORE = "./packages/singa-core"
TEST_DEPS = ["pytest>=7", "hypothesis>=6", "pytest-xdist>=3"]

# pytest-xdist workers for the long suites: one per core the process may use, at most this many
# (a worker holds numba's compiled kernels, torch and a device: 0.5-1.5 GB each). On 2 cores the
# CPU suite took 272 s with 2 workers against 542 s in one process (the kernels' own threads
# then share the cores with the other worker's; results are the same, see docs/testing.md).
MAX_WORKERS = 4


def workers() -> list[str]:
    """pytest arguments that spread a run over :data:`MAX_WORKERS` processes at most; none
    on a single core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    n = min(cores, MAX_WORKERS)
    return ["-n", str(n)] if n >= 2 else []

# Every pytest run of a session writes what it collected and skipped into
# .skip-report/<session>/ (tools/skip_report.py, a pytest plugin loaded from tools/); the `skips`
# session, last, fails on a test that every session skipped
TOOLS = os.path.abspath("tools")
SKIP_REPORTS = os.path.abspath(".skip-report")


def skip_reports(session: nox.Session) -> list[str]:
    """Point this session's pytest runs at an emptied ``.skip-report/<session>/`` (subprocesses
    and MPI ranks inherit it); returns the pytest arguments that load the plugin."""
    folder = os.path.join(SKIP_REPORTS, re.sub(r"[^\w.-]+", "-", session.name).strip("-"))
    shutil.rmtree(folder, ignore_errors=True)
    session.env["SINGA_SKIP_REPORT_DIR"] = folder
    session.env["PYTHONPATH"] = os.pathsep.join(
        p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)
    return ["-p", "skip_report"]

# backend -> (packages to install, pytest targets)
BACKENDS = {
    "cpu": (
        # torch: the PyTorch cross-checks in tests/core/test_nn_references.py and
        # tests/nn/test_opt.py (skipped where torch is missing); pip takes the CPU wheel
        # that this machine keeps on local disk; scipy-openblas32: an LP64 OpenBLAS for the
        # GEMM team's 32-bit CBLAS call (tests/backend/test_cpu_gemm_team.py)
        [CORE, "./packages/singa-cpu", ".[examples]", "torch==2.13.0", "scipy-openblas32"],
        ["tests/core", "tests/backend", "tests/nn", "tests/examples"],
    ),
    "opencl": (
        # the `cpu` extra: pocl from PyPI and, on Linux x86_64, Intel's CPU runtime; the examples
        # (the seed models' digits runs in tests/nn, tests/examples) and torch (Adam against
        # PyTorch's) as in the cpu session
        [CORE, "./packages/singa-cpu", "./packages/singa-opencl[cpu]", ".[examples]",
         "torch==2.13.0"],
        ["tests/backend", "tests/nn", "tests/examples", "packages/singa-opencl/tests"],
    ),
    # only where an NVIDIA GPU and driver exist: not in the default sessions (see above); its
    # preflight fails with the probe's reason anywhere else. SINGA_CUDA_STACK=12 for a CUDA 12
    # driver (default 13). On a GPU node without network: tools/gpu_check.py
    "cuda": (
        [CORE, "./packages/singa-cpu",
         f"./packages/singa-cuda[cuda{os.environ.get('SINGA_CUDA_STACK', '13')}]", ".[examples]"],
        ["tests/backend", "tests/nn", "packages/singa-cuda/tests"],
    ),
}

# A backend's second and later runs (another OpenCL runtime) repeat what depends on the
# runtime: its kernels (compiled by that runtime's compiler; the conformance kit in
# tests/backend), the layers and graph mode over them (tests/nn: sub-buffers, the memory pool)
# and the backend's own tests. The example scripts (tests/examples) are the same layers again
# and run once, on the first runtime that can run here (the only one where the other cannot).
REPEAT_TARGETS = {"opencl": ["tests/backend", "tests/nn", "packages/singa-opencl/tests"]}

# backend -> the runs of its targets, each (what runs, extra environment). Each OpenCL run names
# its device: the ICD loader lists platforms in directory order, so with several runtimes
# installed "opencl:0" alone is not a fixed device. A run whose device is missing fails (the
# preflight cannot create it); only a device that is there but cannot compile kernels for this
# CPU is skipped, with the reason in one line, and a session in which no run happened fails.
INTEL_CPU_RUNTIME = platform.system() == "Linux" and platform.machine() == "x86_64"
RUNS = {
    "cpu": [("cpu", {})],
    "cuda": [("cuda", {})],
    "opencl": [
        # pocl from PyPI; on a CPU its LLVM 14 does not know (AMD Zen 4, 5) the preflight says so
        # in one line and the run is skipped, and the Intel run below covers the suite
        ("pocl", {"SINGA_OPENCL_DEVICE": "Portable Computing Language"}),
        # Intel's CPU runtime from PyPI, exposed to the loader by singa_opencl._icd
        *([("Intel CPU runtime", {"SINGA_OPENCL_DEVICE": "Intel(R) OpenCL"})]
          if INTEL_CPU_RUNTIME else []),
    ],
}

PREFLIGHT = """
import os, sys
from singa.device import get_device
from singa.errors import DeviceUnavailableError
want = sys.argv[1]
try:
    dev = get_device(want)
except DeviceUnavailableError as exc:
    # An OpenCL runtime that is installed and sees the device but cannot compile kernels for
    # this CPU (the PyPI pocl's LLVM 14 on CPUs newer than it knows) cannot run here: say so
    # in one line. Every other failure (a missing runtime, a broken backend) fails the session.
    spec = os.environ.get("SINGA_OPENCL_DEVICE")
    if want == "opencl" and spec:
        from singa_opencl import _platforms
        for info in _platforms.enumerate_devices():
            if spec in info.describe() and info.problem is not None:
                print(f"CANNOT RUN HERE: {info.describe()}: {info.problem}")
                sys.exit(3)
    raise
assert dev.backend == want, f"asked for backend {want!r} but got {dev.backend!r}"
describe = getattr(dev, "describe", None)  # backend-specific (OpenCL: platform / device)
print(f"preflight: running on {dev.name} ({type(dev).__name__}), {len(dev.kernels)} kernels"
      + (f": {describe()}" if describe else ""))
"""


def runnable(session: nox.Session, backend: str):
    """The (description, env) runs of ``RUNS[backend]`` whose device works on this machine:
    each is preflighted; one that cannot run here (e.g. an OpenCL runtime that cannot compile
    for this CPU) is logged with the reason and skipped."""
    for what, env in RUNS[backend]:
        session.log(f"run: {what}")
        out = session.run("python", "-c", PREFLIGHT, backend, env=env, silent=True,
                          success_codes=[0, 3])
        session.log(out.strip().splitlines()[-1])
        if "CANNOT RUN HERE" in out:
            session.log(f"run skipped: {what} cannot run on this machine (the line above)")
            continue
        yield what, env


# every package's import root, for lint-imports (it reads sources; nothing is installed)
IMPORT_ROOTS = [*(f"packages/{p}/src" for p in sorted(os.listdir("packages"))),
                "tests/plugins", "tools/lint", "examples/plugin-template/src"]


# Docstring coverage (interrogate, pyproject.toml's [tool.interrogate]) is enforced over these
# packages less the files the config excludes; those are measured and reported
DOCSTRING_PACKAGES = ["packages/singa-core/src/singa", "packages/singa-onnx/src/singa_onnx",
                      "packages/singa-dist/src/singa_dist"]
# mypy reads numpy's and pluggy's type information from singa-core's dependencies (CORE)
LINT_DEPS = ["ruff>=0.5", "import-linter>=2.1", "interrogate==1.7.0", "mypy==2.4.1", CORE]


def docstrings_pending() -> list[str]:
    """The files that [tool.interrogate] excludes, one by one: interrogate skips an excluded
    folder even when it is named on the command line, but measures a named file."""
    import glob

    excluded = nox.project.load_toml("pyproject.toml")["tool"]["interrogate"]["exclude"]
    files = []
    for path in excluded:
        files += (sorted(glob.glob(os.path.join(path, "**", "*.py"), recursive=True))
                  if os.path.isdir(path) else [path])
    return files


@nox.session
@drops_venv
def lint(session: nox.Session) -> None:
    """ruff over the whole repository; docstring coverage of the public packages (at least 95%
    where enforced, the rest reported); mypy over singa, singa_onnx and singa_dist
    (pyproject.toml's [tool.mypy]); then the
    import-linter architecture contracts (pyproject.toml's [tool.importlinter]) and the tests
    that prove each contract catches a planted violation."""
    session.install(*LINT_DEPS, *TEST_DEPS)
    session.run("ruff", "check", ".")
    # -c: interrogate looks for its config next to the paths (the packages' own pyproject.toml)
    session.run("interrogate", "-c", "pyproject.toml", *DOCSTRING_PACKAGES)
    pending = docstrings_pending()
    if pending:  # with no paths interrogate would measure the whole repository
        session.log("docstring coverage of the files not yet enforced (reported, not checked):")
        session.run("interrogate", "-c", "pyproject.toml", "--fail-under", "0", *pending)
    session.run("mypy")
    env = {"PYTHONPATH": os.pathsep.join(IMPORT_ROOTS)}
    session.run("lint-imports", "--no-cache", env=env)
    plugin = skip_reports(session)
    session.run("pytest", "-q", *plugin, "tests/lint",
                env={"PYTHONPATH": os.pathsep.join([*IMPORT_ROOTS, TOOLS])})


# the reference site's tools; griffe reads the sources statically (mkdocs.yml's handler paths
# point at packages/*/src), except singa.tensor and singa.autograd, whose functions are built
# from the op records at import (docs/reference/griffe_singa.py imports them): the session
# installs singa-core for their dependencies (numpy, pluggy)
DOCS_DEPS = ["mkdocs==1.6.1", "mkdocstrings==1.0.8", "mkdocstrings-python==2.0.11"]


@nox.session
@drops_venv
def docs(session: nox.Session) -> None:
    """The reference site (mkdocs.yml: docs/*.md and the API pages of docs/reference/) built
    with ``--strict`` into a temporary folder: any warning fails it (a link to a missing page
    or anchor, an unresolved cross-reference in a page or a docstring); then tests/docs,
    which plant each of those in a copy and check the strict build fails on it."""
    import tempfile

    session.install(*DOCS_DEPS, *TEST_DEPS, CORE)
    site = tempfile.mkdtemp(prefix="singa-site-")
    session.run("mkdocs", "build", "--strict", "--site-dir", site)
    _remove(session, site, "the built site")
    plugin = skip_reports(session)
    session.run("pytest", "-q", *plugin, "-p", "no:cacheprovider", "tests/docs")


# extra -> the distributions (and wheels of other projects) a resolution of it must include
EXTRAS_RESOLVED = {
    "cuda12": ["singa-cuda", "singa-dist", "cupy-cuda12x", "nvidia-nccl-cu12",
               "nvidia-cudnn-cu12"],
    "cuda13": ["singa-cuda", "singa-dist", "cupy-cuda13x", "nvidia-nccl-cu13",
               "nvidia-cudnn-cu13"],
    "cuda": ["singa-cuda", "cupy-cuda12x"],
    "all": ["singa-cuda", "singa-dist", "singa-opencl", "singa-onnx", "cupy-cuda12x", "mpich",
            "scikit-learn"],
}
SIBLINGS = ("singa", "singa-core", "singa-cpu", "singa-cuda", "singa-dist", "singa-onnx",
            "singa-opencl")
RESOLUTION_CHECK = """
import json, sys
report, clone, want, siblings = sys.argv[1], sys.argv[2], *(a.split(",") for a in sys.argv[3:5])
got = {i["metadata"]["name"]: i for i in json.load(open(report))["install"]}
missing = [w for w in want if w not in got]
assert not missing, f"the extra did not bring {missing}"
for name in set(siblings) & set(got):
    url = got[name]["download_info"]["url"]
    assert url.startswith("file://" + clone), f"{name} would come from {url}, not the clone"
print(len(got), "distributions; from the clone:", sorted(set(siblings) & set(got)))
"""


@nox.session
@drops_venv
def install(session: nox.Session) -> None:
    """The README's installs from a fresh clone of this repository's HEAD: every extra of the
    meta-package resolves its sibling packages from the clone, never from the package index.
    OpenCL, dist, ONNX and the examples are installed for real into this session's fresh venv
    and imported; the CUDA extras (gigabytes of wheels) and ``all`` are resolved with
    ``pip install --dry-run --report``."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="singa-install-")
    clone = os.path.join(tmp, "singa")
    session.run("git", "clone", "--quiet", os.getcwd(), clone, external=True)
    session.install("pip>=23")
    session.install("--no-cache-dir", f"{clone}[opencl,dist,onnx,examples]")
    session.run("python", "-c", (
        "import json, importlib.metadata as md, singa, singa_cpu, singa_opencl, singa_dist, "
        "singa_onnx, sklearn\n"
        f"for n in {SIBLINGS[1:]!r}:\n"
        "    if n == 'singa-cuda': continue\n"
        "    url = json.loads(md.distribution(n).read_text('direct_url.json'))['url']\n"
        f"    assert url.startswith('file://{clone}'), (n, url)\n"
        "print('installed from the clone:', singa.__version__)"))
    for extra, want in EXTRAS_RESOLVED.items():
        report = os.path.join(tmp, f"{extra}.json")
        session.run("pip", "install", "-q", "--dry-run", "--ignore-installed", "--report",
                    report, f"{clone}[{extra}]")
        session.run("python", "-c", RESOLUTION_CHECK, report, clone, ",".join(want),
                    ",".join(SIBLINGS))
    _remove(session, tmp, "the clone")


@nox.session
@nox.parametrize("backend", list(BACKENDS))
@drops_venv
def tests(session: nox.Session, backend: str) -> None:
    """The test suite for one backend."""
    packages, targets = BACKENDS[backend]
    session.install(*TEST_DEPS, *packages)
    xfails = f"packages/singa-{backend}/conformance-xfails.txt"
    args = ["--singa-backend", backend]
    if os.path.exists(xfails):
        args += ["--singa-xfails", xfails]
    plugin = skip_reports(session)
    ran = 0
    for _what, env in runnable(session, backend):
        ran += 1
        # "slow or not slow": also the README main-job run (>= 95% on digits) in tests/examples
        # SINGA_DEVICE makes the backend the default device, so tests/nn (layers, models, graph
        # mode) runs on it too
        run_targets = targets if ran == 1 else REPEAT_TARGETS.get(backend, targets)
        session.run("pytest", "-q", *plugin, *workers(), "-m", "slow or not slow",
                    *run_targets, *args, *session.posargs, env={"SINGA_DEVICE": backend, **env})
    if not ran:
        session.error(f"no run of the {backend} suite could happen on this machine")


# requires-python is >= 3.10: the oldest and the newest supported Python run the core tests
# and the examples (the README's main job among them) on the CPU; the backend sessions run on
# the default interpreter, GPU nodes on their 3.12 (tools/gpu_check.py)
PYTHONS = ["3.10", "3.13"]


def interpreter(version: str) -> str | None:
    """A working ``python<version>``: the one on ``PATH``, else pyenv's (a pyenv shim on
    ``PATH`` fails for a version pyenv has not selected, so each candidate is run once)."""
    import glob
    import subprocess

    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = [shutil.which(f"python{version}"), *sorted(glob.glob(os.path.join(
        root, "versions", f"{version}.*", "bin", f"python{version}")), reverse=True)]
    for exe in filter(None, found):
        if subprocess.run([exe, "-c", "import sys"], capture_output=True).returncode == 0:
            return exe
    return None


@nox.session(venv_backend="none")
@nox.parametrize("version", PYTHONS)
def pythons(session: nox.Session, version: str) -> None:
    """tests/core and tests/examples (the seed CNN to >= 95% on digits included) on Python 3.10
    and 3.13, in a fresh virtual environment installed as the README says
    (``pip install ".[examples]"``)."""
    import tempfile

    exe = interpreter(version)
    if exe is None:
        session.error(f"Python {version} was not found (on PATH or in pyenv): install it, "
                      f"e.g. pyenv install {version}")
    venv = os.path.join(tempfile.mkdtemp(prefix=f"singa-py{version}-"), "venv")
    session.run(exe, "-m", "venv", venv, external=True)
    py = os.path.join(venv, "bin", "python")
    # --no-cache-dir: pip's wheel cache would serve a sibling built from this same path before
    # (its file: URL looks like name-version to pip), not the code as it is now
    session.run(py, "-m", "pip", "install", "-q", "--no-cache-dir", *TEST_DEPS, ".[examples]",
                external=True)
    plugin = skip_reports(session)
    session.run(py, "-m", "pytest", "-q", *plugin, *workers(), "-m", "slow or not slow",
                "tests/core", "tests/examples", *session.posargs, env={"SINGA_DEVICE": "cpu"},
                external=True)
    _remove(session, os.path.dirname(venv), "the environment")


TEMPLATE = "./examples/plugin-template"


@nox.session
@drops_venv
def template(session: nox.Session) -> None:
    """examples/plugin-template installed from its path, as a vendor's CI runs it: the
    conformance kit on its native kernels, then its tests (fallbacks warned once per op and
    counted per op; the seed CNN reaching >= 95% on digits in graph mode on its device)."""
    session.install(f"{CORE}[testing]", f"{TEMPLATE}[test]")
    session.run("python", "-c", PREFLIGHT, "template")
    plugin = skip_reports(session)
    session.run("pytest", "-q", *plugin, "--pyargs", "singa.testing.conformance",
                "--singa-backend", "template", *session.posargs)
    session.run("pytest", "-q", *plugin, "-m", "slow or not slow", f"{TEMPLATE}/tests",
                *session.posargs)


# What the CUDA backend can verify without a GPU: only the small wheels (cupy imports without a
# driver; NVRTC and the runtime headers compile kernels), never the 2.8 GB cuDNN/full extra.
# Both stacks users have: CUDA 12 (NVRTC 12 compiles for sm_70 up to sm_90) and CUDA 13 (NVRTC
# 13: sm_75 up to sm_121; its NVRTC/runtime wheels have no -cu13 suffix).
CUDA_CHECK_DEPS = {
    "12": ["cupy-cuda12x>=14", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12"],
    "13": ["cupy-cuda13x>=14", "nvidia-cuda-nvrtc>=13,<14", "nvidia-cuda-runtime>=13,<14"],
}


@nox.session
@nox.parametrize("stack", list(CUDA_CHECK_DEPS))
@drops_venv
def cuda(session: nox.Session, stack: str) -> None:
    """singa-cuda without a GPU, once per CUDA stack: every .cu kernel and every elementwise
    chain compiles with that stack's NVRTC for every architecture it supports of
    ``WANTED_ARCHS``, the kernel plan covers the op table and every fusion, the shared
    array-module kernels pass the conformance kit on numpy, the .cu kernels built for the CPU
    pass it too (fused ones bitwise), graph mode runs over the whole CUDA table on the CPU, the
    struct arguments match the C layout under NVRTC and g++, the pure-Python parts (pinned
    staging included) have unit tests, the probe finds the stack's headers and blames only the
    missing driver, get_device("cuda") and the doctor say so, and tools/gpu_check.py installs
    from built wheels and reports each step; NCCL's messages name the NCCL wheel of this
    stack's cupy (tests/dist/test_nccl.py). GPU-only tests skip with their reason (on a GPU
    machine they run, with the conformance kit on ``cuda``)."""
    session.install(*TEST_DEPS, CORE, "./packages/singa-cpu", "./packages/singa-cuda",
                    "./packages/singa-dist[mpi]", *CUDA_CHECK_DEPS[stack])
    session.run("python", "-c", "from singa_cuda import _probe, _nvrtc; f = _probe.facts(); "
                f"assert f.stack == {stack}, _probe.stack_name(f); "
                "print(_probe.stack_name(f), 'NVRTC archs', _nvrtc.supported_archs(), "
                "'checked', _nvrtc.checked_archs())")
    plugin = skip_reports(session)
    # workers: NVRTC compiles every kernel for every architecture, CPU-bound (on 2 cores 158 s
    # in one process, 75 s on two workers)
    session.run("pytest", "-q", *plugin, *workers(), "packages/singa-cuda/tests",
                *session.posargs)
    # NCCL's messages with this stack's cupy and no NCCL library (cupy.cuda.nccl a stub): the
    # probe names the NCCL wheel of the installed cupy (its collectives need a GPU)
    session.run("pytest", "-q", *plugin, "-p", "no:cacheprovider", "tests/dist/test_nccl.py",
                *session.posargs)


# The cuDNN frontend for the Python that GPU images ship (the node has cuDNN, cupy, NCCL, torch):
# its wheel is platform-specific, so it is fetched here for the node's Python and platform.
WHEEL_PYTHON = os.environ.get("SINGA_WHEEL_PYTHON", "3.12")
WHEEL_PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                   "manylinux2014_x86_64"]


@nox.session
def wheels(session: nox.Session) -> None:
    """wheelhouse/: the wheels of every package of this checkout and NVIDIA's cuDNN frontend
    for Python ``SINGA_WHEEL_PYTHON`` (default 3.12) on x86-64 Linux: everything
    ``tools/gpu_check.py`` installs on a GPU node without network (copy the folder there)."""
    out = "wheelhouse"
    session.run("python", "-c", f"import shutil; shutil.rmtree({out!r}, ignore_errors=True)")
    session.install("pip>=23")
    session.run("pip", "wheel", "-q", "--no-deps", "-w", out, CORE, "./packages/singa-cpu",
                "./packages/singa-cuda", "./packages/singa-dist", "./packages/singa-onnx")
    session.run("pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", out,
                "--python-version", WHEEL_PYTHON, "--implementation", "cp",
                *(a for p in WHEEL_PLATFORMS for a in ("--platform", p)),
                "nvidia-cudnn-frontend")
    session.run("python", "-c", f"import os; print(sorted(os.listdir({out!r})))")


@nox.session
@drops_venv
def dist(session: nox.Session) -> None:
    """tests/dist: once as one process (the single-rank checks, plus the tests that launch
    their own mpiexec: faults, examples), then under ``mpiexec -n 2`` and ``-n 3`` from the
    session's venv (the mpich wheel provides mpiexec; no system MPI), on the CPU; then the
    operations and DistOpt tests on 2 ranks on each OpenCL runtime that can run here."""
    session.install(*TEST_DEPS, CORE, "./packages/singa-cpu", ".[examples]",
                    "./packages/singa-dist[mpi]")
    env = {"SINGA_DEVICE": "cpu"}
    plugin = skip_reports(session)
    session.run("pytest", "-q", *plugin, "-p", "no:cacheprovider", "tests/dist",
                *session.posargs, env=env)
    for n in ("2", "3"):
        session.log(f"run: tests/dist on {n} MPI ranks")
        session.run("mpiexec", "-n", n, "python", "-m", "pytest", "-q", *plugin, "-p",
                    "no:cacheprovider", "tests/dist", *session.posargs, env=env)
    # the operations, every DistOpt mode and graph overlap on OpenCL devices (host staging), 2
    # ranks, on each OpenCL runtime that can run here (same preflight as the opencl session)
    session.install("./packages/singa-opencl[cpu]")
    for what, cl_env in runnable(session, "opencl"):
        session.log(f"run: tests/dist operations and DistOpt on 2 MPI ranks, {what}")
        session.run("mpiexec", "-n", "2", "python", "-m", "pytest", "-q", *plugin, "-p",
                    "no:cacheprovider", "tests/dist/test_ops.py", "tests/dist/test_distopt.py",
                    "tests/dist/test_overlap.py", "--singa-backend", "opencl", *session.posargs,
                    env=cl_env)


# torch comes from the CPU wheel on the machine's disk: pinned, and installed on its own so
# that no resolver can swap in a CUDA build; onnxscript is what torch's dynamo exporter needs
ONNX_DEPS = [CORE, "./packages/singa-cpu", "./packages/singa-onnx", ".[examples]", "onnx",
             "onnxruntime", "onnxscript", "./packages/singa-opencl[cpu]"]
# the imported-model tests repeated on each OpenCL runtime (node tests: a representative
# subset there, see tests/onnx/test_node_backend.py); the fuzz corpus checks parsing and
# validation, which do not depend on the device, and runs on the CPU only
ONNX_DEVICE_TESTS = ["tests/onnx/test_torch_models.py", "tests/onnx/test_roundtrip.py",
                     "tests/onnx/test_graph_mode.py", "tests/onnx/test_sonnx_model.py",
                     "tests/onnx/test_extra_ops.py", "tests/onnx/test_node_backend.py"]


@nox.session
@drops_venv
def onnx(session: nox.Session) -> None:
    """singa-onnx: node tests (with the exclusion file), round trips, PyTorch models (both
    exporters), graph mode, fine-tuning and fuzz on the CPU; then the imported-model tests on
    each OpenCL runtime of the opencl session (a runtime that cannot compile for this CPU is
    skipped with the reason, as there). CUDA needs a GPU: not run here."""
    session.install(*TEST_DEPS, *ONNX_DEPS)
    session.install("torch==2.13.0")
    session.run("python", "-c", "import torch; assert not torch.version.cuda, torch.version.cuda")
    plugin = skip_reports(session)
    session.run("pytest", "-q", *plugin, *workers(), "tests/onnx", *session.posargs,
                env={"SINGA_DEVICE": "cpu"})
    for what, env in runnable(session, "opencl"):
        session.log(f"run: imported models on OpenCL, {what}")
        session.run("pytest", "-q", *plugin, *workers(), *ONNX_DEVICE_TESTS, *session.posargs,
                    env={"SINGA_DEVICE": "opencl", **env})


@nox.session(venv_backend="none")
def skips(session: nox.Session) -> None:
    """The skip reports of every session that ran (``.skip-report/``, tools/skip_report.py):
    per session, how many tests each skip reason covered; fails listing every test that was
    skipped in every session that collected it, unless marked
    ``@pytest.mark.needs_hardware("...")``. ``nox`` runs it last; run alone with no reports it
    says there is nothing to check and passes."""
    session.run(sys.executable, os.path.join(TOOLS, "skip_report.py"), SKIP_REPORTS,
                external=True)
