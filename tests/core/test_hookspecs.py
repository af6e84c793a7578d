"""Meta-tests of the plugin contract (datasette style): every hook is documented and tested."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from singa import hookspecs

TESTS = Path(__file__).resolve().parents[1]


def _hooks():
    marker = f"{hookspecs.PROJECT_NAME}_spec"
    return {
        name: fn for name, fn in vars(hookspecs).items() if callable(fn) and hasattr(fn, marker)
    }


def test_there_are_hooks_and_all_are_exported():
    hooks = _hooks()
    assert {"singa_backends", "singa_communicators"} <= set(hooks)
    assert set(hooks) <= set(hookspecs.__all__)


@pytest.mark.parametrize("name", sorted(_hooks()))
def test_hook_is_documented(name):
    fn = _hooks()[name]
    doc = inspect.getdoc(fn) or ""
    assert doc.strip(), f"hook {name} has no docstring"
    for param in inspect.signature(fn).parameters:
        assert param in doc, f"hook {name}: parameter {param!r} is not documented"
    assert ":returns:" in doc or "Returns" in doc, f"hook {name}: return value not documented"
    assert "Example" in doc and "@hookimpl" in doc, f"hook {name}: no example implementation"


@pytest.mark.parametrize("name", sorted(_hooks()))
def test_hook_is_exercised_by_some_test(name):
    this = Path(__file__).resolve()
    sources = [p for p in TESTS.rglob("*.py") if p.resolve() != this]
    assert any(name in p.read_text(errors="replace") for p in sources), (
        f"no test or test plugin under tests/ implements or mentions hook {name}"
    )
