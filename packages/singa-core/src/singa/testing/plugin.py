"""pytest plugin: command-line options, fixtures and reporting for testing SINGA backends.

pytest loads it automatically (entry point ``pytest11``) when singa-core is installed. It adds

``--singa-backend NAME``
    the device string under test (``cpu``, ``opencl``, ``opencl:0``, ``cuda:1``, a plugin's
    backend name); default ``$SINGA_DEVICE`` or ``cpu``.
``--singa-xfails PATH``
    known conformance failures (format in :mod:`singa.testing.conformance`).
``--singa-examples N``
    hypothesis examples per conformance test (default :data:`DEFAULT_EXAMPLES`).
``--singa-randomize``
    draw fresh conformance examples on every run instead of the same ones.
``--singa-no-shrink``
    report a conformance failure's first example without shrinking it.
``--singa-large auto|on|off``
    run the conformance kit's large cases (``test_large``); ``auto`` (default) runs them
    for the backends of singa's own distributions (:data:`BUILTIN_DISTRIBUTIONS`) and
    skips them for others, which may be slow devices.

and the session fixtures ``singa_backend`` (the device string) and ``singa_device`` (the
Device; requesting it fails loudly when the backend cannot be used). When the conformance
suite runs, the terminal summary reports how many kernel/dtype pairs were checked, and the
session fails if the suite was collected but no kernel test passed.

Importing this module is cheap: singa's device machinery loads only when a fixture or the
conformance suite asks for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

__all__ = [
    "DEFAULT_EXAMPLES",
    "BUILTIN_DISTRIBUTIONS",
    "KINDS",
    "KernelStats",
    "XfailEntry",
    "device_string",
    "examples",
    "large_enabled",
    "parse_xfails",
    "randomized",
    "shrinking",
    "xfail_for",
]

#: Hypothesis examples per conformance test unless ``--singa-examples`` says otherwise.
DEFAULT_EXAMPLES = 10
#: Conformance test kinds (``test_<kind>``), as named in xfail files.
KINDS = ("forward", "special", "large", "layouts", "inplace", "random_stats", "random_seed",
         "fused", "bound")
#: Distributions whose backends run ``test_large`` by default (``--singa-large auto``).
BUILTIN_DISTRIBUTIONS = frozenset({"singa-cpu", "singa-opencl", "singa-cuda"})


def pytest_addoption(parser):
    """Add the ``--singa-*`` options (backend, xfail file, randomize, no-shrink, large cases,
    examples) in a ``singa`` group.
    """
    group = parser.getgroup("singa", "SINGA backend testing")
    group.addoption(
        "--singa-backend",
        action="store",
        default=None,
        help="backend (device string) under test, e.g. cpu, opencl, opencl:0, cuda:0; "
        "default: $SINGA_DEVICE or cpu",
    )
    group.addoption(
        "--singa-xfails",
        action="store",
        default=None,
        metavar="PATH",
        help="file of known conformance failures, lines 'OpName[:dtype][:test][?]  reason'; "
        "listed tests are marked xfail(strict=True), or non-strict with a trailing '?'",
    )
    group.addoption(
        "--singa-randomize",
        action="store_true",
        default=False,
        help="conformance tests draw new examples on every run (default: the same examples "
        "every run, so results and strict xfails are reproducible)",
    )
    group.addoption(
        "--singa-no-shrink",
        action="store_true",
        default=False,
        help="report the first failing example of a conformance test without shrinking it "
        "(faster triage of a backend with many failures)",
    )
    group.addoption(
        "--singa-large",
        action="store",
        choices=("auto", "on", "off"),
        default="auto",
        help="run the conformance kit's large cases (about a million elements each): auto "
        "(default) for singa's own backends only, on, or off",
    )
    group.addoption(
        "--singa-examples",
        action="store",
        type=int,
        default=None,
        metavar="N",
        help=f"hypothesis examples per conformance test (default {DEFAULT_EXAMPLES}; "
        "raise for a thorough run)",
    )


def pytest_configure(config):
    """Declare the ``singa_kernel`` marker and start the run's kernel statistics."""
    config.addinivalue_line(
        "markers",
        "singa_kernel(op, dtype, kind): a conformance test of one kernel at one dtype",
    )
    config.stash[_STATS_KEY] = KernelStats()


def device_string(config) -> str:
    """The device string under test: ``--singa-backend``, else ``$SINGA_DEVICE``, else cpu."""
    return config.getoption("--singa-backend") or os.environ.get("SINGA_DEVICE") or "cpu"


