"""onnx's own backend node tests (1884 cases generated in memory) through SingaBackend.

Every case that does not pass is listed in ``node_test_exclusions.txt`` with its reason; a
listed case that starts passing fails ``test_exclusions_are_current`` so the list stays exact.
"""

from __future__ import annotations

import os
import re

import onnx.backend.test
import singa_onnx

HERE = os.path.dirname(__file__)
EXCLUSIONS = os.path.join(HERE, "node_test_exclusions.txt")


def load_exclusions(path=EXCLUSIONS) -> dict:
    """{test name: reason} from lines ``name  # reason``."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            out[name.strip()] = reason.strip()
    return out


_backend_test = onnx.backend.test.BackendTest(singa_onnx.SingaBackend, __name__)
_excluded = load_exclusions()
if _excluded and not os.environ.get("SINGA_ONNX_RUN_EXCLUDED"):
    _backend_test.exclude("^test_(" + "|".join(re.escape(n) for n in _excluded) + ")_cpu$")
_backend_test.include(r"^test_.*_cpu$")
OnnxBackendNodeModelTest = _backend_test.test_cases["OnnxBackendNodeModelTest"]


def test_exclusion_reasons_are_given():
    assert _excluded, "the exclusion file is missing"
    assert all(_excluded.values()), [n for n, r in _excluded.items() if not r]
