"""Fixtures for the backend-free core tests: test plugins, fake distributions, a clean env.

Plugin tests build a fresh :class:`singa.backend.PluginRegistry` per test from entry points
of ``*.dist-info`` directories written into ``tmp_path`` (the real importlib.metadata
machinery), pointing at the small plugin modules in ``tests/plugins``.
"""

from __future__ import annotations

import pytest
from core_helpers import PLUGINS_DIR, entry_points_in, write_dist


@pytest.fixture
def clean_env(monkeypatch):
    """No SINGA_* variable from the caller's environment leaks into the test."""
    from singa import config

    for name in config.ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def plugin_path(monkeypatch):
    """Make ``tests/plugins`` importable."""
    monkeypatch.syspath_prepend(str(PLUGINS_DIR))
    return PLUGINS_DIR


@pytest.fixture
def make_registry(tmp_path, plugin_path, clean_env):
    """``make_registry({dist_name: {ep_name: "module[:attr]"}})`` -> a fresh, unloaded
    PluginRegistry over those distributions only."""
    from singa.backend import PluginRegistry

    def make(dists: dict[str, dict[str, str]]):
        root = tmp_path / f"site{len(list(tmp_path.iterdir()))}"
        root.mkdir()
        for name, eps in dists.items():
            write_dist(root, name, eps)
        eps = entry_points_in(root)
        return PluginRegistry(entry_points=lambda: eps)

    return make
