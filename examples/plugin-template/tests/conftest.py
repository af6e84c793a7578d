"""Test configuration: this backend is the default device, and tests marked ``slow`` (training
to an accuracy target) run only when selected with ``-m slow`` (or ``-m "slow or not slow"``,
as the noxfile does)."""

import os

import pytest

# singa-core alone has no CPU device: tensors created without a device (an optimizer's step
# counter, ...) go to the default device, which SINGA_DEVICE names
os.environ.setdefault("SINGA_DEVICE", "template")


def pytest_collection_modifyitems(config, items):
    if "slow" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="slow: select with -m slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
