"""The benchmark scripts of ``benchmarks/`` loaded as modules, for the tests of their drivers
(tests/ is on ``sys.path``, as for :mod:`_shared_models`): each test file's module-scoped
fixture calls :func:`load` once."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` executed as a fresh module named ``<name>_bench`` (its
    ``main`` not run: the scripts guard it with ``if __name__ == "__main__"``)."""
    spec = importlib.util.spec_from_file_location(f"{name}_bench", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
