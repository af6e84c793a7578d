"""Every call into a plugin after its import goes through the loader's one guard.

A plugin whose ``create_device``, ``device_count``, ``kernels``, probe, ``describe``, hook,
record validation, or communicator ``create``/probe calls ``sys.exit``, raises, or returns the
wrong type gives a :class:`~singa.errors.PluginError` naming the plugin and the call; the
process, the other backends and ``python -m singa info`` keep working. The plugins are in
``tests/plugins/singa_test_plugins/misbehaving_calls.py``.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from core_helpers import PLUGINS_DIR, os, run_python, write_dist
from singa.backend import SingaPluginWarning, set_registry
from singa.errors import PluginError

P = "singa_test_plugins.misbehaving_calls:"

# (plugin class, the call the PluginError names, what it says about the call)
DEVICE_CALLS = [
    ("ExitInCreateDevice", "create_device(0)", "sys.exit(3)"),
    ("RaiseInCreateDevice", "create_device(0)", "RuntimeError: simulated plugin bug"),
    ("WrongTypeFromCreateDevice", "create_device(0)", "returned object"),
    ("ExitInDeviceCount", "device_count", "sys.exit(3)"),
    ("WrongTypeFromDeviceCount", "device_count", "returned str '1'"),
    ("BoolFromDeviceCount", "device_count", "returned bool True"),
    ("ExitInKernels", "kernels(device)", "sys.exit(3)"),
    ("WrongTypeFromKernels", "kernels(device)", "returned list"),
    ("UncallableKernel", "kernels(device)", "'Add' maps to str"),
    ("ExitInAttach", "Device._attach", "sys.exit(3)"),
    ("ExitInProbe", "probe", "sys.exit(3)"),
    ("WrongTypeFromProbe", "probe", "returned bool False"),
]


def _registry(make_registry, cls):
    reg = make_registry({"singa-evil": {"evil": P + cls},
                         "singa-fake": {"fake": "singa_test_plugins.good"}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingaPluginWarning)
        return reg.load()


def _plugin_error(fn):
    """The PluginError ``fn()`` raises; a SystemExit (or anything else) fails the test."""
    try:
        fn()
    except PluginError as exc:
        return exc
    except BaseException as exc:  # noqa: BLE001  (the failure this file is about)
        pytest.fail(f"expected a PluginError, got {type(exc).__name__}: {exc!r}")
    pytest.fail("expected a PluginError, got no error")


@pytest.mark.parametrize(("cls", "call", "said"), DEVICE_CALLS)
def test_device_request_turns_a_misbehaving_call_into_a_plugin_error(make_registry, cls, call,
                                                                     said):
    reg = _registry(make_registry, cls)
    msg = str(_plugin_error(lambda: reg.device("evil")))
    assert "plugin 'evil'" in msg and "singa-evil" in msg, msg
    assert call in msg and said in msg, msg
    assert "SINGA_DISABLE_PLUGINS=evil" in msg
    assert any(f.provider.plugin == "evil" and f.stage == call for f in reg.failures)
    # the other backend is untouched, and a query over every backend still answers
    assert reg.device("fake").name == "fake:0"
    assert "fake" in reg.available_backends()
    old = set_registry(reg)
    try:
        from singa import device

        listed = device.list_devices()
    finally:
        set_registry(old)
    assert {"fake:0", "fake:1"} <= set(listed)
    if call in ("device_count", "probe"):
        assert not any(d.startswith("evil") for d in listed)


@pytest.mark.parametrize(("cls", "call", "said"), DEVICE_CALLS)
def test_strict_mode_raises_the_plugin_error_never_the_exit(make_registry, monkeypatch, cls,
                                                            call, said):
    reg = _registry(make_registry, cls)
    monkeypatch.setenv("SINGA_STRICT_PLUGINS", "1")
    err = _plugin_error(lambda: reg.device("evil"))
    assert call in str(err) and said in str(err)
    if "sys.exit" in said:
        assert isinstance(err.__cause__, SystemExit)


@pytest.mark.parametrize(("cls", "said"), [("ExitInDescribe", "sys.exit(3)"),
                                           ("WrongTypeFromDescribe", "returned str")])
def test_describe_through_the_guard(make_registry, cls, said):
    reg = _registry(make_registry, cls)
    err = _plugin_error(lambda: reg.describe("evil"))
    assert "plugin 'evil'" in str(err) and "describe" in str(err) and said in str(err)
    assert reg.device("evil").name == "evil:0"  # the rest of the backend still works


@pytest.mark.parametrize(("cls", "call", "said"), [
    ("ExitInHook", "hook", "SystemExit"),
    ("ExitWhileIteratingHook", "hook", "SystemExit"),
    ("ExitInValidate", "validate", "SystemExit"),
])
def test_load_time_calls_are_recorded_and_strict_mode_reraises(make_registry, monkeypatch,
                                                               cls, call, said):
    reg = _registry(make_registry, cls)
    failed = [f for f in reg.failures if f.provider.plugin == "evil"]
    assert [f.stage for f in failed] == [call] and said in failed[0].summary()
    assert "evil" not in reg.backends and reg.device("fake").name == "fake:0"
    strict = make_registry({"singa-evil": {"evil": P + cls}})
    monkeypatch.setenv("SINGA_STRICT_PLUGINS", "1")
    err = _plugin_error(strict.load)
    assert f"failed at {call}" in str(err) and "SINGA_STRICT_PLUGINS=1" in str(err)


@pytest.fixture
def process_registry():
    """Install a registry as the process-wide one for singa.dist / singa.device calls."""
    olds = []

    def install(reg):
        olds.append(set_registry(reg))
        return reg

    yield install
    for old in olds[:1]:
        set_registry(old)


@pytest.mark.parametrize(("cls", "call", "said"), [
    ("ExitInCommunicatorCreate", "communicator create", "sys.exit(3)"),
    ("RaiseInCommunicatorCreate", "communicator create", "RuntimeError: simulated plugin bug"),
    ("WrongTypeFromCommunicatorCreate", "communicator create", "returned tuple"),
    ("ExitInCommunicatorProbe", "communicator probe", "sys.exit(3)"),
    ("WrongTypeFromCommunicatorProbe", "communicator probe", "returned str 'ok'"),
])
def test_communicator_calls_through_the_guard(make_registry, process_registry, cls, call,
                                              said):
    from singa import dist

    process_registry(_registry(make_registry, cls))
    err = _plugin_error(lambda: dist.get_communicator("evilcomm"))
    msg = str(err)
    assert "plugin 'evil'" in msg and call in msg and said in msg, msg


def test_a_plugin_can_still_refuse_with_a_singa_error(make_registry):
    """A singa error raised by plugin code already names its problem: it passes unchanged."""
    from singa.errors import DeviceUnavailableError

    reg = _registry(make_registry, "ExitInCreateDevice")
    boom = DeviceUnavailableError("GPU 0 is busy")
    object.__setattr__(reg.backends["evil"].spec, "create_device",
                       lambda i: (_ for _ in ()).throw(boom))
    with pytest.raises(DeviceUnavailableError, match="GPU 0 is busy"):
        reg.device("evil")


# ---------------------------------------------------------------- real processes
def _site(tmp_path, cls):
    write_dist(tmp_path, "singa-evil", {"evil": P + cls})
    return [tmp_path, PLUGINS_DIR]


def test_get_device_survives_a_create_device_that_exits(tmp_path):
    code = ("import singa.device as d\n"
            "from singa.errors import PluginError\n"
            "try:\n"
            "    d.get_device('evil')\n"
            "except PluginError as e:\n"
            "    print('PLUGIN ERROR', e)\n"
            "print('STILL HERE', d.get_device('cpu').name)\n")
    proc = run_python(code, pythonpath=_site(tmp_path, "ExitInCreateDevice"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PLUGIN ERROR plugin 'evil'" in proc.stdout and "create_device(0)" in proc.stdout
    assert "STILL HERE cpu" in proc.stdout


@pytest.mark.parametrize(("cls", "call"), [("ExitInDeviceCount", "device_count"),
                                           ("ExitInCreateDevice", "create_device(0)"),
                                           ("ExitInDescribe", "describe"),
                                           ("WrongTypeFromCreateDevice", "create_device(0)")])
def test_doctor_reports_a_plugin_whose_calls_exit(tmp_path, cls, call):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in _site(tmp_path, cls))
    proc = subprocess.run([sys.executable, "-m", "singa", "info"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Backends" in out and "Environment variables" in out, out
    assert f"evil       FAILED: plugin 'evil' from distribution singa-evil 0.1 failed at {call}" \
        in out, out
    backends = out.split("\nBackends\n")[1]
    cpu = next(line for line in backends.splitlines() if line.startswith("  cpu "))
    assert "device(s)" in cpu
    assert "smoke: PASS" in out  # the CPU backend's smoke test still ran
