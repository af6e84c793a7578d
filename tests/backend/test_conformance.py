"""The conformance kit (singa.testing.conformance) for the backend chosen by --singa-backend.

    pytest tests/backend --singa-backend cpu
    pytest tests/backend --singa-backend opencl --singa-xfails PATH

Without --singa-xfails, tests/backend/conftest.py uses packages/singa-<backend>/
conformance-xfails.txt when it exists.
"""

from singa.testing.conformance import (  # noqa: F401  (pytest collects the imported tests)
    pytest_generate_tests,
    test_bad_indices,
    test_bound,
    test_forward,
    test_fused,
    test_inplace,
    test_kernel_table,
    test_large,
    test_layouts,
    test_onehot_out_of_range,
    test_random_seed,
    test_random_stats,
    test_special,
)


def test_conformance_report_runs_for_this_backend(singa_backend, tmp_path):
    """``python -m singa.testing --backend NAME --json PATH`` on the backend under test (a
    few ops, to keep it short): a table, a summary line with nothing failed, the JSON."""
    import json
    import os
    import re
    import subprocess
    import sys

    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "singa.testing", "--backend", singa_backend, "--json",
           str(out), "--examples", "3", "--", "-k",
           "forward and (Abs-float32 or Add-float32 or Conv2d-float32)"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=dict(os.environ), capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    m = re.search(rf"^summary: {re.escape(singa_backend)}: (\d+) native, (\d+) host fallback, "
                  r"0 failed, (\d+) not declared \(of (\d+) op/dtype pairs\)$", proc.stdout,
                  re.M)
    assert m, proc.stdout[-2000:]
    data = json.loads(out.read_text())
    assert data["summary"]["native"] == int(m.group(1)) > 0
    assert data["ops"]["Conv2d"]["float32"] == {"status": "native", "known_failure": False,
                                                "tests": {"forward": "passed"}}
