"""benchmarks/eager_step.py: its two timed functions run, and the timing helper counts per
call."""

from __future__ import annotations

import _bench_scripts
import pytest


@pytest.fixture(scope="module")
def bench():
    return _bench_scripts.load("eager_step")


def test_step_and_update_run_and_time(bench):
    for make in (bench.training_step, bench.optimizer_update):
        fn = make()
        ms = bench.blocks_ms(fn, 2, 2)
        assert len(ms) == 2 and all(v >= 0 for v in ms)


def test_blocks_ms_divides_by_the_steps(bench, monkeypatch):
    clock = iter([0.0, 0.5, 1.0, 1.2])
    monkeypatch.setattr(bench.time, "process_time", lambda: next(clock))
    assert bench.blocks_ms(lambda: None, 2, 100) == pytest.approx([5.0, 2.0])
