"""Test sessions: one per backend, plus lint.

``nox`` runs them all (what CI runs); ``nox -s "tests(backend='opencl')"`` runs one. Each
backend session installs singa-core and that backend from this checkout, asserts that the
backend it asked for is the one that runs, and fails if pytest collects no test.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = False
nox.options.error_on_missing_interpreters = True

CORE = "./packages/singa-core"
TEST_DEPS = ["pytest>=7", "hypothesis>=6"]

# backend -> (packages to install, pytest targets)
BACKENDS = {
    "cpu": (
        [CORE, "./packages/singa-cpu", ".[examples]"],
        ["tests/core", "tests/backend", "tests/nn", "tests/examples"],
    ),
    "opencl": (
        [CORE, "./packages/singa-cpu", "./packages/singa-opencl[pocl]"],
        ["tests/backend", "tests/nn", "packages/singa-opencl/tests"],
    ),
}

PREFLIGHT = """
import sys
from singa.device import get_device
want = sys.argv[1]
dev = get_device(want)
assert dev.backend == want, f"asked for backend {want!r} but got {dev.backend!r}"
print(f"preflight: running on {dev.name} ({type(dev).__name__}), {len(dev.kernels)} kernels")
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
    session.run("python", "-c", PREFLIGHT, backend)
    xfails = f"packages/singa-{backend}/conformance-xfails.txt"
    args = ["--singa-backend", backend]
    if os.path.exists(xfails):
        args += ["--singa-xfails", xfails]
    # "slow or not slow": also the README main-job run (>= 95% on digits) in tests/examples
    # SINGA_DEVICE makes the backend the default device, so tests/nn (layers, models, graph
    # mode) runs on it too
    session.run("pytest", "-q", "-m", "slow or not slow", *targets, *args, *session.posargs,
                env={"SINGA_DEVICE": backend})
