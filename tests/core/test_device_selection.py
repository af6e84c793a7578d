"""Device strings, SINGA_DEVICE and the process-wide registry (singa.device platform API).

The process registry is swapped for a fresh one over the test plugins with
``singa.backend.set_registry`` and restored afterwards.
"""

from __future__ import annotations

import pytest
from singa import device
from singa.backend import set_registry
from singa.errors import DeviceUnavailableError

P = "singa_test_plugins."


@pytest.fixture
def fake_process_registry(make_registry):
    reg = make_registry({"singa-fake": {"fake": P + "good"}, "singa-other": {"other": P + "other"}})
    old = set_registry(reg)
    yield reg
    set_registry(old)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cpu", ("cpu", 0)),
        ("cuda:1", ("cuda", 1)),
        (" OpenCL:0 ", ("opencl", 0)),
        ("fake", ("fake", 0)),
    ],
)
def test_parse_device_string(text, expected):
    assert device.parse_device_string(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "cuda:x", "cuda:"])
def test_bad_device_strings_say_what_is_valid(text):
    with pytest.raises(DeviceUnavailableError, match="device string"):
        device.parse_device_string(text)


def test_singa_device_picks_the_default_device(fake_process_registry, monkeypatch):
    monkeypatch.setenv("SINGA_DEVICE", "fake:1")
    dev = device.get_default_device()
    assert dev.name == "fake:1"
    assert device.get_default_device() is dev
    assert dev is fake_process_registry.device("fake", 1)


def test_default_device_is_cpu_without_singa_device(fake_process_registry, monkeypatch):
    # the fake registry has no cpu backend: the default must fail loudly, not pick "fake"
    with pytest.raises(DeviceUnavailableError, match="'cpu' was requested"):
        device.get_default_device()


def test_singa_device_naming_a_missing_backend_never_falls_back(fake_process_registry, monkeypatch):
    monkeypatch.setenv("SINGA_DEVICE", "cuda:0")
    with pytest.raises(DeviceUnavailableError) as exc:
        device.get_default_device()
    msg = str(exc.value)
    assert "'cuda' was requested" in msg and "available backends: fake, other" in msg


def test_get_device_returns_singletons(fake_process_registry):
    assert device.get_device("fake:0") is device.get_device("fake")
    assert device.get_device("fk:1") is device.get_device("fake:1")
    assert device.get_device(device.get_device("other")) is device.get_device("other:0")


def test_get_device_out_of_range(fake_process_registry):
    with pytest.raises(DeviceUnavailableError, match=r"valid indices: 0\.\.0"):
        device.get_device("other:3")


def test_list_devices(fake_process_registry):
    assert device.list_devices() == ["fake:0", "fake:1", "other:0"]


def test_set_registry_resets_the_default_device(fake_process_registry, monkeypatch, make_registry):
    monkeypatch.setenv("SINGA_DEVICE", "fake")
    first = device.get_default_device()
    new = make_registry({"singa-fake": {"fake": P + "good"}})
    old = set_registry(new)
    try:
        second = device.get_default_device()
        assert second is not first and second is new.device("fake")
    finally:
        set_registry(old)


def test_float32_precision_is_validated_and_defaults_to_full_precision():
    from singa.device import get_device
    from singa.errors import HyperparameterError

    dev = get_device("cpu")
    assert dev.float32_precision == "highest"
    with pytest.raises(HyperparameterError, match="'highest'.*'high'"):
        dev.float32_precision = "tf32"
    try:
        dev.float32_precision = "high"  # accepted; the CPU has no reduced format to use
        assert dev.float32_precision == "high"
    finally:
        dev.float32_precision = "highest"
