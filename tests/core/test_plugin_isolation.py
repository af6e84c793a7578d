"""Discovery in a fresh interpreter: lazy, and immune to broken third-party plugins.

These run ``python -c`` subprocesses so that ``sys.modules`` and the process registry start
empty, and so that extra plugins come from real ``*.dist-info`` directories on PYTHONPATH
(the way a broken ``pip install`` would leave them).
"""

from __future__ import annotations

import json

import pytest
from core_helpers import PLUGINS_DIR, run_python, write_dist

LAZY = r"""
import importlib.metadata as md, json, sys

scans = []
_real = md.entry_points
def counting(*a, **kw):
    scans.append(kw.get("group"))
    return _real(*a, **kw)
md.entry_points = counting

plugin_tops = {ep.value.split(":")[0].split(".")[0] for ep in _real(group="singa")}

def loaded():
    return sorted(m for m in sys.modules
                  if m == "pluggy" or m.startswith("pluggy.") or m.split(".")[0] in plugin_tops)

import singa
after_singa = loaded()
import singa.tensor
after_tensor = loaded()
scans_before = list(scans)
from singa._plugins import _REGISTRY
registry_before = _REGISTRY is not None
dev = singa.device.get_default_device()
print(json.dumps({"plugins": sorted(plugin_tops), "after_singa": after_singa,
                  "after_tensor": after_tensor, "scans_before": scans_before,
                  "registry_before": registry_before, "scans_after": scans,
                  "after_query": loaded(), "device": dev.name}))
"""


def test_import_singa_loads_no_plugin_and_no_pluggy():
    proc = run_python(LAZY)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert "singa_cpu" in out["plugins"]
    assert out["after_singa"] == []
    assert out["after_tensor"] == [], "import singa.tensor imported plugin modules or pluggy"
    assert out["scans_before"] == [] and not out["registry_before"]
    # discovery happens on the first device query, scanning only the singa group, once
    assert out["scans_after"] == ["singa"]
    assert "pluggy" in out["after_query"] and "singa_cpu.plugin" in out["after_query"]
    assert out["device"] == "cpu"


BROKEN_SITE = r"""
import numpy as np, singa
from singa import tensor
from singa.device import get_device
from singa.errors import DeviceUnavailableError
from singa.backend import registry

cpu = get_device("cpu")
x = tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
y = (x + x).to_numpy()
assert (y == 2 * np.arange(6).reshape(2, 3)).all(), y
try:
    get_device("broken")
except DeviceUnavailableError as e:
    print("ERROR:", e)
print("FAILURES:", sorted(f.stage for f in registry().failures))
print("BACKENDS:", sorted(registry().backends))
"""


@pytest.fixture
def broken_site(tmp_path):
    """A site directory with three broken third-party plugins next to the installed ones."""
    write_dist(tmp_path, "singa-broken", {"broken": "singa_test_plugins.broken_import"})
    write_dist(tmp_path, "singa-hookfail", {"hookfail": "singa_test_plugins.hook_raises"})
    write_dist(tmp_path, "singa-missing", {"missing": "singa_not_installed_anywhere.plugin"})
    return [tmp_path, PLUGINS_DIR]


def test_broken_plugins_never_break_import_or_other_backends(broken_site):
    proc = run_python(BROKEN_SITE, pythonpath=broken_site)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "ERROR: device backend 'broken' was requested" in out
    assert "libbroken.so.3" in out
    assert "FAILURES: ['hook', 'import', 'import']" in out
    assert "'cpu'" in out.split("BACKENDS:")[1]


def test_strict_mode_reraises_in_a_real_process(broken_site):
    proc = run_python(
        "import singa.device as d; d.get_device('cpu')",
        pythonpath=broken_site,
        env={"SINGA_STRICT_PLUGINS": "1"},
    )
    assert proc.returncode != 0
    assert "PluginError" in proc.stderr and "SINGA_STRICT_PLUGINS=1" in proc.stderr


def test_disabling_the_broken_plugins_gives_a_clean_registry(broken_site):
    code = (
        "from singa.backend import registry; r = registry(); "
        "print(len(r.failures), sorted(r.skipped))"
    )
    proc = run_python(
        code, pythonpath=broken_site, env={"SINGA_DISABLE_PLUGINS": "broken,hookfail,missing"}
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "0 ['broken', 'hookfail', 'missing']"
