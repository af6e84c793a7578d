"""The plugin-author surface: singa.backend holds every name a plugin imports, pluggy calls the
hooks, kernel metadata travels in Kernel records, and a plugin written against the deprecated
surface (singa.plugins imports, kernels with function attributes) still loads, passes the
conformance kit and is told the new spelling."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest
import singa.backend as sb
from core_helpers import PLUGINS_DIR, write_dist
from singa import tensor
from singa.errors import KernelError

P = "singa_test_plugins."


def _fresh(monkeypatch, package: str) -> None:
    """Forget ``package`` so that importing it runs its module code (and warnings) again."""
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)


# ---------------------------------------------------------------------- one surface
def test_singa_backend_exports_everything_the_deprecated_module_had():
    import singa.plugins as old

    for name in dir(old):
        with pytest.warns(DeprecationWarning, match=rf"from singa\.backend import {name}\)"):
            value = getattr(old, name)
        assert getattr(sb, name) is value, name
    for name in ("Kernel", "kernel_attrs", "hookimpl", "registry", "set_registry",
                 "PluginRegistry", "Device", "BackendSpec"):
        assert name in sb.__all__, name


def test_unknown_name_of_the_deprecated_module_is_an_attribute_error():
    import singa.plugins as old

    with pytest.raises(AttributeError, match="singa.backend"):
        old.no_such_name  # noqa: B018


# ---------------------------------------------------------------------- pluggy calls the hooks
def test_pluggy_calls_the_hooks_so_a_wrapper_implementation_works(make_registry):
    reg = make_registry({"singa-wrap": {"wrap": P + "hook_wrapper"}}).load()
    assert reg.failures == []
    assert set(reg.backends) == {"inner", "outer"}
    assert reg.backends["outer"].provider.dist == "singa-wrap"


def test_one_plugin_raising_in_its_hook_leaves_the_next_plugins_records(make_registry):
    reg = make_registry({"singa-a": {"hookfail": P + "hook_raises"},
                         "singa-b": {"wrap": P + "hook_wrapper"}}).load()
    assert set(reg.backends) == {"inner", "outer"}
    assert [(f.provider.plugin, f.stage) for f in reg.failures] == [("hookfail", "hook")]


# ---------------------------------------------------------------------- Kernel records
def _add(ins, outs, attrs):
    np.add(ins[0], ins[1], out=outs[0])


def test_kernel_attrs_builds_a_record_and_keeps_fields_assignable():
    k = sb.kernel_attrs(contiguous_inputs=True, dtypes=("float32", sb.kDouble))(_add)
    assert isinstance(k, sb.Kernel) and k.fn is _add and k.__name__ == "_add"
    assert k.contiguous_inputs and k.dtypes == (sb.kFloat32, sb.kDouble)
    k.bind = lambda ins, outs, attrs: None
    again = sb.kernel_attrs(dtypes=(sb.kFloat32,))(k)  # a record of a record: one record
    assert again.fn is _add and again.contiguous_inputs and again.bind is k.bind
    assert again.dtypes == (sb.kFloat32,) and k.dtypes == (sb.kFloat32, sb.kDouble)
    a, b, out = np.ones(3), np.arange(3.0), np.zeros(3)
    k([a, b], [out], {})
    np.testing.assert_array_equal(out, a + b)


@pytest.mark.parametrize("bad, match", [
    (lambda: sb.kernel_attrs(contiguous=True), "unknown flag.*contiguous_inputs"),
    (lambda: sb.Kernel("not callable"), "needs a callable fn"),
    (lambda: sb.Kernel(_add, bind=3), "needs a callable bind"),
])
def test_bad_kernel_records_are_refused_with_a_clear_error(bad, match):
    with pytest.raises(KernelError, match=match):
        bad()


def test_builtin_cpu_tables_hold_records_and_warn_nothing():
    import singa_cpu.plugin as cpu
    from singa_cpu.device import CppCPU

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        dev = CppCPU()
        table = cpu._kernels(dev)
        dev._attach(sb.BackendSpec(name="cpu", api_version=sb.BACKEND_API_VERSION,
                                   create_device=lambda i: dev, kernels=lambda d: table,
                                   device_count=lambda: 1), table)
    assert all(isinstance(e[0], sb.Kernel) for e in dev.kernels.values())
    assert dev.kernels["Conv2d"][1] and dev.kernels["Conv2d"][0].bind is not None
    assert dev.kernels["Matmul"][0].bind is not None
    assert dev.conv_workspace is dev.workspace("conv")


def test_a_workspace_that_was_never_created_is_a_clear_error():
    from singa_cpu.device import CppCPU

    with pytest.raises(sb.MissingKernelError, match="no workspace 'plans'"):
        CppCPU().workspace("plans")


# ---------------------------------------------------------------------- the deprecated surface
def test_old_surface_plugin_loads_with_a_warning_for_each_old_spelling(make_registry,
                                                                      monkeypatch):
    _fresh(monkeypatch, "singa_oldsurf")
    reg = make_registry({"singa-oldsurf": {"oldsurf": "singa_oldsurf.plugin"}})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dev = reg.device("oldsurf", 0)
    said = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert reg.failures == []
    for name in ("BACKEND_API_VERSION", "BackendSpec", "hookimpl"):
        assert any(f"from singa.backend import {name}" in m for m in said), (name, said)
    attrs = {m.split("'")[1]: m for m in said if "carries its metadata" in m}
    assert set(attrs) == {"Add", "Neg", "ReLU"}, said  # Copy has no attributes: no warning
    assert "singa.backend.Kernel(fn, dtypes=(0, 4))" in attrs["Add"]
    assert "Kernel(fn, dtypes=(0, 4), contiguous_inputs=True)" in attrs["Neg"]
    assert "bind=..." in attrs["ReLU"]
    # the attributes were read into the records the dispatcher uses
    assert dev.kernels["Add"][2] == frozenset({sb.kFloat32, sb.kDouble})
    assert dev.kernels["Neg"][1] is True and dev.kernels["Copy"][1] is False
    assert dev.kernels["ReLU"][0].bind is not None
    # and they act: a strided input reaches Neg contiguous, float16 Add is refused
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = tensor.from_numpy(x, dev)
    np.testing.assert_array_equal(tensor.to_numpy(-t.T()), -x.T)
    np.testing.assert_array_equal(tensor.to_numpy(t + t), x + x)
    with pytest.raises(sb.DtypeMismatchError, match="no float16 kernel"):
        h = t.as_type(tensor.float16)
        h + h  # noqa: B018


@pytest.fixture
def oldsurf_site(tmp_path):
    shutil.copytree(PLUGINS_DIR / "singa_oldsurf", tmp_path / "singa_oldsurf",
                    ignore=shutil.ignore_patterns("__pycache__"))
    write_dist(tmp_path, "singa-oldsurf", {"oldsurf": "singa_oldsurf.plugin"})
    return tmp_path


def test_old_surface_plugin_passes_the_conformance_kit(oldsurf_site):
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(oldsurf_site), os.environ.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "pytest", "--pyargs", "singa.testing.conformance",
           "--singa-backend", "oldsurf", "-q", "-rA", "-p", "no:cacheprovider",
           "-k", "Add or Neg or ReLU or Copy", "-W", "always::DeprecationWarning"]
    proc = subprocess.run(cmd, cwd=oldsurf_site, env=env, capture_output=True, text=True,
                          timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    passed = set(re.findall(r"PASSED \S*::(test_\w+\[[\w-]+\])", out))
    for test_id in ("test_forward[Add-float32]", "test_forward[Neg-float64]",
                    "test_bound[ReLU-float32]", "test_forward[Copy-float16]"):
        assert test_id in passed, f"{test_id} did not pass:\n{out[-3000:]}"
    assert not any(t.startswith("test_forward[Add-float16") for t in passed)  # dtypes held
    assert not any(t.startswith("test_layouts[Neg-") for t in passed)  # contiguous_inputs
    assert "singa.backend.Kernel(fn, dtypes=(0, 4))" in out  # the kit run shows the warning
