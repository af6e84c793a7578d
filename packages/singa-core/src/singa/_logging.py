"""SINGA's diagnostics: the ``singa`` logger and its children (``singa.plugins``, ...).

Quiet by default, as a library should be: the ``singa`` logger has a ``NullHandler`` and no
level of its own, so its records go to whatever logging the application set up
(``logging.basicConfig(level=logging.DEBUG)`` shows them all) and nowhere otherwise.
``SINGA_LOG_LEVEL=DEBUG`` (or INFO, WARNING, ERROR) shows them without setting up logging: it
gives the ``singa`` logger that level and a handler printing to stderr (and stops them
propagating, so an application's own root handler does not print them twice).
``SINGA_TRACE_PLUGINS=1`` does the same for ``singa.plugins`` at DEBUG.

What a user must act on stays a ``warnings.warn`` (a host fallback, a deprecation); what a
command is asked to print (the doctor, the conformance report) stays ``print``.
"""

from __future__ import annotations

import logging
import sys

from . import config

__all__ = ["ROOT", "configure", "get_logger"]

ROOT = "singa"
_FORMAT = "%(name)s %(levelname)s: %(message)s"


class _StderrHandler(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` at each record (as ``logging.lastResort`` does),
    so that a stderr redirected or captured after import gets the records."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)
        self.setFormatter(logging.Formatter(_FORMAT))

    @property
    def stream(self):
        return sys.stderr


_STDERR = _StderrHandler()
#: what configure() set from the environment, so that it undoes only its own settings
_applied: dict[str, bool] = {"level": False, "trace": False}


def configure() -> None:
    """Apply ``SINGA_LOG_LEVEL`` and ``SINGA_TRACE_PLUGINS`` to the ``singa`` loggers.

    Called when a module that logs is imported and when plugins are discovered; settings made
    in code (``logging.getLogger("singa").setLevel(...)``) are left alone unless the
    environment names a level.
    """
    root = logging.getLogger(ROOT)
    if not any(isinstance(h, logging.NullHandler) for h in root.handlers):
        root.addHandler(logging.NullHandler())
    level = config.get("SINGA_LOG_LEVEL")
    trace = bool(config.get("SINGA_TRACE_PLUGINS"))
    if level is not None:
        root.setLevel(level)
    elif _applied["level"]:
        root.setLevel(logging.NOTSET)
    plugins = logging.getLogger(f"{ROOT}.plugins")
    if trace:
        plugins.setLevel(logging.DEBUG)
    elif _applied["trace"]:
        plugins.setLevel(logging.NOTSET)
    show = level is not None or trace
    if show and _STDERR not in root.handlers:
        root.addHandler(_STDERR)
        root.propagate = False
    elif not show and _STDERR in root.handlers:
        root.removeHandler(_STDERR)
        root.propagate = True
    _applied["level"], _applied["trace"] = level is not None, trace


def get_logger(name: str) -> logging.Logger:
    """The logger ``singa.<name>``, with the environment's settings applied."""
    configure()
    return logging.getLogger(f"{ROOT}.{name}")
