"""The reference site's strict build catches what it promises to (run in the ``docs`` nox
session, after the session's own ``mkdocs build --strict`` of the checkout).

Each test builds a copy of ``docs/`` and ``mkdocs.yml`` with one planted fault and asserts the
build fails naming it; the untouched copy must build, so a failure is the plant's doing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="the docs session installs mkdocs (and PyYAML)")
pytest.importorskip("mkdocstrings", reason="the docs session installs mkdocstrings")

ROOT = Path(__file__).resolve().parents[2]


class _Loader(yaml.SafeLoader):
    """A safe loader that keeps mkdocs' ``!!python/name`` and ``!ENV`` tags as plain values."""


_Loader.add_multi_constructor("", lambda loader, suffix, node: None)


def site(tmp_path: Path, plant=None) -> subprocess.CompletedProcess:
    """Build a copy of the site (``plant(docs, config)`` edits it first); returns the run."""
    docs = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", docs)
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=_Loader)
    config["docs_dir"] = str(docs)
    config["site_dir"] = str(tmp_path / "site")
    python = config["plugins"][-1]["mkdocstrings"]["handlers"]["python"]
    python["paths"] = [str(ROOT / p) for p in python["paths"]]
    if plant is not None:
        plant(tmp_path, config)
    (tmp_path / "mkdocs.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(tmp_path / "mkdocs.yml")], capture_output=True, text=True,
                          cwd=tmp_path)


def test_the_unchanged_copy_builds(tmp_path):
    run = site(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]


def test_an_unresolved_cross_reference_in_a_page_fails(tmp_path):
    def plant(root, config):
        page = root / "docs" / "reference" / "index.md"
        page.write_text(page.read_text() + "\nSee [Tensor][singa.tensor.NoSuchTensor].\n")

    run = site(tmp_path, plant)
    assert run.returncode != 0
    assert "singa.tensor.NoSuchTensor" in run.stderr


def test_an_unresolved_cross_reference_in_a_docstring_fails(tmp_path):
    def plant(root, config):
        (root / "planted").mkdir()
        (root / "planted" / "planted_mod.py").write_text(
            '"""A module whose docstring names [a layer][singa.layer.NoSuchLayer]."""\n')
        config["plugins"][-1]["mkdocstrings"]["handlers"]["python"]["paths"].append(
            str(root / "planted"))
        (root / "docs" / "reference" / "planted.md").write_text("::: planted_mod\n")
        config["nav"][-1]["API reference"].append({"planted": "reference/planted.md"})

    run = site(tmp_path, plant)
    assert run.returncode != 0
    assert "singa.layer.NoSuchLayer" in run.stderr


def test_a_link_to_a_missing_page_fails(tmp_path):
    def plant(root, config):
        page = root / "docs" / "testing.md"
        page.write_text(page.read_text() + "\nSee [the guide](no-such-guide.md).\n")

    run = site(tmp_path, plant)
    assert run.returncode != 0
    assert "no-such-guide.md" in run.stderr


# the modules whose pages must list every public name of the API snapshot, generated ones
# (built from the op records at import time) included
SNAPSHOT = ROOT / "tests" / "core" / "data" / "public_api_snapshot.json"
PAGES = {"singa.tensor": "tensor", "singa.autograd": "autograd"}


@pytest.fixture(scope="module")
def built_pages(tmp_path_factory) -> dict[str, str]:
    """The HTML of the tensor and autograd reference pages of one strict build."""
    tmp_path = tmp_path_factory.mktemp("pages")
    run = site(tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    return {module: (tmp_path / "site" / "reference" / page / "index.html").read_text()
            for module, page in PAGES.items()}


@pytest.mark.parametrize("module", sorted(PAGES))
def test_every_public_name_has_an_entry(built_pages, module):
    import json

    names = json.loads(SNAPSHOT.read_text())[module]
    missing = [name for name in names if f'id="{module}.{name}"' not in built_pages[module]]
    assert not missing, f"{module}: no entry on the reference page for {missing}"


@pytest.mark.parametrize("path", ["singa.autograd.sigmoid", "singa.autograd.Sigmoid",
                                  "singa.autograd.add", "singa.autograd.Less",
                                  "singa.tensor.sigmoid", "singa.tensor.eltwise_mult"])
def test_a_generated_name_shows_its_record_docstring(built_pages, path):
    import html
    import importlib

    module, name = path.rsplit(".", 1)
    first = importlib.import_module(module).__dict__[name].__doc__.split("``")[0]
    assert first.startswith(("y = ", "Operator of y = ")), first
    page = built_pages[module]
    entry = page[page.index(f'id="{path}"'):]
    assert html.escape(first.strip(), quote=False) in entry[:4000], path


@pytest.mark.parametrize("name", ["_Conv2d", "_BatchNorm2d", "_Pooling2d", "_RNN"])
def test_singas_underscored_operator_classes_have_entries(built_pages, name):
    # SINGA code constructs these directly (autograd._Conv2d(handle, odd_padding)), so the
    # page documents them despite the underscore, with the docstring completed at run time
    import html
    import inspect

    from singa import autograd

    page = built_pages["singa.autograd"]
    assert f'id="singa.autograd.{name}"' in page, name
    entry = page[page.index(f'id="singa.autograd.{name}"'):][:6000]
    doc = inspect.getdoc(getattr(autograd, name))
    assert html.escape(doc.split("``")[0].split("\n")[0].strip(), quote=False) in entry, name
    if "Parameters" in doc:
        assert "Parameters:" in entry, name


def test_the_build_imports_only_the_documented_modules(tmp_path):
    # the extension imports singa.tensor and singa.autograd; a whole-package inspection would
    # also import singa.__main__ and singa.testing.__main__, which parse sys.argv and exit
    site(tmp_path)
    script = (
        "import sys\n"
        "from mkdocs.commands.build import build\n"
        "from mkdocs.config import load_config\n"
        "seen = []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('singa') and name.endswith('__main__'):\n"
        "            seen.append(name)\n"
        "sys.meta_path.insert(0, Spy())\n"
        "try:\n"
        f"    build(load_config({str(tmp_path / 'mkdocs.yml')!r}, strict=True))\n"
        "finally:\n"
        "    print(sorted(seen))\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stdout[-2000:]
