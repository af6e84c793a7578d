"""Shared helpers for the example smoke tests.

Tests marked ``slow`` (training to an accuracy target) are skipped unless selected with
``-m slow`` (e.g. ``pytest tests/examples -m slow``), so a plain run stays short.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: select with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolate_global_state():
    """Leave autograd's training flag and the host device's graph as they were."""
    from singa import autograd
    from singa.device import get_default_device

    prev = autograd.training
    yield
    autograd.training = prev
    dev = get_default_device()
    dev.EnableGraph(False)
    dev.ResetGraph()
