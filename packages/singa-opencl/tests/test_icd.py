"""Exposing pip-installed OpenCL runtimes (Intel's CPU runtime) to pyopencl's ICD loader."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from singa_opencl import _icd

PLACEHOLDER_ICD = _icd.CONDA_PLACEHOLDER + "/lib/libintelocl.so\n"


def fake_prefix(root: Path, *, icd: bool = True, lib: bool = True) -> Path:
    """A prefix laid out as `pip install intel-opencl-rt` leaves one."""
    (root / "lib").mkdir(parents=True)
    (root / "etc" / "OpenCL" / "vendors").mkdir(parents=True)
    if lib:
        (root / "lib" / "libintelocl.so").write_bytes(b"\x7fELF")
    if icd:
        (root / "etc" / "OpenCL" / "vendors" / "intel-cpu.icd").write_text(PLACEHOLDER_ICD)
        # an entry whose library is not installed (Intel's FPGA emulator) is ignored
        (root / "etc" / "OpenCL" / "vendors" / "intel-fpga_emu.icd").write_text(
            _icd.CONDA_PLACEHOLDER + "/lib/libintelocl_emu.so\n")
    return root


def fake_system(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "pocl.icd").write_text("libpocl.so.2.10.0\n")
    (root / "nvidia.icd").write_text("libnvidia-opencl.so.1\n")
    (root / "README").write_text("not an entry")
    return root


def test_finds_the_runtime_through_its_placeholder_icd(tmp_path):
    pre = fake_prefix(tmp_path / "env")
    assert _icd.pip_runtime_libraries([pre]) == [str(pre / "lib" / "libintelocl.so")]


def test_finds_the_runtime_by_library_name_without_an_icd(tmp_path):
    pre = fake_prefix(tmp_path / "env", icd=False)
    assert _icd.pip_runtime_libraries([pre]) == [str(pre / "lib" / "libintelocl.so")]


def test_an_icd_without_its_library_finds_nothing(tmp_path):
    pre = fake_prefix(tmp_path / "env", lib=False)
    assert _icd.pip_runtime_libraries([pre]) == []
    st = _icd.expose({}, [pre], fake_system(tmp_path / "sys"), [tmp_path / "cache"])
    assert st.libraries == [] and st.vendors_dir is None and st.note() is None


def test_vendors_dir_keeps_the_system_entries_and_adds_the_runtime(tmp_path):
    pre = fake_prefix(tmp_path / "env")
    system = fake_system(tmp_path / "sys")
    env = {}
    st = _icd.expose(env, [pre], system, [tmp_path / "cache"])
    vend = Path(env["OCL_ICD_VENDORS"])
    assert str(vend) == st.vendors_dir and vend.parent == tmp_path / "cache"
    contents = {p.name: p.read_text() for p in vend.iterdir()}
    lib = str(pre / "lib" / "libintelocl.so")
    assert contents == {
        "pocl.icd": "libpocl.so.2.10.0\n",
        "nvidia.icd": "libnvidia-opencl.so.1\n",
        "singa-pip-0-libintelocl.icd": lib + "\n",
    }
    assert st.provides("Intel(R) OpenCL") and not st.provides("Portable Computing Language")
    assert lib in st.note() and str(vend) in st.note()


@pytest.mark.parametrize("var", _icd.USER_VARIABLES)
def test_a_user_setting_is_never_overridden(tmp_path, var):
    pre = fake_prefix(tmp_path / "env")
    env = {var: "/my/vendors"}
    st = _icd.expose(env, [pre], fake_system(tmp_path / "sys"), [tmp_path / "cache"])
    assert env == {var: "/my/vendors"}
    assert st.vendors_dir is None and not (tmp_path / "cache").exists()
    assert st.user_variable == f"{var}=/my/vendors"
    assert "not added" in st.note() and var in st.note()
    assert not st.provides("Intel(R) OpenCL")


def test_a_child_process_keeps_the_directory_it_inherits(tmp_path):
    pre = fake_prefix(tmp_path / "env")
    parent_env = {}
    parent = _icd.expose(parent_env, [pre], fake_system(tmp_path / "sys"), [tmp_path / "cache"])
    child_env = dict(parent_env)
    child = _icd.expose(child_env, [pre], tmp_path / "sys", [tmp_path / "cache"])
    assert child_env == parent_env and child.vendors_dir == parent.vendors_dir
    assert child.user_variable is None and child.provides("Intel(R) OpenCL")


def test_the_directory_is_named_by_content_and_reused(tmp_path):
    cache = tmp_path / "cache"
    a = _icd.write_vendors_dir({"x.icd": "/a.so\n"}, [cache])
    assert _icd.write_vendors_dir({"x.icd": "/a.so\n"}, [cache]) == a
    b = _icd.write_vendors_dir({"x.icd": "/b.so\n"}, [cache])
    assert a != b and (b / "x.icd").read_text() == "/b.so\n"
    # no half-written temporary directories are left behind
    assert sorted(p.name for p in cache.iterdir()) == sorted([a.name, b.name])


def test_falls_back_when_the_cache_is_not_writable(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("a file where the cache directory should be")
    fallback = tmp_path / "tmp"
    got = _icd.write_vendors_dir({"x.icd": "/a.so\n"}, [blocked / "singa", fallback])
    assert got.parent == fallback
    with pytest.raises(OSError):
        _icd.write_vendors_dir({"x.icd": "/a.so\n"}, [blocked / "singa"])


def test_refuses_a_directory_others_can_write(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(OSError, match="not a private directory"):
        _icd.write_vendors_dir({"x.icd": "/a.so\n"}, [shared])


def test_a_write_failure_leaves_the_loader_alone(tmp_path):
    pre = fake_prefix(tmp_path / "env")
    blocked = tmp_path / "file"
    blocked.write_text("")
    env = {}
    st = _icd.expose(env, [pre], fake_system(tmp_path / "sys"), [blocked / "singa"])
    assert env == {} and st.vendors_dir is None and "cannot write" in st.note()


PROBE = """
import json, os, sys
import singa
from singa.backend import registry
registry().backends  # plugin discovery
lazy = "OCL_ICD_VENDORS" not in os.environ and "pyopencl" not in sys.modules
from singa_opencl import _platforms, _icd
infos = _platforms.enumerate_devices()
print(json.dumps({
    "lazy": lazy,
    "vendors": os.environ.get("OCL_ICD_VENDORS"),
    "platforms": sorted({i.platform.name.strip() for i in infos}),
    "usable": [f"{i.platform.name.strip()} / {i.device.name.strip()}" for i in infos
               if i.problem is None],
    "describe": _platforms.describe(),
}))
"""


# What the ICD loader finds on its own, without singa (system entries, if the machine has any,
# and pyopencl's bundled pocl): no platform at all is a valid answer on a bare machine.
LOADER_DEFAULT_PROBE = """
import json
import pyopencl as cl
try:
    names = sorted({p.name.strip() for p in cl.get_platforms()})
except cl.Error:
    names = []
print(json.dumps(names))
"""


def run_probe(env_updates: dict, probe: str = PROBE):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH", "SINGA_OPENCL_DEVICE")}
    env.update(env_updates)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not _icd.pip_runtime_libraries(), reason="no pip-installed OpenCL runtime "
                    "in this environment (pip install 'singa-opencl[cpu]' on Linux x86_64)")
def test_pip_runtime_is_usable_without_any_variable_and_system_icds_stay():
    auto = run_probe({})
    assert auto["lazy"], "import singa or plugin discovery touched the OpenCL loader"
    assert auto["vendors"], auto
    assert any(p.startswith("Intel(R) OpenCL /") for p in auto["usable"]), auto
    assert any("singa-opencl set OCL_ICD_VENDORS" in ln for ln in auto["describe"]), auto
    # every platform the loader finds by default (system entries, if the machine has any, and
    # pyopencl's own) is still there; Intel's runtime is there only through singa
    default = run_probe({}, LOADER_DEFAULT_PROBE)
    assert "Intel(R) OpenCL" not in default
    assert set(default) <= set(auto["platforms"])
