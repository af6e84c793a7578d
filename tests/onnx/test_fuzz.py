"""Fuzz: >= 1000 mutated models; each gives SingaONNXError or runs, in a sandboxed child.

Children run chunks of the corpus with an address-space limit (RLIMIT_AS) and a timeout of
10 s per case, so a crash, a hang or an over-allocation fails the test instead of pytest.
Afterwards no file may exist outside what the corpus itself wrote.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = 1000
CHUNK = 125
MEMORY_LIMIT = 3 << 30  # bytes of address space per child (numpy/onnx need ~1 GiB to start)


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("start", range(0, CASES, CHUNK))
def test_fuzz_chunk(tmp_path, start):
    work = tmp_path / "corpus"
    work.mkdir()
    before = set(os.listdir(tmp_path))
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "fuzz_worker.py"), "0", str(start), str(CHUNK),
         str(work)],
        cwd=HERE, capture_output=True, text=True, timeout=10 * CHUNK, preexec_fn=_limit,
        env={**os.environ, "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", "")})
    assert proc.returncode == 0, f"child crashed ({proc.returncode}): {proc.stderr[-2000:]}"
    lines = [ln.split(" ", 1) for ln in proc.stdout.splitlines()]
    assert len(lines) == CHUNK, proc.stderr[-2000:]
    bad = [ln for ln in lines if ln[1].startswith("BAD")]
    assert not bad, bad[:10]
    outcomes = {o for _, o in lines}
    assert "error" in outcomes
    # nothing written besides the corpus folder; inside it only the corpus's own data files
    assert set(os.listdir(tmp_path)) == before
    leftover = set(os.listdir(work)) - {"weights.bin", "weights_ok.bin", "link_out"}
    assert not leftover, leftover
