"""The plugin loader (singa._plugins) on misbehaving plugins, with a fresh registry per test.

Each test writes fake ``*.dist-info`` directories whose ``[singa]`` entry points name the small
plugin modules in ``tests/plugins/singa_test_plugins`` and builds its own PluginRegistry over
them, so the installed backends and the process-wide registry are never involved.
"""

from __future__ import annotations

import importlib.metadata as md
import warnings

import pytest
from singa.backend import BACKEND_API_VERSION, PluginRegistry, SingaPluginWarning
from singa.errors import DeviceUnavailableError, PluginConflictError, PluginError

P = "singa_test_plugins."


def _load_quietly(reg: PluginRegistry) -> PluginRegistry:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingaPluginWarning)
        return reg.load()


# ---------------------------------------------------------------------- happy path
def test_good_plugin_registers_backend_alias_and_communicator(make_registry):
    reg = make_registry({"singa-fake": {"fake": P + "good"}}).load()
    assert set(reg.backends) == {"fake"}
    entry = reg.backends["fake"]
    assert entry.provider.dist == "singa-fake" and entry.provider.version == "0.1"
    assert "distribution singa-fake 0.1" in str(entry.provider)
    assert reg.aliases == {"fk": "fake"}
    assert reg.resolve_name("fk") == "fake"
    assert set(reg.communicators) == {"fakecomm"}
    assert reg.communicator("fakecomm").spec.create(rank=0) == ("fakecomm", {"rank": 0})
    assert reg.failures == [] and reg.conflicts == {}


def test_loading_is_lazy_and_happens_once(make_registry):
    calls = []
    inner = make_registry({"singa-fake": {"fake": P + "good"}})
    eps = inner.entry_points()
    reg = PluginRegistry(entry_points=lambda: calls.append(1) or eps)
    assert not reg.loaded and calls == []
    reg.device("fake", 0)
    reg.backend("fake")
    reg.load()
    assert calls == [1]


def test_bare_entry_point_without_distribution(plugin_path, clean_env):
    ep = md.EntryPoint(name="fake", value=P + "good", group="singa")
    reg = PluginRegistry(entry_points=lambda: [ep]).load()
    assert reg.backends["fake"].provider.dist is None
    assert str(reg.backends["fake"].provider) == "plugin 'fake'"


# ---------------------------------------------------------------------- isolation
def test_plugin_that_raises_on_import_is_recorded_and_others_work(make_registry):
    reg = make_registry(
        {
            "singa-broken": {"broken": P + "broken_import"},
            "singa-fake": {"fake": P + "good"},
        }
    ).load()
    assert set(reg.backends) == {"fake"}
    (failure,) = reg.failures
    assert failure.stage == "import"
    assert failure.provider.dist == "singa-broken"
    assert isinstance(failure.error, ImportError)
    assert "libbroken.so.3" in failure.summary()
    assert "Traceback" in failure.traceback
    assert reg.device("fake", 0).name == "fake:0"
    with pytest.raises(DeviceUnavailableError) as exc:
        reg.device("broken")
    msg = str(exc.value)
    assert "'broken' was requested" in msg
    assert "failed at import" in msg and "libbroken.so.3" in msg
    assert "available backends: fake" in msg


def test_import_failure_is_reported_when_entry_point_and_backend_names_differ(make_registry):
    # a plugin that fails to import cannot say which backends it provides, so the error for
    # an unknown backend should still mention every plugin that failed to load
    reg = make_registry({"singa-mydev": {"singa_mydev": P + "broken_import"}})
    with pytest.raises(DeviceUnavailableError) as exc:
        reg.device("mydev")
    assert "libbroken.so.3" in str(exc.value)


def test_hook_that_raises_is_recorded(make_registry):
    reg = make_registry(
        {
            "singa-hookfail": {"hookfail": P + "hook_raises"},
            "singa-fake": {"fake": P + "good"},
        }
    ).load()
    assert set(reg.backends) == {"fake"}
    (failure,) = reg.failures
    assert failure.stage == "hook"
    assert "driver query crashed" in str(failure.error)
    with pytest.raises(DeviceUnavailableError, match="failed at hook"):
        reg.backend("hookfail")


@pytest.mark.parametrize(
    ("attr", "expected"),
    [
        ("WrongType", "must return BackendSpec records, got dict"),
        ("InvalidName", "BackendSpec.name must match"),
        ("NotCallable", "create_device of backend 'uncallable' is not callable"),
    ],
)
def test_bad_records_are_rejected_with_the_reason(make_registry, attr, expected):
    reg = make_registry({"singa-bad": {"bad": P + "bad_records:" + attr}}).load()
    assert reg.backends == {}
    (failure,) = reg.failures
    assert failure.stage == "validate"
    assert expected in str(failure.error)
    assert failure.provider.dist == "singa-bad"