def examples(config) -> int:
    """Hypothesis examples per conformance test."""
    n = config.getoption("--singa-examples")
    return DEFAULT_EXAMPLES if n is None else max(1, int(n))


def randomized(config) -> bool:
    """True when conformance tests should draw fresh examples (``--singa-randomize``)."""
    return bool(config.getoption("--singa-randomize"))


def large_enabled(config, dev) -> bool:
    """Whether ``test_large`` runs on ``dev`` (``--singa-large``; see the module doc)."""
    choice = config.getoption("--singa-large") or "auto"
    if choice != "auto":
        return choice == "on"
    from singa.backend import registry

    entry = registry().backends.get(dev.backend)
    dist = entry.provider.dist if entry is not None else None
    return (dist or "").lower().replace("_", "-") in BUILTIN_DISTRIBUTIONS


def shrinking(config) -> bool:
    """False when conformance failures should not be shrunk (``--singa-no-shrink``)."""
    return not config.getoption("--singa-no-shrink")


@pytest.fixture(scope="session")
def singa_backend(pytestconfig) -> str:
    """The device string under test."""
    return device_string(pytestconfig)


@pytest.fixture(scope="session")
def singa_device(singa_backend):
    """The Device under test (fails loudly if its backend cannot be used), set to full
    float32 precision: the kit's float32 tolerances are those of float32 arithmetic, not of
    TF32-like formats a backend may use by default (``Device.float32_precision``)."""
    from singa.device import get_device

    dev = get_device(singa_backend)
    dev.float32_precision = "highest"
    return dev


# ---------------------------------------------------------------------- xfail files
@dataclass(frozen=True)
class XfailEntry:
    """One line of an xfail file: ``op[:dtype][:kind][?]  reason``.

    A trailing ``?`` makes the entry non-strict: for failures that depend on memory
    addresses or timing rather than on the drawn case, so that a passing run is no error.
    """

    op: str
    dtype: str | None
    kind: str | None
    reason: str
    where: str
    strict: bool = True

    def matches(self, op: str, dtype: str, kind: str) -> bool:
        """Whether this entry covers the kernel test of ``op`` at ``dtype`` of kind ``kind`` (an
        unset dtype or kind matches all).
        """
        return self.op == op and self.dtype in (None, dtype) and self.kind in (None, kind)


def parse_xfails(text: str, source: str = "<xfails>") -> list[XfailEntry]:
    """Parse an xfail file; raise ``pytest.UsageError`` naming the bad line."""
    from singa._dtype import NAME

    dtypes = set(NAME.values())
    entries = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        selector, *rest = line.split(None, 1)
        reason = rest[0] if rest else ""
        strict = not selector.endswith("?")
        parts = selector.removesuffix("?").split(":")
        where = f"{source}:{lineno}"
        if len(parts) > 3 or not parts[0]:
            raise pytest.UsageError(
                f"{where}: expected 'OpName[:dtype][:test][?]  reason', got {raw!r}"
            )
        dtype = parts[1] if len(parts) > 1 and parts[1] else None
        kind = parts[2] if len(parts) > 2 and parts[2] else None
        if dtype is not None and dtype not in dtypes:
            raise pytest.UsageError(
                f"{where}: unknown dtype {dtype!r}; use one of {sorted(dtypes)}"
            )
        if kind is not None and kind not in KINDS:
            raise pytest.UsageError(f"{where}: unknown test {kind!r}; use one of {KINDS}")
        entries.append(
            XfailEntry(
                parts[0], dtype, kind, reason.strip() or f"listed in {where}", where, strict
            )
        )
    return entries


def _xfails(config) -> list[XfailEntry]:
    stats = config.stash[_STATS_KEY]
    if stats.xfails is None:
        path = config.getoption("--singa-xfails")
        if path:
            p = Path(path)
            if not p.is_file():
                raise pytest.UsageError(f"--singa-xfails: no such file: {path}")
            stats.xfails = parse_xfails(p.read_text(), str(p))
        else:
            stats.xfails = []
    return stats.xfails


def xfail_for(config, op: str, dtype: str, kind: str) -> XfailEntry | None:
    """The first xfail entry matching this kernel test, or None."""
    for entry in _xfails(config):
        if entry.matches(op, dtype, kind):
            config.stash[_STATS_KEY].used_xfails.add(entry)
            return entry
    return None


