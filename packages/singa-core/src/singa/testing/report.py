"""The conformance report: which op/dtype pairs a backend runs natively, through the host
fallback, or not at all, and which of them fail the conformance kit.

``python -m singa.testing --backend NAME [--json PATH]`` runs the kit
(:mod:`singa.testing.conformance`) on the backend in this process and prints one row per op,
one column per dtype, each cell one of

``native``
    the backend's own kernel declares the dtype and every kit test of it passed;
``fallback``
    no kernel of its own: the backend enables host fallback, which runs the op's numpy
    reference on the host (random ops are checked there too, statistically);
``FAILED``
    a kit test of the pair failed (``FAILED*``: a known failure, listed in the xfail file);
``-``
    not declared: no kernel for the dtype and no host fallback (calls raise an error);

(blank: the op is not defined for the dtype), then a summary line. ``--json PATH`` writes the
same, plus each pair's test outcomes, for CI dashboards. The exit status is 0 when nothing
failed. :func:`static_counts` gives the counts that need no kit run (``python -m singa info``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field

from .. import _dtype

__all__ = ["Cell", "STATUSES", "classify", "main", "render", "run_kit", "static_counts"]

#: Cell statuses, in the order of the summary line.
STATUSES = ("native", "host fallback", "failed", "not declared")
#: The dtype columns of the table.
COLUMNS = (_dtype.kFloat32, _dtype.kFloat16, _dtype.kDouble, _dtype.kInt, _dtype.kChar,
           _dtype.kUChar)
_SHORT = {"native": "native", "host fallback": "fallback", "failed": "FAILED",
          "not declared": "-"}


@dataclass
class Cell:
    """One op at one dtype: its status and the kit's outcomes (``{test kind: outcome}``)."""

    status: str
    tests: dict = field(default_factory=dict)
    known: bool = False  # failed, but listed in the xfail file


def _own_kernels(dev) -> dict:
    from .checks import device_kernels  # not from conformance: the doctor runs without pytest

    return device_kernels(dev)


def classify(dev, outcomes: dict | None = None) -> dict:
    """``{op name: {dtype code: Cell}}`` for every op of :data:`singa.ops.OPS` and each dtype
    it defines. ``outcomes`` maps ``(op, dtype name)`` to ``{kind: outcome}`` from a kit run
    (None: statuses from the kernel table alone, nothing marked failed)."""
    from ..ops import OPS

    own = _own_kernels(dev)
    table: dict = {}
    for name, op in OPS.items():
        row = table[name] = {}
        entry = own.get(name)
        for dt in op.dtypes:
            tests = dict((outcomes or {}).get((name, _dtype.name_of(dt)), {}))
            if entry is not None:
                declared = entry[2] if len(entry) > 2 and entry[2] is not None else op.dtypes
                status = "native" if dt in declared else "not declared"
            else:
                status = "host fallback" if dev.host_fallback else "not declared"
            bad = [k for k, o in tests.items() if o in ("failed", "xpassed", "xfailed")]
            cell = Cell(status, tests)
            if bad:
                cell.status = "failed"
                cell.known = all(tests[k] == "xfailed" for k in bad)
            row[dt] = cell
    return table


def static_counts(dev) -> Counter:
    """Op/dtype pairs per status from the device's kernel table alone (no kit run)."""
    return Counter(c.status for row in classify(dev).values() for c in row.values())


class _Collector:
    """pytest plugin recording each kit test's outcome by (op, dtype) and kind."""

    def __init__(self):
        self.outcomes: dict = {}
        self.exitstatus = None

    def pytest_runtest_logreport(self, report):
        mark = getattr(report, "_singa_kernel", None)
        if mark is None or not mark[0]:
            return
        if report.when != "call" and report.passed:
            return
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.skipped else "xpassed"
        else:
            outcome = report.outcome  # passed, failed, skipped
        slot = self.outcomes.setdefault((mark[0], mark[1]), {})
        if slot.get(mark[2]) in (None, "passed", "skipped"):
            slot[mark[2]] = outcome

    def pytest_sessionfinish(self, session, exitstatus):
        self.exitstatus = int(exitstatus)


def _tag_reports():
    """A hook recording the singa_kernel marker on each report (logreport has no item)."""
    import pytest

    class Tagger:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_makereport(self, item, call):
            rep = yield
            m = item.get_closest_marker("singa_kernel")
            if m is not None:
                rep._singa_kernel = (m.kwargs.get("op", ""), m.kwargs.get("dtype", ""),
                                     m.kwargs.get("kind", ""))
            return rep

    return Tagger()


