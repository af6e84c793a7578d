"""Compiled helpers of the CPU backend's lazily compiled kernels (singa_cpu.kernels._jit):
one helper compiled into two kernels, nothing compiled before a kernel's first call, and the
kernels' disk cache reused while the helper is unchanged and recompiled when it changes
(numba itself checks only the kernel's own source file)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

HELPERS = '''
from singa_cpu.kernels._jit import helper

SCALE = {scale}


@helper(inline="always")
def scaled(v):
    return v * SCALE
'''

KERNELS = '''
import numpy as np
from singa_cpu.kernels._jit import njit
from singa_cpu.kernels._parallel import pjit
from jit_helpers import scaled

prange = range


@njit()
def fill(x, out):
    for i in range(x.size):
        out[i] = scaled(x[i])


@pjit()
def second_plus_one(x):
    return scaled(x[1]) + 1.0
'''

RUN = '''
import json, sys
import numpy as np
import jit_kernels, jit_helpers
from singa_cpu.kernels import _jit, _parallel
before = {"numba": "numba" in sys.modules,
          "helper": jit_helpers.scaled._dispatcher is not None,
          "python": jit_helpers.scaled(1.5)}
x = np.arange(4.0)
out = np.empty_like(x)
jit_kernels.fill(x, out)
serial = jit_kernels.fill.serial()
names = [_jit.compilable(jit_kernels.fill.py_func).__qualname__,
         _parallel._parallel_twin(jit_kernels.fill.py_func).__qualname__]
print(json.dumps({**before, "fill": out.tolist(), "second": jit_kernels.second_plus_one(x),
                  "hits": sum(serial.stats.cache_hits.values()),
                  "misses": sum(serial.stats.cache_misses.values()), "names": names}))
'''


@pytest.fixture
def run(singa_device, tmp_path):
    if singa_device.backend != "cpu":
        pytest.skip("CPU kernel internals")
    pytest.importorskip("numba")
    (tmp_path / "jit_kernels.py").write_text(KERNELS)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}

    def run(scale: float) -> dict:
        (tmp_path / "jit_helpers.py").write_text(textwrap.dedent(HELPERS.format(scale=scale)))
        done = subprocess.run([sys.executable, "-c", RUN], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    return run


def test_helper_compiled_into_two_kernels_lazily_and_cached_by_its_code(run):
    first = run(2.0)
    assert not first["numba"] and not first["helper"]  # importing compiles nothing
    assert first["python"] == 3.0  # called from Python, the helper is plain Python
    assert first["fill"] == [0.0, 2.0, 4.0, 6.0] and first["second"] == 3.0
    assert first["misses"] == 1 and first["hits"] == 0
    serial_name, parallel_name = first["names"]
    assert serial_name.startswith("fill__h") and parallel_name.startswith("fill__parallel__h")

    again = run(2.0)
    assert again["hits"] == 1 and again["misses"] == 0
    assert again["names"] == first["names"]

    changed = run(3.0)  # the helper's module changed, the kernels' did not
    assert changed["fill"] == [0.0, 3.0, 6.0, 9.0] and changed["second"] == 4.0
    assert changed["misses"] == 1
    assert changed["names"][0] != serial_name


BOUND = '''
from singa_cpu.kernels._jit import helper, njit


@helper(inline="always")
def plus_one(v):
    return v + 1.0


@helper(inline="always")
def plus_two(v):
    return v + 2.0


step = plus_one  # what body names; body_two rebinds it


@helper()
def body(v):
    return step(v) * 10.0


body_two = body.bind("_two", step=plus_two)


@njit()
def run_one(v):
    return body(v)


@njit()
def run_two(v):
    return body_two(v)
'''


def test_bound_helper_is_one_body_compiled_with_other_globals(singa_device, tmp_path,
                                                              monkeypatch):
    """Helper.bind: the twin runs its body with the rebound helper (compiled and as Python),
    beside the original, under its own name and digest, so the kernels calling each are
    cached apart."""
    if singa_device.backend != "cpu":
        pytest.skip("CPU kernel internals")
    pytest.importorskip("numba")
    import importlib

    from singa_cpu.kernels import _jit

    (tmp_path / "jit_bound.py").write_text(BOUND)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("jit_bound")
    assert mod.body_two.__qualname__ == "body_two"
    assert mod.body_two.py_func(1.0) == 30.0 and mod.body.py_func(1.0) == 20.0
    assert mod.run_two(1.0) == 30.0 and mod.run_one(1.0) == 20.0
    assert mod.body_two.digest != mod.body.digest
    names = {_jit.compilable(k.py_func).__qualname__ for k in (mod.run_one, mod.run_two)}
    assert len(names) == 2
