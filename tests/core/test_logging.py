"""Diagnostics go to the ``singa`` logger: silent by default, shown by ``SINGA_LOG_LEVEL``, and
delivered to the application's own logging setup when it has one."""

from __future__ import annotations

import logging

import pytest
from core_helpers import PLUGINS_DIR, run_python, write_dist

P = "singa_test_plugins."
LOAD = "import singa.device as d\nprint('DEVICE', d.get_device('cpu').name)\n"


@pytest.fixture
def broken_site(tmp_path):
    """A site with a plugin that fails at import, besides the installed ones."""
    write_dist(tmp_path, "singa-broken", {"broken": P + "broken_import"})
    return [tmp_path, PLUGINS_DIR]


def _has_cpu() -> bool:
    import importlib.metadata as md

    try:
        md.version("singa-cpu")
        return True
    except md.PackageNotFoundError:
        return False


needs_cpu = pytest.mark.skipif(not _has_cpu(), reason="needs the CPU backend (singa-cpu)")


@needs_cpu
def test_quiet_by_default_even_when_a_plugin_fails(broken_site):
    proc = run_python(LOAD, pythonpath=broken_site)
    assert proc.returncode == 0, proc.stderr
    assert "DEVICE cpu" in proc.stdout
    assert proc.stderr == ""


@needs_cpu
@pytest.mark.parametrize(("level", "shown", "hidden"), [
    ("WARNING", ["singa.plugins WARNING: plugin 'broken' from distribution singa-broken 0.1 "
                 "failed at import: ImportError: simulated"], ["DEBUG"]),
    ("debug", ["singa.plugins DEBUG: load plugin 'cpu' from distribution singa-cpu",
               "singa.plugins DEBUG: created device cpu:0", "singa.plugins WARNING: plugin "
               "'broken'"], []),
    ("ERROR", [], ["singa.plugins"]),
])
def test_singa_log_level_shows_records_on_stderr(broken_site, level, shown, hidden):
    proc = run_python(LOAD, pythonpath=broken_site, env={"SINGA_LOG_LEVEL": level})
    assert proc.returncode == 0, proc.stderr
    for text in shown:
        assert text in proc.stderr, proc.stderr
    for text in hidden:
        assert text not in proc.stderr, proc.stderr
    assert "DEVICE cpu" in proc.stdout  # stdout is the program's, not the log's


@needs_cpu
def test_records_reach_the_applications_logging_once(broken_site):
    code = ("import logging, sys\n"
            "logging.basicConfig(level=logging.DEBUG, stream=sys.stdout, "
            "format='APP %(name)s %(levelname)s %(message)s')\n" + LOAD)
    proc = run_python(code, pythonpath=broken_site)
    assert proc.returncode == 0, proc.stderr
    assert "APP singa.plugins DEBUG created device cpu:0" in proc.stdout
    assert "APP singa.plugins WARNING plugin 'broken'" in proc.stdout
    assert proc.stderr == ""
    # with SINGA_LOG_LEVEL as well, singa prints them itself and the application does not
    # print them a second time
    proc = run_python(code, pythonpath=broken_site, env={"SINGA_LOG_LEVEL": "WARNING"})
    assert proc.stderr.count("plugin 'broken'") == 1 and "APP singa" not in proc.stdout


def test_an_invalid_level_names_the_valid_ones():
    proc = run_python("import singa.backend as p; p.registry()",
                      env={"SINGA_LOG_LEVEL": "loud"})
    assert proc.returncode != 0
    assert ("environment variable SINGA_LOG_LEVEL='loud' is invalid: expected one of DEBUG, "
            "INFO, WARNING, ERROR, CRITICAL") in proc.stderr


def test_in_process_records_go_to_logging_not_to_stderr(make_registry, capsys, caplog):
    reg = make_registry({"singa-broken": {"broken": P + "broken_import"}})
    with caplog.at_level(logging.DEBUG, logger="singa"):
        reg.load()
    assert capsys.readouterr().err == ""
    (rec,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert rec.name == "singa.plugins" and "failed at import" in rec.getMessage()


def test_the_variable_is_declared_and_documented():
    from singa import config

    var = config.ENV_VARS["SINGA_LOG_LEVEL"]
    assert var.default is None and "stderr" in var.doc
    assert var.parse("info") == logging.INFO and var.parse("") is None
