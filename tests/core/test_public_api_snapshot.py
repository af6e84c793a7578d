"""The public API of SINGA's modules against a snapshot: any drift fails.

For each module below, every public name (``__all__`` plus the names without a leading
underscore that are neither modules nor imported from outside singa, plus SINGA's own
underscored functions ``autograd._and``/``_or``/``_xor``/``_not``) is recorded with its kind and
``inspect.signature``; for a class, also each method and property it defines or inherits from
a singa class, with their signatures. Regenerate it (``python
tests/core/test_public_api_snapshot.py``) only for an intended API change, never to drop a name
SINGA's API has (``docs/compatibility.md`` lists where this one differs), and say why in
the commit.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pathlib
import sys
import types

import pytest

MODULES = ("singa.tensor", "singa.autograd", "singa.layer", "singa.opt", "singa.model",
           "singa.device", "singa.initializer")
SINGA_UNDERSCORED = {"singa.autograd": ("_and", "_or", "_xor", "_not")}
SNAPSHOT = pathlib.Path(__file__).with_name("data") / "public_api_snapshot.json"


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "<no signature>"


def _from_singa(obj) -> bool:
    module = getattr(obj, "__module__", None)
    return module is None or module.startswith("singa")


def _kind(obj) -> str:
    if inspect.isclass(obj):
        return "class"
    if isinstance(obj, types.FunctionType | types.BuiltinFunctionType):
        return "function"
    if callable(obj):
        return f"callable {type(obj).__name__}"
    return f"value {type(obj).__name__}"


def _class_members(cls) -> dict:
    members = {}
    for klass in cls.__mro__:
        if not klass.__module__.startswith("singa"):
            continue
        for name, attr in vars(klass).items():
            if name in members or (name.startswith("_") and not (
                    name.startswith("__") and name.endswith("__"))):
                continue
            # class bookkeeping, and what a Python version adds by itself (3.13's dataclasses
            # define __replace__ for copy.replace): the tests run on 3.10 to 3.13
            if name in ("__dict__", "__weakref__", "__module__", "__doc__", "__hash__",
                        "__annotations__", "__qualname__", "__firstlineno__",
                        "__static_attributes__", "__slots__", "__replace__"):
                continue
            if isinstance(attr, property):
                members[name] = "property"
            elif isinstance(attr, staticmethod | classmethod):
                members[name] = f"{type(attr).__name__} {_signature(attr.__func__)}"
            elif inspect.isfunction(attr):
                members[name] = f"method {_signature(attr)}"
            elif not callable(attr) and not name.startswith("__"):
                members[name] = f"attribute {type(attr).__name__}"
    return dict(sorted(members.items()))


def public_names(module) -> list:
    names = set(getattr(module, "__all__", ()))
    for name in dir(module):
        if name.startswith("_"):
            continue
        obj = getattr(module, name)
        if isinstance(obj, types.ModuleType) or not _from_singa(obj):
            continue
        names.add(name)
    names.update(SINGA_UNDERSCORED.get(module.__name__, ()))
    return sorted(names)


def describe(module) -> dict:
    out = {}
    for name in public_names(module):
        obj = getattr(module, name)
        entry = {"kind": _kind(obj)}
        if callable(obj):
            entry["signature"] = _signature(obj)
        if inspect.isclass(obj):
            entry["members"] = _class_members(obj)
        out[name] = entry
    return out


def current() -> dict:
    return {name: describe(importlib.import_module(name)) for name in MODULES}


@pytest.mark.parametrize("module", MODULES)
def test_public_api_matches_snapshot(module):
    expected = json.loads(SNAPSHOT.read_text())[module]
    got = describe(importlib.import_module(module))
    missing = sorted(set(expected) - set(got))
    added = sorted(set(got) - set(expected))
    changed = {n: (expected[n], got[n]) for n in sorted(set(expected) & set(got))
               if expected[n] != got[n]}
    assert not missing and not added and not changed, (
        f"{module}: public API drifted: missing {missing}, added {added}, changed {changed}; "
        "if intended, regenerate with python tests/core/test_public_api_snapshot.py")


def test_snapshot_covers_the_singa_api():
    # the snapshot is only a guard if it holds the names SINGA's API documents
    snap = json.loads(SNAPSHOT.read_text())
    assert {"Tensor", "sigmoid", "add", "eltwise_mult", "from_numpy"} <= set(snap["singa.tensor"])
    assert {"Sigmoid", "sigmoid", "Add", "add", "_and", "backward", "Operator"} <= set(
        snap["singa.autograd"])
    assert "__add__" in snap["singa.tensor"]["Tensor"]["members"]


if __name__ == "__main__":
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(current(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
