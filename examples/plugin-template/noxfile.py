"""CI of the backend: the conformance kit on its native kernels, then its own tests.

``nox`` runs both sessions. singa-core comes from the index (``singa-core[testing]``); to test
against a checkout instead, point ``SINGA_CORE`` at it::

    SINGA_CORE="/path/to/singa/packages/singa-core[testing]" nox
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["conformance", "tests"]
CORE = os.environ.get("SINGA_CORE", "singa-core[testing]")
BACKEND = "template"  # the backend name of BackendSpec.name


@nox.session
def conformance(session: nox.Session) -> None:
    """Every native kernel against the op table's numpy references."""
    session.install(CORE, ".")
    session.run("python", "-m", "singa", "info")
    session.run("pytest", "-q", "--pyargs", "singa.testing.conformance",
                "--singa-backend", BACKEND, *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """The backend's own tests, the slow training run included."""
    session.install(CORE, ".[test]")
    session.run("pytest", "-q", "-m", "slow or not slow", "tests", *session.posargs)
