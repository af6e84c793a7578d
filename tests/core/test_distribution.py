"""The installed ``singa`` is ours, not the unrelated ``singa`` 3.0.0.dev1 on the index."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

import pytest
import singa


def _files_of(dist) -> set[Path]:
    return {Path(dist.locate_file(f)).resolve() for f in (dist.files or [])}


def _editable_roots(dist) -> list[Path]:
    """Source directories an editable install points at (its ``.pth`` files)."""
    roots = []
    for f in dist.files or []:
        if f.suffix == ".pth":
            for line in Path(dist.locate_file(f)).read_text().splitlines():
                line = line.strip()
                if line and not line.startswith(("#", "import ")):
                    roots.append(Path(line).resolve())
    return roots


def test_singa_core_metadata_exists_and_owns_the_package():
    dist = md.distribution("singa-core")
    assert dist.metadata["Name"] == "singa-core"
    init = Path(singa.__file__).resolve()
    owned = init in _files_of(dist) or any(init.is_relative_to(r) for r in _editable_roots(dist))
    assert owned, f"singa is imported from {init}, which singa-core does not install"
    assert singa.__version__ == dist.version


def test_a_distribution_named_singa_if_installed_is_our_meta_package():
    try:
        dist = md.distribution("singa")
    except md.PackageNotFoundError:
        pytest.skip("the singa meta-package is not installed (singa-core is installed directly)")
    assert dist.version == "0.1.0", (
        f"singa {dist.version} is installed: that is the unrelated 2020 package from the index;"
        " pip uninstall singa, then pip install ./ (this checkout's meta-package)"
    )
    requires = " ".join(dist.requires or [])
    assert "singa-core" in requires


def test_backends_depend_on_singa_core_never_on_singa():
    for ep in md.entry_points(group="singa"):
        dist = ep.dist
        if dist is None:
            continue
        names = [r.split(";")[0].split("[")[0].strip() for r in dist.requires or []]
        names = [
            n.split("=")[0].split(">")[0].split("<")[0].split("~")[0].split("!")[0].strip()
            for n in names
        ]
        assert "singa" not in names, f"{dist.metadata['Name']} depends on 'singa'"


def test_the_meta_package_in_this_checkout_takes_our_packages_from_it():
    """Every sibling the meta-package requires, in its dependencies and in every extra, is a
    direct reference to its folder in this checkout (never a name the index could serve, where
    an unrelated ``singa`` exists); an extra may name the meta-package itself only with
    extras (``singa[cuda12]``), which pip resolves to this project."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        from pip._vendor import tomli as tomllib

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["name"] == "singa" and project["version"] == "0.1.0"
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    assert "singa-core @ {root:uri}/packages/singa-core" in project["dependencies"]
    for req in reqs:
        name = req.split("@")[0].split("[")[0].split(">")[0].split("=")[0].strip()
        if name == "singa":
            assert req.startswith("singa[") and "@" not in req, req
        elif name.startswith("singa-"):
            folder = req.split("@", 1)[1].strip()
            assert folder == f"{{root:uri}}/packages/{name}", req
            assert (root / "packages" / name / "pyproject.toml").is_file(), req
