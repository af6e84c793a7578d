"""Test sessions: one per backend, plus lint.

``nox`` runs them all (what CI runs); ``nox -s "tests(backend='opencl')"`` runs one. Each
backend session installs singa-core and that backend from this checkout, asserts that the
backend it asked for is the one that runs, and fails if pytest collects no test.
"""

from __future__ import annotations

import os
import platform

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True

CORE = "./packages/singa-core"
TEST_DEPS = ["pytest>=7", "hypothesis>=6"]

# backend -> (packages to install, pytest targets)
BACKENDS = {
    "cpu": (
        # torch: the PyTorch cross-checks in tests/core/test_nn_references.py and
        # tests/nn/test_opt.py (skipped where torch is missing); pip takes the CPU wheel
        # that this machine keeps on local disk
        [CORE, "./packages/singa-cpu", ".[examples]", "torch==2.13.0"],
        ["tests/core", "tests/backend", "tests/nn", "tests/examples"],
    ),
    "opencl": (
        # the `cpu` extra: pocl from PyPI and, on Linux x86_64, Intel's CPU runtime
        [CORE, "./packages/singa-cpu", "./packages/singa-opencl[cpu]"],
        ["tests/backend", "tests/nn", "packages/singa-opencl/tests"],
    ),
}

# backend -> the runs of its targets, each (what runs, extra environment). Each OpenCL run names
# its device: the ICD loader lists platforms in directory order, so with several runtimes
# installed "opencl:0" alone is not a fixed device. A run whose device is missing fails (the
# preflight cannot create it); it is never skipped.
INTEL_CPU_RUNTIME = platform.system() == "Linux" and platform.machine() == "x86_64"
RUNS = {
    "cpu": [("cpu", {})],
    "opencl": [
        # pocl: Debian's (.ci/run installs it) where the PyPI wheel's LLVM cannot compile
        ("pocl", {"SINGA_OPENCL_DEVICE": "Portable Computing Language"}),
        # Intel's CPU runtime from PyPI, exposed to the loader by singa_opencl._icd
        *([("Intel CPU runtime", {"SINGA_OPENCL_DEVICE": "Intel(R) OpenCL"})]
          if INTEL_CPU_RUNTIME else []),
    ],
}

PREFLIGHT = """
import sys
from singa.device import get_device
want = sys.argv[1]
dev = get_device(want)
assert dev.backend == want, f"asked for backend {want!r} but got {dev.backend!r}"
describe = getattr(dev, "describe", None)  # backend-specific (OpenCL: platform / device)
print(f"preflight: running on {dev.name} ({type(dev).__name__}), {len(dev.kernels)} kernels"
      + (f": {describe()}" if describe else ""))
"""


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole repository."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")


@nox.session
@nox.parametrize("backend", list(BACKENDS))
def tests(session: nox.Session, backend: str) -> None:
    """The test suite for one backend."""
    packages, targets = BACKENDS[backend]
    session.install(*TEST_DEPS, *packages)
    xfails = f"packages/singa-{backend}/conformance-xfails.txt"
    args = ["--singa-backend", backend]
    if os.path.exists(xfails):
        args += ["--singa-xfails", xfails]
    for what, env in RUNS[backend]:
        session.log(f"run: {what}")
        session.run("python", "-c", PREFLIGHT, backend, env=env)
        # "slow or not slow": also the README main-job run (>= 95% on digits) in tests/examples
        # SINGA_DEVICE makes the backend the default device, so tests/nn (layers, models, graph
        # mode) runs on it too
        session.run("pytest", "-q", "-m", "slow or not slow", *targets, *args, *session.posargs,
                    env={"SINGA_DEVICE": backend, **env})
