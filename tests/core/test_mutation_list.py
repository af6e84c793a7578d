"""tools/mutation_check.py stays applicable: each planted bug's original text is in its file
exactly once (else the code moved and the entry must follow it), the bug changes that text,
and each pytest target it names exists. Running the mutants is the tool's job (minutes, not a
unit test): docs/testing.md."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mutation_check",
                                               ROOT / "tools" / "mutation_check.py")
mutation_check = importlib.util.module_from_spec(_spec)
sys.modules["mutation_check"] = mutation_check  # dataclasses look their module up
_spec.loader.exec_module(mutation_check)
MUTANTS = mutation_check.MUTANTS


def test_names_are_unique():
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("m", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_applies_once_and_names_existing_targets(m):
    text = (ROOT / m.path).read_text()
    assert text.count(m.original) == 1, f"{m.path}: the original text of {m.name} moved"
    assert m.original != m.mutated
    files = [t.split("::")[0] for t in m.targets if t.startswith("tests/")]
    assert files, m.targets
    for f in files:
        assert (ROOT / f).is_file(), f
        for node in (t for t in m.targets if t.startswith(f + "::")):
            assert node.split("::")[1].split("[")[0] in (ROOT / f).read_text(), node


def test_the_copy_holds_the_working_tree_and_imports_from_itself(tmp_path):
    """What every mutant runs in: a copy of the repository whose packages are imported ahead
    of this checkout's editable installs (the working tree is never mutated)."""
    copy = tmp_path / "repo"
    copy.mkdir()
    mutation_check.make_copy(copy, from_head=False)
    for rel in ("tools/mutation_check.py", "packages/singa-core/src/singa/__init__.py",
                "tests/core/test_mutation_list.py"):
        assert (copy / rel).read_bytes() == (ROOT / rel).read_bytes()
    assert not any(p.name == "__pycache__" for p in copy.rglob("__pycache__"))
    mutation_check.check_imports_from(copy, mutation_check.copy_env(copy))
