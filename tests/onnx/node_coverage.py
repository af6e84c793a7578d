"""Run onnx's backend node tests through SingaBackend and write the exclusion file.

``python tests/onnx/node_coverage.py [--write] [--docs]`` runs every CPU node case, groups
the ones that fail by reason, prints a summary; ``--write`` rewrites
``node_test_exclusions.txt`` (one ``name  # reason`` line per failing case) and ``--docs`` the
coverage table in ``docs/onnx.md``. The reason is
the first line of the error, shortened to its kind (unsupported op, attribute, dtype, ...).
"""

from __future__ import annotations

import collections
import os
import re
import sys
import unittest
import warnings

import onnx.backend.test
import singa_onnx

HERE = os.path.dirname(os.path.abspath(__file__))
EXCLUSIONS = os.path.join(HERE, "node_test_exclusions.txt")

_REASONS = [
    (r"unsupported op\(s\)/attribute\(s\): (.*?)\. Where", lambda m: "unsupported: " + m[1]),
    (r"dtype (\S+) is not supported", lambda m: f"dtype {m[1]} not supported by singa"),
    (r"data type (\d+) is not supported", lambda m: f"ONNX data type {m[1]} not supported"),
    (r"fails onnx.checker", lambda m: "model rejected by onnx.checker in this onnx version"),
    (r"Mismatch|Not equal|not close", lambda m: "numerical mismatch"),
    (r"shapes? .*mismatch|\(shapes", lambda m: "wrong output shape"),
    (r"dtype", lambda m: "output dtype differs (singa holds ints as int32, bools as floats)"),
]


def reason_of(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    first = lines[-1] if lines else "unknown"
    for pat, fmt in _REASONS:
        m = re.search(pat, first)
        if m:
            return fmt(m)
    return re.sub(r"\s+", " ", first)[:160]


def run_all(pattern=r"_cpu$"):
    bt = onnx.backend.test.BackendTest(singa_onnx.SingaBackend, "node_coverage")
    cls = bt.test_cases["OnnxBackendNodeModelTest"]
    names = sorted(n for n in dir(cls) if n.startswith("test_") and re.search(pattern, n))
    passed, failed = [], {}
    for n in names:
        result = unittest.TestResult()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cls(n).run(result)
        problems = result.errors + result.failures
        if problems:
            failed[n] = reason_of(problems[0][1])
        elif result.skipped:
            failed[n] = "skipped by onnx's runner: " + result.skipped[0][1][:100]
        else:
            passed.append(n)
    return passed, failed


DOC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "docs", "onnx.md")
BEGIN, END = "<!-- coverage table: begin -->", "<!-- coverage table: end -->"


def coverage_table(passed: int, failed: dict) -> str:
    """Markdown: the pass count, then every excluded case grouped by reason."""
    groups = collections.defaultdict(list)
    for n, r in failed.items():
        groups[r].append(n[len("test_"):-len("_cpu")])
    lines = [f"**{passed} of {passed + len(failed)}** CPU node cases pass; the "
             f"{len(failed)} others, by reason (the exact list is "
             "`tests/onnx/node_test_exclusions.txt`):", "",
             "| cases | reason | examples |", "|---:|---|---|"]
    for r, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        ex = ", ".join(f"`{n}`" for n in sorted(names)[:3]) + (" ..." if len(names) > 3 else "")
        lines.append(f"| {len(names)} | {r.replace('|', '/')} | {ex} |")
    return "\n".join(lines)


def write_doc(passed: int, failed: dict) -> None:
    with open(DOC) as fh:
        text = fh.read()
    i, j = text.index(BEGIN) + len(BEGIN), text.index(END)
    with open(DOC, "w") as fh:
        fh.write(text[:i] + "\n" + coverage_table(passed, failed) + "\n" + text[j:])


def main(argv):
    passed, failed = run_all()
    total = len(passed) + len(failed)
    print(f"passed {len(passed)} of {total}")
    for reason, count in collections.Counter(failed.values()).most_common():
        print(f"{count:5d}  {reason}")
    if "--docs" in argv:
        write_doc(len(passed), failed)
    if "--write" in argv:
        with open(EXCLUSIONS, "w") as fh:
            fh.write("# onnx backend node tests (CPU) that SingaBackend does not pass, with the "
                     "reason.\n# Regenerate: python tests/onnx/node_coverage.py --write\n")
            for n, r in sorted(failed.items()):
                fh.write(f"{n[len('test_'):-len('_cpu')]}  # {r}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
