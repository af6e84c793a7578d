"""Backend test session: pick the backend's xfail file and assert the backend that runs is the
one that was asked for (a plugin that silently fails to load must not pass as another)."""

from __future__ import annotations

from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]


def pytest_configure(config):
    if config.getoption("--singa-xfails") is None:
        from singa.device import parse_device_string
        from singa.testing.plugin import device_string

        backend, _ = parse_device_string(device_string(config))
        candidate = _REPO / "packages" / f"singa-{backend}" / "conformance-xfails.txt"
        if candidate.is_file():
            config.option.singa_xfails = str(candidate)


@pytest.fixture(scope="session", autouse=True)
def _backend_is_the_requested_one(singa_backend, singa_device):
    from singa.backend import registry
    from singa.device import parse_device_string

    name, index = parse_device_string(singa_backend)
    assert singa_device.backend == registry().resolve_name(name), (
        f"asked for backend {name!r} but the device under test is {singa_device.name}"
    )
