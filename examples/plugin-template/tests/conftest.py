"""Tests marked ``slow`` (training to an accuracy target) run only when selected with
``-m slow`` (or ``-m "slow or not slow"``, as the noxfile does)."""

import pytest


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: select with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
