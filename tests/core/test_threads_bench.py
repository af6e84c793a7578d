"""benchmarks/threads.py: every way of running a product is checked against a float64
product (a wrong product shows in its error column), the operands are the step's (transposed
views where the step's gradients have them), and the handoff table measures real round trips."""

from __future__ import annotations

import _bench_scripts
import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench():
    return _bench_scripts.load("threads")


SMALL = [("plain", (7, 13, 5), ""), ("a transposed", (9, 4, 6), "a"),
         ("b transposed", (5, 8, 3), "b")]


def test_each_way_is_checked_against_float64(bench):
    ways, spinning = bench.product_ways()
    assert "1 thread" in ways and any(w.startswith("backend pool") for w in ways)
    assert any(w.startswith("backend team") for w in ways)
    assert spinning <= set(ways) and not any(w.startswith("backend") for w in spinning)

    def wrong(a, b, out):
        np.matmul(a, b, out=out)
        out[-1, -1] += 1.0

    rows = bench.products(3, {**ways, "wrong": wrong}, SMALL, spinning, settle=0.0)
    assert [r[0] for r in rows] == ["plain", "a transposed", "b transposed"]
    for _name, _mkn, res in rows:
        for way, (us, err) in res.items():
            assert us > 0
            assert (err > 1e-2) if way == "wrong" else (err < 1e-6), (way, err)


def test_operands_are_the_steps_views(bench):
    rng = np.random.default_rng(0)
    a, b = bench._operands(rng, 6, 4, 5, "a")
    assert a.shape == (6, 4) and b.shape == (4, 5)
    assert a.flags.f_contiguous and not a.flags.c_contiguous and b.flags.c_contiguous
    a, b = bench._operands(rng, 6, 4, 5, "b")
    assert b.shape == (4, 5) and b.flags.f_contiguous and a.flags.c_contiguous
    assert [s[1] for s in bench.MLP_PRODUCTS][:3] == [(64, 784, 512), (64, 512, 512),
                                                     (64, 512, 10)]


def test_handoffs_time_round_trips(bench):
    rows = bench.handoffs(5)
    from singa_cpu.kernels import _team

    team = ["GEMM team"] if _team.team(1) is not None else []  # None: not OpenBLAS's CBLAS
    assert [r[0].split(",")[0].split(":")[0] for r in rows] == [
        "lock ping-pong", "backend pool", "numba prange (workqueue)", *team]
    for _what, hot, idle in rows:
        assert 0 < hot < 1e6 and 0 < idle < 1e6


def test_step_ab_uses_the_team_only_in_its_blocks(bench, monkeypatch):
    """The team's blocks split the MLP's big products on the team (its five products above
    8M multiply-adds a step), the pool's blocks never call it; both times are real."""
    from singa_cpu.kernels import _threads

    if _threads.num_threads() < 2:
        monkeypatch.setattr(_threads, "num_threads", lambda: 2)
    from singa_cpu.kernels import _team

    if _team.team(1) is None:
        pytest.skip("numpy's BLAS has no OpenBLAS CBLAS entry points: no team here")
    pool, team, ratio, taken = bench.step_ab("mlp", False, 2, 2)
    assert pool > 0 and team > 0 and ratio > 0
    assert taken == 5  # per step of the team's blocks (10 if the pool's called it too)
