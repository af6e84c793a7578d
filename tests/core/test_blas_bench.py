"""benchmarks/blas.py: the error column is each library's distance from a float64 product
(so a wrong GEMM shows), and MKL's ctypes call, where the ``mkl`` wheel is installed, agrees
with numpy."""

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


def test_mkl_sgemm_matches_numpy(bench):
    path = bench.find_mkl()
    if path is None:
        pytest.skip("the mkl wheel is not installed here (pip install mkl)")
    gemm = bench.MklGemm(path, 1)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((17, 40), dtype=np.float32)
    b = rng.standard_normal((40, 23), dtype=np.float32)
    c = np.empty((17, 23), np.float32)
    gemm(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
