"""SINGA: a deep-learning framework with pluggable hardware backends.

``import singa`` is cheap: it loads no plugin and no submodule. Submodules (``singa.tensor``,
``singa.device``, ``singa.autograd``, ...) load on first access, and backends are discovered
on the first device query.
"""

from __future__ import annotations

import importlib

__all__ = [
    "__version__",
    "autograd",
    "config",
    "device",
    "errors",
    "image_tool",
    "initializer",
    "layer",
    "model",
    "opt",
    "ops",
    "plugins",
    "singa_wrap",
    "tensor",
    "utils",
    "data",
    "scheduler",
    "graph",
    "dist",
    "backend",
    "sonnx",
]

_SUBMODULES = frozenset(__all__) - {"__version__", "sonnx"}


def __getattr__(name: str):
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("singa-core")
        except PackageNotFoundError:
            return "0+unknown"
    if name in _SUBMODULES:
        return importlib.import_module(f"singa.{name}")
    if name == "sonnx":
        return importlib.import_module("singa.sonnx")
    raise AttributeError(f"module 'singa' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
