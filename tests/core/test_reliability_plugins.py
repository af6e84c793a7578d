"""Issue 15 item 2: a plugin that calls ``sys.exit()`` (or raises another BaseException) at
import is recorded as a failed plugin; it never ends the user's program. KeyboardInterrupt
still propagates (the user pressed Ctrl-C)."""

from __future__ import annotations

import sys

import pytest
from core_helpers import run_python, write_dist


def _site(tmp_path, body: str):
    pkg = tmp_path / "singa_exits_plugin.py"
    pkg.write_text(body)
    write_dist(tmp_path, "singa-exits", {"exits": "singa_exits_plugin"})
    return [tmp_path]


@pytest.mark.parametrize("body", ["import sys\nsys.exit(1)\n", "raise SystemExit('bye')\n",
                                  "raise GeneratorExit()\n"])
def test_sys_exit_at_import_is_a_recorded_failure(tmp_path, body):
    code = ("import singa.device as d\n"
            "from singa._plugins import registry\n"
            "print('DEVICE', d.get_default_device().lang if hasattr(d.get_default_device(), "
            "'lang') else 'ok')\n"
            "print('FAILED', [f.stage for f in registry().failures])\n")
    proc = run_python(code, pythonpath=_site(tmp_path, body))
    assert proc.returncode == 0, proc.stderr
    assert "DEVICE" in proc.stdout and "FAILED ['import']" in proc.stdout


def test_doctor_survives_a_plugin_calling_sys_exit(tmp_path):
    import subprocess

    from core_helpers import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("SINGA_")}
    env["PYTHONPATH"] = str(tmp_path)
    _site(tmp_path, "import sys\nsys.exit(1)\n")
    proc = subprocess.run([sys.executable, "-m", "singa", "info"], capture_output=True,
                          text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "exits" in proc.stdout + proc.stderr


def test_keyboard_interrupt_still_propagates(tmp_path):
    proc = run_python("import singa.device as d; d.get_default_device()",
                      pythonpath=_site(tmp_path, "raise KeyboardInterrupt\n"))
    assert proc.returncode != 0
    assert "KeyboardInterrupt" in proc.stderr
