"""The CPU backend's spinning GEMM helpers (singa_cpu.kernels._team): a big 2-D product split
across threads is posted as CBLAS calls that helper threads run without the GIL. Every product
must equal the float64 product within float32 rounding and the pool's split bit for bit,
whoever runs which part (a helper, or the caller taking over a part no helper claimed); layouts
that are not BLAS's, other dtypes and a busy team must fall back to the pool."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


@pytest.fixture
def threads(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("CPU threading internals")
    from singa_cpu.kernels import _threads

    return _threads


@pytest.fixture
def team_mod(threads):
    from singa_cpu.kernels import _team

    if _team.team(1) is None:  # numpy's BLAS is not OpenBLAS with CBLAS symbols
        pytest.skip("numpy's BLAS has no OpenBLAS CBLAS entry points: products use the pool")
    return _team


def _operand(rng, shape, transposed, dtype=np.float32):
    x = rng.standard_normal(shape[::-1] if transposed else shape).astype(dtype)
    return x.T if transposed else x


def _split(threads, monkeypatch, n, use_team):
    monkeypatch.setattr(threads, "num_threads", lambda: n)
    monkeypatch.setattr(threads, "PARALLEL_MIN_MACS", 0)
    monkeypatch.setattr(threads, "USE_TEAM", use_team)


CASES = [  # a shape, a transposed, b shape, b transposed
    ((5, 40), False, (40, 70), False),  # wide output: by columns
    ((70, 40), False, (40, 5), False),  # tall output: by rows
    ((4, 33), False, (33, 70), True),  # b a transposed view (a Linear layer's W.T)
    ((60, 6), True, (6, 50), False),  # a a transposed view (a weight gradient's x.T)
    ((64, 784), False, (784, 512), False),  # the MLP's first layer
    ((7, 1), False, (1, 9), False),  # k = 1: strides of a length-1 axis are arbitrary
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("case", CASES)
def test_team_product_equals_float64_and_the_pools_bits(threads, team_mod, monkeypatch, case,
                                                        n_threads, dtype):
    rng = np.random.default_rng(3)
    a_shape, a_t, b_shape, b_t = case
    a, b = _operand(rng, a_shape, a_t, dtype), _operand(rng, b_shape, b_t, dtype)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    _split(threads, monkeypatch, n_threads, use_team=False)
    pool = np.full(want.shape, np.nan, dtype)
    threads.matmul(a, b, pool)
    _split(threads, monkeypatch, n_threads, use_team=True)
    calls = []
    real = team_mod.Team.matmul

    def counted(self, *args):
        calls.append(args[3:])
        return real(self, *args)

    monkeypatch.setattr(team_mod.Team, "matmul", counted)
    out = np.full(want.shape, np.nan, dtype)
    threads.matmul(a, b, out)
    tol = 1e-5 if dtype == np.float32 else 1e-12  # of the largest element: k terms summed
    assert np.abs(out - want).max() <= tol * np.abs(want).max()
    assert np.array_equal(out, pool)
    (spans, by_columns), = calls
    n = out.shape[1] if by_columns else out.shape[0]
    assert len(spans) == n_threads and sum(c for _, c in spans) == n


def test_parts_give_the_same_bits_whoever_runs_them(threads, team_mod, monkeypatch):
    """Helpers stopped, the caller runs every part itself; then helpers running them (a burst
    of products back to back, where helpers are spinning): the same bits each time."""
    rng = np.random.default_rng(4)
    a, b = _operand(rng, (64, 512), False), _operand(rng, (512, 300), True)
    spans = threads.split_spans(300, 2)
    alone = team_mod.Team(1, team_mod._find_cblas())
    alone.stop(timeout=30)  # the helper has returned: the caller must take every part
    assert not any(t.is_alive() for t in alone._threads)
    first = np.full((64, 300), np.nan, np.float32)
    assert alone.matmul(a, b, first, spans, True)
    assert alone.taken == 1
    team = team_mod.Team(1, team_mod._find_cblas())
    try:
        for _ in range(200):
            out = np.full((64, 300), np.nan, np.float32)
            assert team.matmul(a, b, out, spans, True)
            assert np.array_equal(out, first)
        if len(os.sched_getaffinity(0)) >= 2:
            assert team.taken < 200, "the helper never ran a part of 200 back to back"
    finally:
        team.stop()


def test_a_sleeping_helper_is_woken_and_products_stay_right(threads, team_mod):
    """Pauses longer than the spin put the helper to sleep; each next product wakes it (or the
    caller runs its part) and is right."""
    rng = np.random.default_rng(6)
    team = team_mod.Team(1, team_mod._find_cblas(), spin_us=50.0)
    try:
        a, b = _operand(rng, (40, 30), False), _operand(rng, (30, 50), False)
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        for pause in (0.0, 0.002, 0.0, 0.01, 0.0005, 0.0):
            time.sleep(pause)
            out = np.full((40, 50), np.nan, np.float32)
            assert team.matmul(a, b, out, threads.split_spans(50, 2), True)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
        deadline = time.monotonic() + 5
        while not team.ctrl[team_mod.ROW + team_mod.ASLEEP] and time.monotonic() < deadline:
            time.sleep(0.001)
        assert team.ctrl[team_mod.ROW + team_mod.ASLEEP] == 1, "an idle helper never slept"
    finally:
        team.stop()


def test_layouts_blas_cannot_take_fall_back_to_the_pool(threads, team_mod, monkeypatch):
    rng = np.random.default_rng(7)
    _split(threads, monkeypatch, 2, use_team=True)
    posted = []
    real = team_mod.Team._post
    monkeypatch.setattr(team_mod.Team, "_post",
                        lambda self, *args: posted.append(real(self, *args)) or posted[-1])
    f32 = rng.standard_normal((40, 60)).astype(np.float32)
    cases = [  # a, b, output columns strided, what the team's posts return (none: not asked)
        (f32[:, ::2], f32[:30, :20], False, [False]),  # a's columns strided
        (f32[:, :30], f32[:30, :20], True, [False]),  # the output's columns strided
        (f32[:1, :30], f32[:30, :20], False, [True, True]),  # one row: taken
        (f32[:6, :9].astype(np.float16), f32[:9, :30].astype(np.float16), False, []),
        (f32[:6, :9], f32[:9, :30].astype(np.float64), False, []),  # mixed dtypes
    ]
    for a, b, strided_out, posts in cases:
        posted.clear()
        dtype = np.result_type(a, b)
        m, n = a.shape[0], b.shape[1]
        out = (np.full((m, 2 * n), np.nan, dtype)[:, ::2] if strided_out
               else np.full((m, n), np.nan, dtype))
        threads.matmul(a, b, out)
        want = np.matmul(a.astype(np.float64), b.astype(np.float64))
        tol = 2e-2 if dtype == np.float16 else 1e-5
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
        assert posted == posts, (a.strides, out.strides, posted)


def test_output_rows_of_any_stride_and_overlap(threads, team_mod, monkeypatch):
    """A one-row output whose row stride numpy leaves arbitrary goes through the team; an
    output that overlaps an operand never does (BLAS would read what it wrote)."""
    rng = np.random.default_rng(12)
    _split(threads, monkeypatch, 2, use_team=True)
    a = rng.standard_normal((1, 30)).astype(np.float32)
    b = rng.standard_normal((30, 40)).astype(np.float32)
    out = np.lib.stride_tricks.as_strided(np.full(40, np.nan, np.float32), (1, 40), (0, 4))
    spans = threads.split_spans(40, 2)
    assert team_mod.team(1).matmul(a, b, out, spans, True)
    want = a.astype(np.float64) @ b
    assert np.abs(out - want).max() <= 1e-5 * np.abs(want).max()
    buf = rng.standard_normal((40, 40)).astype(np.float32)
    assert not team_mod.team(1).matmul(buf[:, :20], buf[:20, 20:], buf[:, 20:], spans, True)


def test_two_python_threads_share_the_team(threads, team_mod, monkeypatch):
    """Products from two Python threads at once: one holds the team, the other splits through
    the pool or runs alone; all right."""
    _split(threads, monkeypatch, 2, use_team=True)
    rng = np.random.default_rng(8)
    pairs = [(_operand(rng, (48, 64), False), _operand(rng, (64, 80), bool(i % 2)))
             for i in range(2)]
    wants = [np.matmul(a.astype(np.float64), b.astype(np.float64)) for a, b in pairs]
    errors = []

    def run(i):
        a, b = pairs[i]
        try:
            for _ in range(100):
                out = np.full((48, 80), np.nan, np.float32)
                threads.matmul(a, b, out)
                np.testing.assert_allclose(out, wants[i], rtol=1e-5, atol=1e-5)
        except BaseException as exc:  # reported below
            errors.append(exc)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_gets_its_own_team(threads, team_mod, monkeypatch):
    """The parent's helpers do not exist in a forked child: the child makes its own."""
    _split(threads, monkeypatch, 2, use_team=True)
    rng = np.random.default_rng(9)
    a, b = _operand(rng, (30, 20), False), _operand(rng, (20, 40), False)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    parent = team_mod.team(1)
    out = np.empty((30, 40), np.float32)
    threads.matmul(a, b, out)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        code = 1
        try:
            child = np.full((30, 40), np.nan, np.float32)
            threads.matmul(a, b, child)
            ok = (np.allclose(child, want, rtol=1e-5, atol=1e-5)
                  and team_mod._team is not parent and team_mod._team_pid == os.getpid())
            code = 0 if ok else 2
        finally:
            os.write(w, bytes([code]))
            os._exit(code)
    os.close(w)
    status = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert status == b"\x00", f"child status {status!r}"
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def _lp64_cblas():
    """(sgemm, dgemm, 0) of scipy-openblas32 (an LP64 OpenBLAS: 32-bit CBLAS integers, the
    kind conda's numpy links), or None where that wheel is not installed."""
    try:
        import scipy_openblas32
    except ImportError:
        return None
    lib_dir = scipy_openblas32.get_lib_dir()
    name = "lib" + scipy_openblas32.get_library()
    found = [f for f in os.listdir(lib_dir) if f.startswith(name + ".")]
    if not found:
        return None
    lib = ctypes.CDLL(os.path.join(lib_dir, found[0]))
    lib.scipy_openblas_set_num_threads(1)
    return (ctypes.cast(lib.scipy_cblas_sgemm, ctypes.c_void_p).value,
            ctypes.cast(lib.scipy_cblas_dgemm, ctypes.c_void_p).value, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lp64_cblas(threads, team_mod, dtype):
    """The 32-bit-integer CBLAS call, on a real LP64 OpenBLAS (the cpu session installs
    scipy-openblas32 for this test)."""
    cblas = _lp64_cblas()
    if cblas is None:
        pytest.skip("scipy-openblas32 (an LP64 OpenBLAS) is not installed")
    rng = np.random.default_rng(10)
    a, b = _operand(rng, (33, 70), True, dtype), _operand(rng, (70, 41), False, dtype)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    team = team_mod.Team(2, cblas)
    try:
        for spans, by_columns in ((threads.split_spans(41, 3), True),
                                  (threads.split_spans(33, 3), False)):
            out = np.full((33, 41), np.nan, dtype)
            assert team.matmul(a, b, out, spans, by_columns)
            tol = 1e-5 if dtype == np.float32 else 1e-12
            np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    finally:
        team.stop()


def test_no_team_without_openblas_cblas(threads, team_mod):
    """In a process whose numpy BLAS has no CBLAS symbols we can find, ``team`` is None and
    products split through the pool: checked by pointing the search at a library without
    them."""
    code = (
        "import numpy as np\n"
        "from singa_cpu.kernels import _team, _threads\n"
        "_threads._CBLAS = (('no_such_sgemm', 'no_such_dgemm', 1),)\n"
        "assert _team.team(1) is None\n"
        "_threads.num_threads = lambda: 2\n"
        "_threads.PARALLEL_MIN_MACS = 0\n"
        "a = np.arange(60, dtype=np.float32).reshape(6, 10); b = a.T.copy()\n"
        "out = np.empty((6, 6), np.float32); _threads.matmul(a, b, out)\n"
        "assert np.allclose(out, a.astype(np.float64) @ b)\n"
        "print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr[-2000:]


def _view(rng, rows, cols, kind):
    """A (rows, cols) float32 view of one of the layouts numpy makes."""
    if kind == "c":
        return rng.standard_normal((rows, cols)).astype(np.float32)
    if kind == "t":
        return rng.standard_normal((cols, rows)).astype(np.float32).T
    if kind == "slice":  # inside a wider buffer: a leading dimension larger than the row
        return rng.standard_normal((rows + 2, cols + 3)).astype(np.float32)[1:rows + 1, 2:cols + 2]
    if kind == "step":  # every other column: no BLAS layout
        return rng.standard_normal((rows, 2 * cols)).astype(np.float32)[:, ::2]
    if kind == "reversed":  # negative row stride
        return rng.standard_normal((rows, cols)).astype(np.float32)[::-1]
    return np.broadcast_to(rng.standard_normal(cols).astype(np.float32), (rows, cols))


KINDS = ["c", "t", "slice", "step", "reversed", "broadcast"]


@given(m=st.integers(1, 12), k=st.integers(1, 12), n=st.integers(1, 12),
       ka=st.sampled_from(KINDS), kb=st.sampled_from(KINDS), kc=st.sampled_from(KINDS[:4]),
       by_columns=st.booleans(), seed=st.integers(0, 2**16))
@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fixtures: modules
def test_any_layout_is_computed_right_or_refused(threads, team_mod, m, k, n, ka, kb, kc,
                                                 by_columns, seed):
    """Whatever numpy's strides (length-1 axes, slices of wider buffers, steps, negative or
    zero strides), the team either refuses the product or computes it right."""
    rng = np.random.default_rng(seed)
    a, b = _view(rng, m, k, ka), _view(rng, k, n, kb)
    out = _view(rng, m, n, kc)
    out[...] = np.nan
    spans = threads.split_spans(n if by_columns else m, 2)
    if team_mod.team(1).matmul(a, b, out, spans, by_columns):
        want = a.astype(np.float64) @ b.astype(np.float64)
        assert np.abs(out - want).max() <= 1e-5 * max(1.0, np.abs(want).max())
    else:  # only a layout BLAS cannot read (or a column-major output) is refused
        no_blas = ("step", "reversed", "broadcast")
        assert ka in no_blas or kb in no_blas or kc in ("t", "step"), (ka, kb, kc, m, k, n)