# ---------------------------------------------------------------------- reporting
@dataclass
class KernelStats:
    """What the conformance suite collected and how its kernel tests ended."""

    device: str | None = None
    requested: str | None = None
    kernels: int = 0
    missing: list[str] = field(default_factory=list)
    items: int = 0
    outcomes: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)
    xfails: list[XfailEntry] | None = None
    used_xfails: set = field(default_factory=set)

    def count(self, outcome: str) -> int:
        """Kernel tests that ended with ``outcome`` (``passed``, ``failed``, ``xfailed``, ...),
        over every op and dtype.
        """
        return sum(o.get(outcome, 0) for o in self.outcomes.values())

    def pairs_checked(self) -> int:
        """Kernel/dtype pairs with a passing test and no failing one."""
        return sum(
            1
            for k, o in self.outcomes.items()
            if k[0] and o.get("passed", 0) and not o.get("failed", 0)
        )

    def ops_checked(self) -> int:
        """Ops with at least one kernel/dtype pair that passed and none that failed."""
        return len(
            {
                k[0]
                for k, o in self.outcomes.items()
                if k[0] and o.get("passed", 0) and not o.get("failed", 0)
            }
        )


_STATS_KEY = pytest.StashKey[KernelStats]()


def register_kit_items(config, dev) -> None:
    """Called by the conformance suite at collection: remember the device under test."""
    from singa.ops import OPS

    from .conformance import device_kernels

    stats = config.stash[_STATS_KEY]
    stats.device = dev.name
    stats.requested = device_string(config)
    own = device_kernels(dev)
    stats.kernels = len(own)
    stats.missing = sorted(name for name in OPS if name not in own)


def pytest_collection_finish(session):
    """Count the collected kernel tests (those marked ``singa_kernel``)."""
    stats = session.config.stash.get(_STATS_KEY, None)
    if stats is not None:
        stats.items = sum(1 for it in session.items if it.get_closest_marker("singa_kernel"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Tally each kernel test's outcome under its (op, dtype) pair; host-fallback tests count
    under no pair.
    """
    rep = yield
    marker = item.get_closest_marker("singa_kernel")
    if marker is not None and (rep.when == "call" or not rep.passed):
        if rep.passed:
            outcome = "passed"
        elif hasattr(rep, "wasxfail"):
            outcome = "xfailed" if rep.skipped else "xpassed"
        elif rep.skipped:
            outcome = "skipped"
        else:
            outcome = "failed"
        key = (marker.kwargs.get("op", ""), marker.kwargs.get("dtype", ""))
        if not marker.kwargs.get("native", True):  # host fallback: no kernel/dtype pair
            key = ("", "")
        stats = item.config.stash[_STATS_KEY]
        slot = stats.outcomes.setdefault(key, {})
        slot[outcome] = slot.get(outcome, 0) + 1
    return rep


def pytest_sessionfinish(session, exitstatus):
    """Fail a session that collected kernel tests but passed none of them (e.g. every one
    skipped).
    """
    stats = session.config.stash.get(_STATS_KEY, None)
    if stats is None or not stats.items or session.config.option.collectonly:
        return
    if stats.count("passed") == 0 and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print the conformance summary: the device, the kernel/dtype pairs and ops checked, the
    tests per outcome, the ops without a kernel and the xfail entries that matched nothing."""
    stats = config.stash.get(_STATS_KEY, None)
    if stats is None or stats.device is None:
        return
    tr = terminalreporter
    tr.write_sep("-", "singa conformance")
    counts = ", ".join(
        f"{stats.count(k)} {k}"
        for k in ("passed", "failed", "xfailed", "xpassed", "skipped")
        if stats.count(k)
    )
    tr.write_line(
        f"singa conformance: backend {stats.requested!r} (device {stats.device}): "
        f"{stats.pairs_checked()} kernel/dtype pairs of {stats.ops_checked()} ops checked "
        f"({stats.kernels} kernels registered; tests: {counts or 'none run'})"
    )
    if stats.missing:
        tr.write_line(
            f"  {len(stats.missing)} ops have no kernel on this device (host "
            f"fallback or missing, not checked): {', '.join(stats.missing)}"
        )
    unused = [e for e in (stats.xfails or []) if e not in stats.used_xfails]
    if unused:
        tr.write_line(
            "  xfail entries that matched no collected test: "
            + ", ".join(f"{e.where} ({e.op})" for e in unused)
        )
    if stats.items and stats.count("passed") == 0 and not config.option.collectonly:
        tr.write_line("  FAIL: the conformance suite ran but no kernel test passed")
