"""Which tests no CI session runs: one skip report per pytest run, and their aggregation.

A test that every session skips checks nothing, and a skip says so in one line that nobody
reads. Two halves:

* the pytest plugin (this module, loaded with ``-p skip_report`` and ``tools/`` on
  ``PYTHONPATH``; the nox sessions do both): when ``SINGA_SKIP_REPORT_DIR`` is set, each pytest
  process writes ``<dir>/<pid>.json`` at the end, every test it collected with its outcome
  (passed, failed, xfailed, skipped, not run), the skip reason and the hardware its
  ``needs_hardware`` marker names. A module skipped while collecting counts as one test (its
  path). A test function of an importable package (the conformance kit) has one id whatever
  file collected it (:func:`stable_id`). Ranks under ``mpiexec`` write one report each;
  pytest-xdist workers write none: their reports reach the controller, which writes, each
  tagged by the worker with the test's stable id and markers (the controller collects none).
* :func:`aggregate` over every report of every session (``nox -s skips``, or
  ``python tools/skip_report.py [DIR]``): per session, how many tests each skip reason
  covered; and every test id that was skipped in every run that collected it, unless it is
  marked ``@pytest.mark.needs_hardware("...")``: hardware CI does not have, run where it exists
  (tools/gpu_check.py on a GPU). The command exits 1 when there is such a test, and 0, saying
  so, when there are no reports at all (nothing to check).

The reports live in ``.skip-report/<session>/`` at the repository root (git-ignored); each
session empties its own folder when it starts, so a folder holds the runs of its last run.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["DESELECTIONS", "ENV", "MARKER", "Run", "Summary", "aggregate", "load", "main",
           "normalize_id", "stable_id"]

#: where the plugin writes (a folder); unset: the plugin does nothing
ENV = "SINGA_SKIP_REPORT_DIR"
#: the marker of a test that needs hardware CI lacks (pyproject.toml's ``markers``)
MARKER = "needs_hardware"
# an outcome that beats another when a test reports several phases (setup, call, teardown)
_RANK = {"not run": 0, "skipped": 1, "xfailed": 2, "passed": 3, "xpassed": 3, "failed": 4}


# ---------------------------------------------------------------------------- the plugin
def _reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(longrepr)
    text = text.removeprefix("Skipped: ").strip()
    # onnx's exclusion pattern names every excluded test: the start says enough
    return text if len(text) <= 300 else text[:299] + "…"


def _rank_of_process() -> int | None:
    for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return None


def stable_id(item) -> str:
    """The id a test has in every session: its node id, except for a test function defined in
    an importable package module (the conformance kit's, ``singa.testing.conformance``), which
    a backend's test file imports and ``--pyargs`` collects from site-packages: that one is
    ``<module>::<name>``, the same wherever it was collected from."""
    module = getattr(getattr(item, "function", None), "__module__", None) or ""
    if "." in module:
        return f"{module}::{item.nodeid.split('::', 1)[-1]}"
    return item.nodeid


class _Recorder:
    def __init__(self, folder: str):
        self.folder = folder
        self.tests: dict[str, dict] = {}
        self.keys: dict[str, str] = {}  # node id -> stable_id

    def _entry(self, nodeid):
        return self.tests.setdefault(self.keys.get(nodeid, nodeid), {
            "outcome": "not run", "reason": None, "hardware": None})

    def _set(self, nodeid, outcome, reason=None):
        e = self._entry(nodeid)
        if _RANK[outcome] >= _RANK[e["outcome"]]:
            e["outcome"] = outcome
            if outcome == "skipped":
                e["reason"] = reason

    def pytest_collection_finish(self, session):
        for item in session.items:  # none on an xdist controller: see _WorkerTags
            self._identify(item.nodeid, stable_id(item), _hardware(item))

    def _identify(self, nodeid, key, hardware):
        self.keys[nodeid] = key
        self._entry(nodeid)["hardware"] = hardware

    def pytest_collectreport(self, report):
        if report.skipped:  # a module skipped as a whole (importorskip, allow_module_level)
            self._set(report.nodeid, "skipped", _reason(report))

    def pytest_runtest_logreport(self, report):
        tags = dict(report.user_properties)
        if _ID in tags:  # from an xdist worker, which collected the item
            self._identify(report.nodeid, tags[_ID], tags.get(_HARDWARE))
        xfail = hasattr(report, "wasxfail")
        if report.failed:
            self._set(report.nodeid, "failed")
        elif report.skipped:
            self._set(report.nodeid, "xfailed" if xfail else "skipped", _reason(report))
        elif report.when == "call":
            self._set(report.nodeid, "xpassed" if xfail else "passed")

    def pytest_sessionfinish(self, session, exitstatus):
        os.makedirs(self.folder, exist_ok=True)
        data = {"created": time.time(), "pid": os.getpid(), "rank": _rank_of_process(),
                "argv": sys.argv, "rootdir": str(session.config.rootpath),
                "exitstatus": int(exitstatus), "tests": self.tests}
        path = os.path.join(self.folder, f"{os.getpid()}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1)
        os.replace(tmp, path)


def _hardware(item) -> str | None:
    """The ``needs_hardware`` markers of ``item``, joined (None: none)."""
    marks = [m.args[0] if m.args else "unnamed hardware" for m in item.iter_markers(MARKER)]
    return ", ".join(str(m) for m in marks) or None


# An xdist controller collects nothing: the workers tag each item's reports with its stable id
# and hardware markers (``user_properties`` travel with the reports), so the controller's
# report has the ids and exemptions a single process would write
_ID, _HARDWARE = "skip_report_id", "skip_report_hardware"


class _WorkerTags:
    def pytest_collection_modifyitems(self, items):
        for item in items:
            item.user_properties.append((_ID, stable_id(item)))
            hardware = _hardware(item)
            if hardware:
                item.user_properties.append((_HARDWARE, hardware))


def pytest_configure(config):
    config.addinivalue_line(
        "markers", f"{MARKER}(what): the test needs hardware CI does not have (e.g. "
        "'nvidia gpu'); a skip report does not count its skips against it")
    folder = os.environ.get(ENV)
    if folder and hasattr(config, "workerinput"):  # an xdist worker: the controller writes
        config.pluginmanager.register(_WorkerTags(), "singa-skip-worker-tags")
    elif folder:
        config.pluginmanager.register(_Recorder(folder), "singa-skip-recorder")


# ---------------------------------------------------------------------------- aggregation
@dataclass
class Run:
    """One pytest process's report: ``tests`` maps a test id to its entry."""

    session: str
    path: str
    tests: dict


@dataclass
class Summary:
    #: session -> Counter(skip reason -> tests skipped for it)
    reasons: dict = field(default_factory=dict)
    #: test id -> {session: reason}: skipped in every run that collected it, not marked
    always_skipped: dict = field(default_factory=dict)
    #: test id -> hardware: skipped everywhere, marked as needing hardware CI lacks
    hardware: dict = field(default_factory=dict)
    #: test id -> the DESELECTIONS key of its skips: skipped everywhere by design
    deselected: dict = field(default_factory=dict)
    #: session -> number of runs (pytest processes) read
    runs: dict = field(default_factory=dict)


_SITE = re.compile(r"^.*?site-packages/")

#: skip reasons (their start) that deselect by design rather than skip a test: counted, never
#: listed as always skipped
DESELECTIONS = {
    "got empty parameter set": "pytest's stand-in ([NOTSET]) for a parametrization with no case",
    "no matched include pattern": "onnx.backend.test's include filter: the node tests "
                                  "tests/onnx/test_node_backend.py selects",
    "matched exclude pattern": "tests/onnx/node_test_exclusions.txt: ONNX node tests singa "
                               "does not pass, each with its reason (checked there)",
}


def normalize_id(nodeid: str) -> str:
    """``nodeid`` without the virtual environment it ran from (``--pyargs`` ids start at the
    installed file: ``../.nox/<session>/lib/python3.X/site-packages/singa/testing/...``), so
    that the same test has the same id in every session."""
    return _SITE.sub("", nodeid)


def load(folder) -> list[Run]:
    """Every report under ``folder``: ``folder/<session>/<pid>.json``."""
    runs = []
    root = Path(folder)
    if not root.is_dir():
        return runs
    for path in sorted(root.glob("*/*.json")):
        data = json.loads(path.read_text())
        runs.append(Run(path.parent.name, str(path), data["tests"]))
    return runs


def aggregate(runs) -> Summary:
    """The per-session skip-reason counts, and the tests skipped in every run that collected
    them (``always_skipped`` unless marked ``needs_hardware``, else ``hardware``).

    A test counts as run when any run passed, failed, xfailed or xpassed it; one that a run
    collected but never reached (``not run``: the run stopped early) is neither skipped nor
    run there. A test skipped everywhere only for a reason of :data:`DESELECTIONS` (e.g.
    pytest's ``[NOTSET]`` stand-in for an empty parametrization) goes to ``deselected``.
    """
    s = Summary()
    seen: dict[str, dict] = {}  # test id -> {"ran": bool, "skips": {session: reason}, ...}
    for run in runs:
        s.runs[run.session] = s.runs.get(run.session, 0) + 1
        counts = s.reasons.setdefault(run.session, Counter())
        for nodeid, e in run.tests.items():
            tid = normalize_id(nodeid)
            info = seen.setdefault(tid, {"ran": False, "skips": {}, "hardware": None})
            if e.get("hardware"):
                info["hardware"] = e["hardware"]
            outcome = e["outcome"]
            if outcome == "skipped":
                reason = e.get("reason") or "no reason given"
                info["skips"].setdefault(run.session, reason)
                counts[reason] += 1
            elif outcome != "not run":
                info["ran"] = True
    for tid, info in sorted(seen.items()):
        if info["ran"] or not info["skips"]:
            continue
        kinds = {next((d for d in DESELECTIONS if r.startswith(d)), None)
                 for r in info["skips"].values()}
        if None not in kinds:
            s.deselected[tid] = sorted(kinds)[0]
        elif info["hardware"]:
            s.hardware[tid] = info["hardware"]
        else:
            s.always_skipped[tid] = info["skips"]
    return s


def format_summary(s: Summary) -> str:
    lines = []
    for session in sorted(s.reasons):
        counts = s.reasons[session]
        total = sum(counts.values())
        lines.append(f"{session}: {s.runs[session]} run(s), {total} skip(s)")
        for reason, n in counts.most_common():
            lines.append(f"  {n:5d}  {reason[:160]}")
    if s.hardware:
        lines.append(f"{len(s.hardware)} test(s) skipped everywhere, marked as needing "
                     "hardware CI lacks (run them where it exists):")
        for hw, n in sorted(Counter(s.hardware.values()).items()):
            lines.append(f"  {n:5d}  {hw}")
    if s.deselected:
        lines.append(f"{len(s.deselected)} test id(s) skipped everywhere by design:")
        for kind, n in sorted(Counter(s.deselected.values()).items()):
            lines.append(f"  {n:5d}  {kind}: {DESELECTIONS[kind]}")
    if s.always_skipped:
        lines.append(f"FAIL: {len(s.always_skipped)} test(s) skipped in every session that "
                     f"collected them (fix them, or mark @pytest.mark.{MARKER}(\"...\") if "
                     "they need hardware CI lacks):")
        for tid, skips in s.always_skipped.items():
            where = "; ".join(f"{sess}: {r[:120]}" for sess, r in sorted(skips.items()))
            lines.append(f"  {tid}  [{where}]")
    else:
        lines.append("OK: every collected test ran in at least one session (or needs "
                     "hardware CI lacks)")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = argv[0] if argv else os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), ".skip-report")
    runs = load(folder)
    if not runs:
        print(f"skip report: no reports in {folder}: nothing to check (the test sessions "
              "write them: run `nox`, which runs this session last)")
        return 0
    summary = aggregate(runs)
    print(format_summary(summary))
    return 1 if summary.always_skipped else 0


if __name__ == "__main__":
    sys.exit(main())