def run_kit(backend: str, pytest_args=()) -> tuple[dict, int]:
    """Run the conformance kit on ``backend`` in this process; ``(outcomes, exit status)``."""
    import pytest

    collector = _Collector()
    args = ["--pyargs", "singa.testing.conformance", "--singa-backend", backend, "-q",
            "-p", "no:cacheprovider", *pytest_args]
    code = pytest.main(args, plugins=[_tag_reports(), collector])
    return collector.outcomes, int(code)


def render(table: dict, backend: str, device: str) -> tuple[str, Counter]:
    """The text table and the status counts."""
    from ..ops import FUSIONS  # noqa: F401  (fusions are not ops: not rows)

    counts = Counter(c.status for row in table.values() for c in row.values())
    width = max(len(n) for n in table) + 2
    head = "op".ljust(width) + "".join(_dtype.name_of(d).rjust(10) for d in COLUMNS)
    lines = [f"singa conformance report: backend {backend!r} (device {device})", head,
             "-" * len(head)]
    for name, row in table.items():
        cells = []
        for d in COLUMNS:
            c = row.get(d)
            text = "" if c is None else _SHORT[c.status] + ("*" if c.known else "")
            cells.append(text.rjust(10))
        lines.append(name.ljust(width) + "".join(cells))
    total = sum(counts.values())
    lines.append("-" * len(head))
    lines.append(summary_line(counts, total, backend))
    if any(c.known for row in table.values() for c in row.values()):
        lines.append("  FAILED*: a known failure, listed in the xfail file")
    return "\n".join(lines), counts


def summary_line(counts: Counter, total: int, backend: str) -> str:
    """One line: how many op/dtype pairs of ``backend`` ended in each status, of ``total``."""
    parts = ", ".join(f"{counts.get(s, 0)} {s}" for s in STATUSES)
    return f"summary: {backend}: {parts} (of {total} op/dtype pairs)"


def to_json(table: dict, backend: str, device: str, counts: Counter, exitstatus) -> dict:
    """The classified table as a JSON-ready dict: backend, device, per-status summary, pytest's
    exit status, and per op and dtype the status, whether it is a known failure, and its
    tests.
    """
    return {
        "backend": backend,
        "device": device,
        "summary": {s: counts.get(s, 0) for s in STATUSES} | {"pairs": sum(counts.values())},
        "pytest_exit_status": exitstatus,
        "ops": {name: {_dtype.name_of(d): {"status": c.status, "known_failure": c.known,
                                           "tests": c.tests}
                       for d, c in row.items()}
                for name, row in table.items()},
    }


def main(argv=None) -> int:
    """``python -m singa.testing``: run the conformance kit on ``--backend`` and print the op x
    dtype table.

    Parameters
    ----------
    argv : list of str, optional
        The command line (``sys.argv[1:]`` if None).

    Returns
    -------
    int
        0 when no pair failed, 1 when some did, pytest's status when the kit did not run.
    """
    parser = argparse.ArgumentParser(
        prog="python -m singa.testing",
        description="Run the conformance kit on a backend and print which op/dtype pairs run "
        "natively, through the host fallback, fail, or are not declared.")
    parser.add_argument("--backend", required=True, help="device string: cpu, opencl, ...")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    parser.add_argument("--examples", type=int, help="hypothesis examples per kit test")
    parser.add_argument("--xfails", metavar="PATH", help="known failures (see the kit's doc)")
    parser.add_argument("--no-run", action="store_true",
                        help="classify from the kernel table only (no kit run, no FAILED)")
    parser.add_argument("pytest_args", nargs="*",
                        help="after --: more pytest arguments, e.g. -- -k forward")
    args = parser.parse_args(argv)
    from . import missing_testing_modules, testing_extra_error

    missing = [] if args.no_run else missing_testing_modules()
    if missing:  # the report alone (--no-run) needs neither
        parser.exit(2, f"{parser.prog}: {testing_extra_error('running the kit', missing)} "
                    "(or classify from the kernel table only, with --no-run)\n")
    from ..device import get_device

    dev = get_device(args.backend)
    outcomes, code = None, None
    if not args.no_run:
        extra = list(args.pytest_args)
        if args.examples:
            extra += ["--singa-examples", str(args.examples)]
        if args.xfails:
            extra += ["--singa-xfails", args.xfails]
        outcomes, code = run_kit(args.backend, extra)
        if code not in (0, 1):  # 1: tests failed (the table says which); else: no run
            print(f"the conformance kit did not run (pytest exit status {code})",
                  file=sys.stderr)
            return code
    table = classify(dev, outcomes)
    text, counts = render(table, args.backend, dev.name)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(to_json(table, args.backend, dev.name, counts, code), f, indent=1)
        print(f"wrote {args.json}")
    return 1 if counts.get("failed") or code else 0
