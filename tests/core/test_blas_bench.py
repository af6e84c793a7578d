"""benchmarks/blas.py: the error column is each library's distance from a float64 product
(so a wrong GEMM shows), and without the ``mkl`` wheel the script says how to install it.

MKL's own ctypes call is not tested here: CI does not install the 221 MB wheel, so such a test
would skip everywhere (tools/skip_report.py refuses that). Where the script runs, its error
column checks MKL's products against float64 on every row."""

from __future__ import annotations

import _bench_scripts
import numpy as np
import pytest


@pytest.fixture(scope="module")
def bench():
    return _bench_scripts.load("blas")


SMALL = [("small", (7, 13, 5)), ("tall", (33, 4, 9))]


def test_errors_are_against_a_float64_product(bench):
    rows = bench.compare(lambda a, b, c: np.matmul(a, b, out=c), 2, SMALL)
    assert [r[0] for r in rows] == ["small", "tall"]
    for _name, _mkn, t_np, t_other, e_np, e_other in rows:
        assert t_np > 0 and t_other > 0
        assert e_np < 1e-6 and e_other < 1e-6


def test_a_wrong_gemm_shows_in_its_error_column(bench):
    def transposed_wrong(a, b, c):
        np.matmul(a, b, out=c)
        c[0, 0] += 1.0

    rows = bench.compare(transposed_wrong, 2, SMALL)
    assert all(r[5] > 1e-2 and r[4] < 1e-6 for r in rows)


def test_without_the_wheel_it_says_how_to_install(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "find_mkl", lambda: None)
    assert bench.main(["--repeat", "2"]) == 2
    assert "pip install mkl" in capsys.readouterr().err
