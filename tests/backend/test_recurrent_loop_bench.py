"""benchmarks/recurrent_loop.py: each timed path is the one it names, the module's routing is
restored after every call, and a run writes one row per case.

The crossover itself is measured by running the benchmark (see its docstring); here two steps
of hidden 4 keep a run to a second.
"""

from __future__ import annotations

import json

import _bench_scripts
import pytest

recurrent = pytest.importorskip("singa_cpu.kernels.recurrent")


@pytest.fixture(scope="module")
def bench():
    return _bench_scripts.load("recurrent_loop")


@pytest.mark.parametrize("cell, loop_fn", [("lstm", "_lstm_seq32"), ("gru", "_gru_seq32"),
                                           ("gru_lbr", "_gru_seq32")])
def test_each_path_runs_what_it_names_and_the_table_is_restored(bench, cell, loop_fn,
                                                                 monkeypatch):
    calls = []
    fn = getattr(recurrent, loop_fn)
    monkeypatch.setattr(recurrent, loop_fn, lambda *a: calls.append(1) or fn(*a))
    kernel, ins, outs, attrs = bench.case(cell, 2, 3, 4)
    table = recurrent.MAX_LOOP_BATCH
    bench._call("gemm", kernel, ins, outs, attrs, 2)
    assert calls == [] and recurrent.MAX_LOOP_BATCH is table
    bench._call("loop", kernel, ins, outs, attrs, 2)
    assert calls == [1, 1] and recurrent.MAX_LOOP_BATCH is table


def test_a_run_writes_a_row_per_case(bench, tmp_path, capsys):
    out = tmp_path / "rows.json"
    bench.main(["--cells", "lstm", "gru_lbr", "--hidden", "4", "--batches", "1", "9",
                "--steps", "2", "--reps", "1", "--min-sample", "0", "--json", str(out)])
    rows = json.loads(out.read_text())
    assert [(r["cell"], r["batch"]) for r in rows] == [
        ("lstm", 1), ("lstm", 9), ("gru_lbr", 1), ("gru_lbr", 9)]
    assert all(r["loop_ms"] > 0 and r["gemm_ms"] > 0 for r in rows)
    assert [r["rule_loop"] for r in rows] == [True, False, True, False]
    assert "| lstm | 4 | 9 |" in capsys.readouterr().out
