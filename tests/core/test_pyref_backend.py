"""A pure-Python second backend proves that core makes no CPU or numpy-buffer assumptions.

``tests/plugins/singa_pyref`` is copied into ``tmp_path`` next to a freshly written
``singa_pyref-0.1.dist-info`` (METADATA + ``[singa]`` entry point), and subprocesses get that
directory on PYTHONPATH, so discovery goes through the real
``importlib.metadata.entry_points(group="singa")``. Nothing else is needed first: no
``python -m singa info``, no registration step, no cache.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from core_helpers import PLUGINS_DIR, run_python, write_dist


@pytest.fixture(scope="module")
def pyref_site(tmp_path_factory):
    site = tmp_path_factory.mktemp("pyref_site")
    shutil.copytree(
        PLUGINS_DIR / "singa_pyref",
        site / "singa_pyref",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    write_dist(site, "singa-pyref", {"pyref": "singa_pyref.plugin"})
    return site


BASICS = r"""
import importlib.metadata as md
import numpy as np
from singa import _math
from singa.device import get_device
from singa.testing.checks import upload

eps = [ep for ep in md.entry_points(group="singa") if ep.name == "pyref"]
assert len(eps) == 1 and eps[0].dist.metadata["Name"] == "singa-pyref", eps
dev = get_device("pyref")
assert dev.name == "pyref:0" and get_device("pyref:0") is dev
a = np.arange(6, dtype=np.float32).reshape(2, 3)
x = upload(a, dev)
assert type(x.block.data) is bytearray, type(x.block.data)
assert type(dev.native(x)).__name__ == "PyView"
assert not isinstance(dev.native(x), np.ndarray)
y = _math.add(x, _math.transpose(upload(a.T.copy(), dev)))  # kernel on a strided view
assert (y.to_numpy() == 2 * a).all(), y.to_numpy()
s = _math.sum(_math.mul(x, 3.0), axes=(1,))  # scalar kernel + contiguous-input kernel
assert (s.to_numpy() == 3 * a.sum(1)).all(), s.to_numpy()
print("OK", sorted(dev.kernels))
"""


def test_pyref_is_discovered_and_runs_on_bytearrays(pyref_site):
    proc = run_python(BASICS, pythonpath=[pyref_site])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("OK")


FALLBACK = r"""
import warnings
import numpy as np
from singa import _math
from singa.device import get_device
from singa.testing.checks import upload

dev = get_device("pyref")
a = np.linspace(-2, 2, 6).astype(np.float32).reshape(2, 3)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    t = _math.tanh(upload(a, dev))      # no pyref kernel: host fallback over PyView
    out = t.to_numpy()
assert np.allclose(out, np.tanh(a), rtol=1e-6), out
assert dev.memory_stats()["host_fallback_calls"] == 1
assert any("host" in str(x.message) for x in w)
print("OK")
"""


def test_host_fallback_needs_no_numpy_native_views(pyref_site):
    proc = run_python(FALLBACK, pythonpath=[pyref_site])
    assert proc.returncode == 0, proc.stderr


def test_conformance_kit_passes_on_pyref(pyref_site):
    """The one-command kit run a third party would use, from a directory outside the repo."""
    # nothing was prepared besides the package and its dist-info (no doctor run, no cache)
    assert sorted(p.name for p in pyref_site.iterdir()) == [
        "singa_pyref",
        "singa_pyref-0.1.dist-info",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    env["PYTHONPATH"] = str(pyref_site)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "singa.testing.conformance",
        "--singa-backend",
        "pyref",
        "-q",
        "-rA",
        "-p",
        "no:cacheprovider",
    ]
    proc = subprocess.run(cmd, cwd=pyref_site, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    m = re.search(
        r"singa conformance: backend 'pyref' \(device pyref:0\): (\d+) kernel/dtype "
        r"pairs of (\d+) ops checked \((\d+) kernels registered",
        out,
    )
    assert m, out[-3000:]
    pairs, ops, registered = map(int, m.groups())
    assert ops == registered == 21 and pairs >= 60
    passed = set(re.findall(r"PASSED \S*::(test_\w+\[[\w-]+\])", out))
    for test_id in [
        "test_forward[Add-float32]",
        "test_forward[Copy-uint8]",
        "test_layouts[Div-int32]",
        "test_inplace[Add-float16]",
        "test_forward[Matmul-float64]",
        "test_forward[Sum-float16]",
        "test_random_stats[Gaussian-float32]",
        "test_random_seed[Uniform-float64]",
    ]:
        assert test_id in passed, f"{test_id} did not pass:\n{out[-3000:]}"
    # the kernel's dtypes attribute limits Matmul; contiguous_inputs keeps Sum out of layouts
    assert not any(t.startswith("test_forward[Matmul-float16") for t in passed)
    assert not any(t.startswith("test_layouts[Sum-") for t in passed)
    # ops without a pyref kernel run through host fallback and are not counted as checked
    assert not any("[Tanh-" in t for t in passed)