def test_valid_record_survives_an_invalid_sibling(make_registry):
    reg = make_registry({"singa-mixed": {"mixed": P + "bad_records:GoodAndBad"}}).load()
    assert set(reg.backends) == {"survivor"}
    assert [f.stage for f in reg.failures] == ["validate"]


def test_same_record_twice_is_a_no_op(make_registry):
    reg = make_registry({"singa-dup": {"dup": P + "bad_records:Duplicate"}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no conflict warning either
        reg.load()
    assert set(reg.backends) == {"dupdev"}
    assert reg.conflicts == {} and reg.failures == []


def test_same_entry_point_reachable_twice_registers_once(plugin_path, clean_env):
    ep = md.EntryPoint(name="fake", value=P + "good", group="singa")
    twin = md.EntryPoint(name="fake", value=P + "good", group="singa")
    alias = md.EntryPoint(name="fake2", value=P + "good", group="singa")  # same module
    reg = PluginRegistry(entry_points=lambda: [ep, twin, alias])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.load()
    assert set(reg.backends) == {"fake"} and reg.failures == [] and reg.conflicts == {}


def test_two_distributions_claiming_one_backend_name_is_an_error_naming_both(make_registry):
    reg = make_registry(
        {
            "singa-fake": {"fake": P + "good"},
            "singa-fake-fork": {"fakefork": P + "claims_fake"},
            "singa-other": {"other": P + "other"},
        }
    )
    with pytest.warns(SingaPluginWarning, match="claimed by two distributions"):
        reg.load()
    assert "fake" not in reg.backends and "other" in reg.backends
    with pytest.raises(PluginConflictError) as exc:
        reg.device("fake")
    msg = str(exc.value)
    assert "singa-fake 0.1" in msg and "singa-fake-fork 0.1" in msg
    assert "SINGA_DISABLE_PLUGINS" in msg
    assert reg.device("other").name == "other:0"


def test_conflict_in_strict_mode_raises_at_load(make_registry, monkeypatch):
    reg = make_registry(
        {
            "singa-fake": {"fake": P + "good"},
            "singa-fake-fork": {"fakefork": P + "claims_fake"},
        }
    )
    monkeypatch.setenv("SINGA_STRICT_PLUGINS", "1")
    with pytest.raises(PluginConflictError, match="singa-fake-fork"):
        reg.load()


def test_api_version_mismatch_is_skipped_with_a_warning_naming_the_fix(make_registry):
    reg = make_registry({"singa-olddev": {"olddev": P + "old_api"}})
    with pytest.warns(SingaPluginWarning) as rec:
        reg.load()
    (w,) = rec
    msg = str(w.message)
    assert f"v{BACKEND_API_VERSION + 1}" in msg and f"v{BACKEND_API_VERSION}" in msg
    assert "pip install -U singa-core singa-olddev" in msg
    assert "olddev" not in reg.backends
    with pytest.raises(DeviceUnavailableError) as exc:
        reg.backend("olddev")
    assert "targets backend API" in str(exc.value)


def test_unknown_hook_is_reported_by_check_pending(make_registry):
    reg = make_registry({"singa-typo": {"typo": P + "unknown_hook"}}).load()
    assert reg.backends == {}
    (failure,) = reg.failures
    assert failure.stage == "validate" and "singa_backend" in str(failure.error)


# ---------------------------------------------------------------------- missing backends
def test_missing_backend_error_names_request_available_and_fix(make_registry):
    reg = make_registry({"singa-fake": {"fake": P + "good"}})
    with pytest.raises(DeviceUnavailableError) as exc:
        reg.device("cuda", 0)
    msg = str(exc.value)
    assert "'cuda' was requested" in msg
    assert "no installed plugin provides backend 'cuda'" in msg
    assert "available backends: fake" in msg
    assert 'fix: pip install ".[cuda13]" in the singa checkout' in msg
    assert "python -m singa info" in msg


def test_probe_failure_error_captures_the_cause(make_registry):
    reg = make_registry(
        {
            "singa-fakegpu": {"fakegpu": P + "probe_fails"},
            "singa-fake": {"fake": P + "good"},
        }
    )
    with pytest.raises(DeviceUnavailableError) as exc:
        reg.device("fakegpu", 0)
    msg = str(exc.value)
    assert "'fakegpu' was requested" in msg
    assert "installed but its probe failed" in msg
    assert "RuntimeError: no fakegpu found: driver libfakegpu 0.0 missing" in msg
    assert "available backends: fake" in msg
    assert "fix: the backend is installed; resolve the cause above" in msg
    assert reg.available_backends() == ["fake"]


def test_missing_communicator_names_the_fix(make_registry):
    reg = make_registry({"singa-fake": {"fake": P + "good"}})
    with pytest.raises(DeviceUnavailableError) as exc:
        reg.communicator("mpi")
    msg = str(exc.value)
    assert "'mpi' was requested" in msg and "fakecomm" in msg
    assert 'pip install ".[dist]" in the singa checkout' in msg


# ---------------------------------------------------------------------- environment
def test_singa_plugins_allowlist(make_registry, monkeypatch):
    reg = make_registry(
        {
            "singa-fake": {"fake": P + "good"},
            "singa-other": {"other": P + "other"},
            "singa-broken": {"broken": P + "broken_import"},
        }
    )
    monkeypatch.setenv("SINGA_PLUGINS", "other")
    reg.load()
    assert set(reg.backends) == {"other"}
    assert reg.failures == []  # the broken plugin was never imported
    assert reg.skipped == {
        "fake": "not listed in SINGA_PLUGINS",
        "broken": "not listed in SINGA_PLUGINS",
    }
    with pytest.raises(DeviceUnavailableError, match="not listed in SINGA_PLUGINS"):
        reg.device("fake")


def test_singa_disable_plugins_blocklist(make_registry, monkeypatch):
    reg = make_registry(
        {
            "singa-fake": {"fake": P + "good"},
            "singa-broken": {"broken": P + "broken_import"},
            "singa-other": {"other": P + "other"},
        }
    )
    monkeypatch.setenv("SINGA_DISABLE_PLUGINS", "broken, other")
    reg.load()
    assert set(reg.backends) == {"fake"}
    assert reg.failures == []
    assert reg.skipped == {
        "broken": "listed in SINGA_DISABLE_PLUGINS",
        "other": "listed in SINGA_DISABLE_PLUGINS",
    }


def test_disabling_one_side_resolves_a_conflict(make_registry, monkeypatch):
    reg = make_registry(
        {
            "singa-fake": {"fake": P + "good"},
            "singa-fake-fork": {"fakefork": P + "claims_fake"},
        }
    )
    monkeypatch.setenv("SINGA_DISABLE_PLUGINS", "fakefork")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg.load()
    assert reg.backends["fake"].provider.dist == "singa-fake"


@pytest.mark.parametrize(
    ("module", "stage"),
    [("broken_import", "import"), ("hook_raises", "hook"), ("bad_records:WrongType", "validate")],
)
def test_strict_mode_reraises(make_registry, monkeypatch, module, stage):
    reg = make_registry({"singa-bad": {"bad": P + module}})
    monkeypatch.setenv("SINGA_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match=f"failed at {stage}") as exc:
        reg.load()
    assert "SINGA_STRICT_PLUGINS=1" in str(exc.value)
    assert exc.value.__cause__ is not None


def test_invalid_env_value_is_reported(make_registry, monkeypatch):
    reg = make_registry({"singa-fake": {"fake": P + "good"}})
    monkeypatch.setenv("SINGA_STRICT_PLUGINS", "maybe")
    with pytest.raises(ValueError, match="SINGA_STRICT_PLUGINS='maybe' is invalid"):
        reg.load()


def test_trace_plugins_prints_each_step(make_registry, monkeypatch, capsys):
    reg = make_registry(
        {
            "singa-fake": {"fake": P + "good"},
            "singa-broken": {"broken": P + "broken_import"},
        }
    )
    monkeypatch.setenv("SINGA_TRACE_PLUGINS", "1")
    reg.load()
    err = capsys.readouterr().err
    assert "singa.plugins DEBUG: load plugin 'fake' from distribution singa-fake 0.1" in err
    assert "backend 'fake'" in err
    assert "singa.plugins WARNING: plugin 'broken'" in err and "failed at import" in err


# ---------------------------------------------------------------------- devices
def test_devices_are_singletons_per_index(make_registry):
    reg = make_registry({"singa-fake": {"fake": P + "good"}})
    d0 = reg.device("fake", 0)
    assert reg.device("fake", 0) is d0
    assert reg.device("fk", 0) is d0  # alias
    d1 = reg.device("fake", 1)
    assert d1 is not d0 and d1.name == "fake:1"
    assert set(d0.kernels) == {"Copy", "Add"}
    assert d0.spec is reg.backends["fake"].spec


@pytest.mark.parametrize("index", [2, -1, 7])
def test_out_of_range_index_names_the_valid_range(make_registry, index):
    reg = make_registry({"singa-fake": {"fake": P + "good"}})
    with pytest.raises(DeviceUnavailableError) as exc:
        reg.device("fake", index)
    msg = str(exc.value)
    assert f"fake:{index} was requested" in msg
    assert "has 2 device(s) (valid indices: 0..1)" in msg
    assert "list_devices()" in msg
