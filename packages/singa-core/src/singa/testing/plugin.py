"""pytest plugin: command-line options and fixtures for testing SINGA backends."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser):
    group = parser.getgroup("singa", "SINGA backend testing")
    group.addoption(
        "--singa-backend",
        action="store",
        default=None,
        help="backend (device string) under test, e.g. cpu, opencl, opencl:0, cuda:0; "
        "default: $SINGA_DEVICE or cpu",
    )


def _device_string(config) -> str:
    return config.getoption("--singa-backend") or os.environ.get("SINGA_DEVICE") or "cpu"


@pytest.fixture(scope="session")
def singa_backend(pytestconfig) -> str:
    """The device string under test."""
    return _device_string(pytestconfig)


@pytest.fixture(scope="session")
def singa_device(singa_backend):
    """The Device under test (fails loudly if its backend cannot be used)."""
    from singa.device import get_device

    return get_device(singa_backend)
