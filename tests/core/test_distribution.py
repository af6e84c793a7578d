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


def test_the_meta_package_in_this_checkout_pins_our_packages():
    import tomllib

    root = Path(__file__).resolve().parents[2] / "pyproject.toml"
    project = tomllib.loads(root.read_text())["project"]
    assert project["name"] == "singa" and project["version"] == "0.1.0"
    deps = project["dependencies"]
    assert f"singa-core=={project['version']}" in deps
    assert all(not d.startswith("singa ") and d != "singa" for d in deps)
