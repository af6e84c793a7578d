"""Whole-sequence LSTM and GRU (``LSTMSeq``, ``GRUSeq`` and their backward ops).

A step is one product of the previous state by the recurrent weights and one numba pass over
the gates that applies the activations and the state update, with no temporaries per step.
float32 forward calls whose batch is at most ``MAX_LOOP_BATCH``'s bound for their hidden size
(8 under hidden 192, 32 from 192, 64 from 512) run all steps in one compiled function, the
product as dot products of contiguous rows of the weights (``_rows_dot32``); larger batches
and float64 run a Python loop over the steps, numpy's GEMM into a preallocated buffer and the
cell, two calls a step instead of the dozen ops of an unrolled cell. The backward ops take
the per-step path at every batch. float16 runs in float32 (``via_float32``).

Threads: a batch row depends only on its own row at every step, so the batch is cut into one
span of rows per thread (``_batch_spans``, once the recurrent products reach
``PARALLEL_MIN_MACS`` a call on the compiled loops, ``STEP_MIN_MACS`` a step on the per-step
paths) and each thread runs the whole sequence for its rows, with no barrier
between steps: the compiled loops take the span's bounds (and release the GIL), the per-step
paths and the backward's loop run their GEMMs and cells on the span's rows, with numpy's BLAS
single-threaded. Spans start at even rows, so ``_rows_dot32`` pairs the rows it pairs unsplit
and the loop's outputs are bit for bit one thread's; the per-step GEMMs run on fewer rows,
which OpenBLAS 0.3.31 sums in the same order here (bit for bit too, measured, not promised).
The backward's weight gradients, sums over all T*B rows, run through ``_threads.matmul``
(split by rows of the gradient, each a whole sum), so their bits depend on the shapes and the
thread count only.

Each cell is written once for both dtypes, naming its activations as globals (``_sigmoid``,
``_tanh``, ``_lstm_gate``): float64's (libm's exp and tanh) as defined, float32's
(``_sigmoid32``, a polynomial exp that LLVM vectorises) in its twin from ``Helper.bind``.
"""

from __future__ import annotations

import math

import numpy as np
from singa.backend import kernel_attrs

from . import _threads, _transpose
from ._expf import exp_neg_parts32, neg_pow2_bits
from ._float16 import via_float32
from ._jit import helper, njit
from ._threads import single_threaded_blas

_f32 = np.float32


@helper(inline="always", error_model="numpy")
def _sigmoid32(u):
    """1 / (1 + exp(-u)) for float32 from multiplies, adds, selects and one division, so that
    LLVM vectorises the loops it is inlined into, with exp(-|u|) from
    :func:`._expf.exp_neg_parts32`; relative error under 2e-7, as the CPU Sigmoid kernel
    computes it. Unlike that kernel, u <= -87 gives 2^-126 exp(r) (~1e-38), not 0 below -104."""
    one, zero = _f32(1.0), _f32(0.0)
    kf, p = exp_neg_parts32(abs(u))
    scale = np.int32(neg_pow2_bits(kf)).view(np.float32)
    e = scale * p
    return (one if u >= zero else e) / (one + e)


@helper(inline="always", error_model="numpy")
def _tanh32(u):
    """tanh(u) = 2 sigmoid(2u) - 1 in float32 from :func:`_sigmoid32` (absolute error ~1e-7):
    no libm call, so the cells' loops vectorise."""
    one, two = _f32(1.0), _f32(2.0)
    return two * _sigmoid32(two * u) - one


@helper(inline="always", error_model="numpy")
def _lstm_gate32(a, c_gate):
    """LSTM's gate activation: sigmoid(a), or tanh(a) = 2 sigmoid(2a) - 1 for the c gate, one
    expression for both (the factor 1 or 2 a select, no branch), so that the four gates are
    one loop that LLVM vectorises."""
    one, two = _f32(1.0), _f32(2.0)
    m = two if c_gate else one
    return m * _sigmoid32(m * a) - (m - one)


@helper(inline="always", error_model="numpy")
def _sigmoid64(u):
    """1 / (1 + exp(-u)) with libm's exp."""
    return 1.0 / (1.0 + math.exp(-u))


@helper(inline="always", error_model="numpy")
def _tanh64(u):
    """libm's tanh."""
    return math.tanh(u)


@helper(inline="always", error_model="numpy")
def _lstm_gate64(a, c_gate):
    """LSTM's gate activation: tanh(a) for the c gate, else sigmoid(a)."""
    return _tanh64(a) if c_gate else _sigmoid64(a)


# the activations the cells name: float64's here, float32's in the cells' twins (_lstm_cell32...)
_sigmoid, _tanh, _lstm_gate = _sigmoid64, _tanh64, _lstm_gate64
_FLOAT32 = {"_sigmoid": _sigmoid32, "_tanh": _tanh32, "_lstm_gate": _lstm_gate32}


@helper(error_model="numpy")
def _lstm_cell(xw, hr, c_prev, gates, c, y):
    """One LSTM step given the recurrent product ``hr``: with a = xw + hr in ONNX's gate order,
    i, o, f = sigmoid(a_i, a_o, a_f), g = tanh(a_c); c = f c_prev + i g, y = o tanh(c)."""
    b, h = c.shape
    for n in range(b):
        for j in range(4 * h):
            gates[n, j] = _lstm_gate(xw[n, j] + hr[n, j], j >= 3 * h)
        for j in range(h):
            i, o = gates[n, j], gates[n, h + j]
            f, g = gates[n, 2 * h + j], gates[n, 3 * h + j]
            cn = f * c_prev[n, j] + i * g
            c[n, j] = cn
            y[n, j] = o * _tanh(cn)


@helper(error_model="numpy")
def _lstm_cell_bwd(dy, dc, gates, c, c_prev, dh_next, dc_next, da):
    """One step of backpropagation through time: ``da``, the gradient of the gates'
    pre-activations (ONNX order i, o, f, c), from this step's output gradients ``dy``, ``dc``
    and those flowing back from the step after it (``dh_next``, ``dc_next``); ``dc_next``
    becomes the gradient of ``c_prev``. ``_tanh`` recomputes the forward cell's tanh(c)."""
    b, h = c.shape
    one = c.dtype.type(1)
    # tanh(c) in a loop of its own: with it inline LLVM left the main loop scalar (float32,
    # 35 x (32, 256) steps: 4.6 ms against 1.0 ms split, AMD Zen 4)
    tcs = np.empty(h, c.dtype)
    for n in range(b):
        for j in range(h):
            tcs[j] = _tanh(c[n, j])
        for j in range(h):
            i, o = gates[n, j], gates[n, h + j]
            f, g = gates[n, 2 * h + j], gates[n, 3 * h + j]
            tc = tcs[j]
            dh = dy[n, j] + dh_next[n, j]
            dct = dc[n, j] + dc_next[n, j] + dh * o * (one - tc * tc)
            da[n, j] = dct * g * i * (one - i)
            da[n, h + j] = dh * tc * o * (one - o)
            da[n, 2 * h + j] = dct * c_prev[n, j] * f * (one - f)
            da[n, 3 * h + j] = dct * i * (one - g * g)
            dc_next[n, j] = dct * f


@helper(error_model="numpy")
def _gru_zr(xw, hr, rb, h_prev, gates, q, lbr):
    """z and r; q = h rt_h + rb_h (linear_before_reset, hr holds h rt) or r h."""
    b, h = q.shape
    for n in range(b):
        for j in range(h):
            z = _sigmoid(xw[n, j] + hr[n, j] + rb[j])
            r = _sigmoid(xw[n, h + j] + hr[n, h + j] + rb[h + j])
            gates[n, j] = z
            gates[n, h + j] = r
            q[n, j] = hr[n, 2 * h + j] + rb[2 * h + j] if lbr else r * h_prev[n, j]


@helper(error_model="numpy")
def _gru_update(xw, m, rb, h_prev, gates, q, y, lbr):
    """n = tanh(xw_h + r q) (linear_before_reset) or tanh(xw_h + m + rb_h), m = q rt_h;
    y = (1 - z) n + z h."""
    b, h = y.shape
    one = y.dtype.type(1)
    for k in range(b):
        for j in range(h):
            z = gates[k, j]
            if lbr:
                a = xw[k, 2 * h + j] + gates[k, h + j] * q[k, j]
            else:
                a = xw[k, 2 * h + j] + m[k, j] + rb[2 * h + j]
            nn = _tanh(a)
            gates[k, 2 * h + j] = nn
            y[k, j] = (one - z) * nn + z * h_prev[k, j]


_lstm_cell32 = _lstm_cell.bind("32", **_FLOAT32)
_lstm_cell_bwd32 = _lstm_cell_bwd.bind("32", **_FLOAT32)
_gru_zr32 = _gru_zr.bind("32", **_FLOAT32)
_gru_update32 = _gru_update.bind("32", **_FLOAT32)


@helper(fastmath={"reassoc", "contract"}, error_model="numpy")
def _rows_dot32(w, h, out):
    """out = h w^T, out[n, j] = sum_k h[n, k] w[j, k], for the few rows of a small batch.

    ``w`` is the recurrent weight in ONNX's (gates * hidden, hidden) layout, so each output
    is a dot product of two contiguous rows: no transposed copy of ``w`` per call, and
    ``reassoc`` lets LLVM vectorise the sums over k (NaN and inf still propagate). Four rows of
    ``w`` by two rows of ``h`` a block (6 loads for 8 multiply-adds), the odd row of ``h``
    and the last ``g % 4`` rows of ``w`` by themselves."""
    g, kn = w.shape
    b = h.shape[0]
    g4 = g - g % 4
    zero = _f32(0.0)
    for j in range(0, g4, 4):
        n = 0
        while n + 1 < b:
            s0 = s1 = s2 = s3 = u0 = u1 = u2 = u3 = zero
            for k in range(kn):
                a, c = h[n, k], h[n + 1, k]
                w0, w1, w2, w3 = w[j, k], w[j + 1, k], w[j + 2, k], w[j + 3, k]
                s0 += w0 * a
                s1 += w1 * a
                s2 += w2 * a
                s3 += w3 * a
                u0 += w0 * c
                u1 += w1 * c
                u2 += w2 * c
                u3 += w3 * c
            out[n, j], out[n, j + 1], out[n, j + 2], out[n, j + 3] = s0, s1, s2, s3
            out[n + 1, j], out[n + 1, j + 1], out[n + 1, j + 2], out[n + 1, j + 3] = \
                u0, u1, u2, u3
            n += 2
        if n < b:
            s0 = s1 = s2 = s3 = zero
            for k in range(kn):
                a = h[n, k]
                s0 += w[j, k] * a
                s1 += w[j + 1, k] * a
                s2 += w[j + 2, k] * a
                s3 += w[j + 3, k] * a
            out[n, j], out[n, j + 1], out[n, j + 2], out[n, j + 3] = s0, s1, s2, s3
    for j in range(g4, g):
        for n in range(b):
            s0 = zero
            for k in range(kn):
                s0 += w[j, k] * h[n, k]
            out[n, j] = s0


@njit(error_model="numpy", nogil=True)
def _lstm_seq32(xw, r, h0, c0, y, c, gates, hr, reverse, b0, b1):
    """float32 LSTMSeq of a small batch as one compiled loop: per step ``_rows_dot32`` and
    the cell, no Python call between steps; batch rows ``b0:b1`` only (leading-axis slices of
    the C-contiguous arrays, which numba keeps C-contiguous), so that threads can run spans of
    the batch at once (it releases the GIL)."""
    nt = xw.shape[0]
    hp, cp = h0[b0:b1], c0[b0:b1]
    hrs = hr[b0:b1]
    for s in range(nt):
        t = nt - 1 - s if reverse else s
        _rows_dot32(r, hp, hrs)
        yt, ct = y[t][b0:b1], c[t][b0:b1]
        _lstm_cell32(xw[t][b0:b1], hrs, cp, gates[t][b0:b1], ct, yt)
        hp, cp = yt, ct


@njit(error_model="numpy", nogil=True)
def _gru_seq32(xw, rw, rb, h0, y, gates, q, hr, m, reverse, lbr, b0, b1):
    """float32 GRUSeq of a small batch as one compiled loop (``gru_seq``'s steps), batch rows
    ``b0:b1`` (see :func:`_lstm_seq32`)."""
    nt = xw.shape[0]
    h = y.shape[2]
    rw_first = rw if lbr else rw[:2 * h]
    rw_h = rw[2 * h:]
    hp = h0[b0:b1]
    hrs, ms = hr[b0:b1], m[b0:b1]
    for s in range(nt):
        t = nt - 1 - s if reverse else s
        xt, gt, qt, yt = xw[t][b0:b1], gates[t][b0:b1], q[t][b0:b1], y[t][b0:b1]
        _rows_dot32(rw_first, hp, hrs)
        _gru_zr32(xt, hrs, rb, hp, gt, qt, lbr)
        if not lbr:
            _rows_dot32(rw_h, qt, ms)
        _gru_update32(xt, ms, rb, hp, gt, qt, yt, lbr)
        hp = yt


MAX_LOOP_BATCH = ((512, 64), (192, 32), (0, 8))
"""(hidden, batch) rows, widest first: a float32 LSTMSeq/GRUSeq whose hidden size is at least a
row's first number runs as one compiled loop over the steps (``_rows_dot32``) up to the row's
batch; larger batches take numpy's GEMM per step.

Loop / GEMM time of the forward kernels, LSTM, GRU and GRU with linear_before_reset, hidden
64-1024, batch 1-512, 64 steps (``python benchmarks/recurrent_loop.py``, five runs; AMD EPYC
Zen 4, 1 thread, numpy 2.4.6 with OpenBLAS 0.3.31; 2026-11-26, commits 22b8482 and 4c2c0e3;
tables in docs/benchmarks.md). Under hidden 192: 0.18-0.99 up to batch 4, 0.74-1.11 (median
0.97) at 8, 0.79-1.34 (median 1.03) at 12-32, 1.03-1.45 from 48, where the loop's short dot
products lag (LSTM at batch 128, hidden 64-128: 41-60 GFLOP/s, the GEMM 53-71). Hidden
192-511: 0.21-1.02 up to batch 32 (median 0.93 at 32), 0.80-1.14 (median 1.02) at 48-128.
Hidden 512 and more: 0.13-1.03 up to batch 64 (median 0.92 at 64), 0.84-1.17 (median 0.95) at
96-128; from batch 64 on the loop's time varies more from run to run than the GEMM's (LSTM
hidden 1024, batch 64: 398-509 ms, the GEMM 494-512 ms). The loop gains most where the
product leaves OpenBLAS's small-matrix kernels (M*N*K over 1e6) and a few rows do not amortise
its packed GEMM's copies of the weights (LSTM hidden 512, batch 2: 38 ms, the loop 4.9 ms)."""


def _runs_as_loop(dtype: np.dtype, batch: int, hidden: int) -> bool:
    """Whether a forward call of these sizes runs as the compiled loop (``MAX_LOOP_BATCH``)."""
    return dtype == np.float32 and batch <= next(b for h, b in MAX_LOOP_BATCH if hidden >= h)


def _kernels(**cells):
    """The cells as kernels of their own (compiled on first call, cached on disk, releasing
    the GIL so that threads run them at once), which the per-step loops call from Python."""
    return {name: njit(**cell.options, nogil=True)(cell.py_func)
            for name, cell in cells.items()}


_STEP_CELLS = {
    np.dtype(np.float32): _kernels(lstm=_lstm_cell32, lstm_bwd=_lstm_cell_bwd32,
                                   gru_zr=_gru_zr32, gru_update=_gru_update32),
    np.dtype(np.float64): _kernels(lstm=_lstm_cell, lstm_bwd=_lstm_cell_bwd,
                                   gru_zr=_gru_zr, gru_update=_gru_update),
}


def _step_gemm(h, w, out):
    """out = h w for one step. One row goes through np.dot on vectors (BLAS's gemv): numpy's
    matmul runs a (1, 256) x (256, 768) product as a gemm, ~1.7x the time (OpenBLAS, 1 thread,
    AMD Zen 4)."""
    if h.shape[0] == 1:
        np.dot(h[0], w, out=out[0])
    else:
        np.matmul(h, w, out=out)


def _steps(t, reverse):
    return range(t - 1, -1, -1) if reverse else range(t)


PARALLEL_MIN_MACS = 4 << 20
"""The compiled loops (``_lstm_seq32``, ``_gru_seq32``: no Python between steps, the GIL
released) split their batch across threads from this many multiply-adds of recurrent products
in the call (T * B * gates * H * H). Measured (``python benchmarks/recurrent_threads.py
--threads 1`` against ``--threads 2 --min-macs 0``, AMD EPYC Zen 4, both cores free,
2026-11-27, ms forward): LSTM (35, 4, 64), 2.3 M, 0.12 / 0.12; (35, 8, 64), 4.6 M, 0.23 /
0.19; (35, 4, 128), 9.2 M, 0.31 / 0.24; (35, 8, 128) 0.62 / 0.38; (35, 32, 256) 7.6 / 3.9.
The loop reads all of the recurrent weights at every step on each thread, so halving the rows
does not halve the time of small batches (the wake-up of a parallel section, ~20-70 us, and
the weights' reads stay)."""

STEP_MIN_MACS = 1 << 20
"""The per-step paths (the forward's per-step GEMM path and the backward ops, a Python loop over
the steps on each thread) split their batch from this many multiply-adds of recurrent products
per step (B * gates * H * H): the two threads' loops take turns on the GIL at every numpy
call, so a step must carry enough BLAS work between calls. Measured as above (ms, one thread
/ two): LSTM (35, 12, 128), 0.8 M a step: forward 0.80 / 1.08-1.36, backward 1.37 /
1.09-1.51; (35, 16, 128), 1.0 M: forward 1.33 / 0.72, backward 2.13 / 1.20; (10, 64, 64),
1.0 M: 0.40 / 0.28, 0.64 / 0.50; (35, 32, 256), 4.2 M: backward 15.0 / 8.3; GRU (35, 24, 128),
1.2 M: forward 1.87 / 1.32-1.40. GRU's backward makes ~15 numpy calls a step, so it splits
from ``GRU_BACKWARD_STEP_FACTOR`` times this."""

GRU_BACKWARD_STEP_FACTOR = 4
"""GRU's backward splits from this many times ``STEP_MIN_MACS`` a step. Measured as above
(ms, one thread / two): (35, 24, 128), 1.2 M a step, 2.8 / 4.2-4.5; (35, 16, 256), 3.1 M,
7.4 / 6.3-6.5; (35, 64, 128), 3.1 M, 7.6-8.4 / 7.7-7.8; (35, 24, 256), 4.7 M, 10.4 / 8.0-8.2;
(35, 32, 256), 6.3 M, 13.1 / 9.7."""


def _batch_spans(batch: int, macs: int, min_macs: int) -> list[tuple[int, int]]:
    """(lo, hi) spans of the batch, one per thread (``_threads.num_threads``), or the whole
    batch when the work (``macs``) is under ``min_macs`` (``PARALLEL_MIN_MACS`` of a compiled
    loop's call, ``STEP_MIN_MACS`` of a per-step path's step). A batch row depends only on
    its own row at every step, so each thread runs every step for its rows, with no barrier
    between steps. Spans start at even rows and all but the last have an even count:
    ``_rows_dot32`` takes rows in pairs, and the pairs (so the bits) are then those of the
    unsplit call."""
    t = _threads.num_threads() if macs >= min_macs else 1
    if t <= 1 or batch < 4:
        return [(0, batch)]
    spans = [(2 * lo, 2 * (lo + n)) for lo, n in _threads.split_spans(batch // 2, t)]
    spans[-1] = (spans[-1][0], batch)  # the odd row, if any
    return spans


def _run_spans(fn, spans) -> None:
    """``fn(lo, hi)`` for every span, one thread each (on the caller when there is one)."""
    if len(spans) == 1:
        fn(*spans[0])
    else:
        _threads.run_chunks(lambda span: fn(*span), spans, len(spans))


@kernel_attrs(contiguous_inputs=True)
@via_float32
def lstm_seq(ins, outs, attrs):
    xw, r, h0, c0 = ins
    y, c, gates = outs
    reverse = bool(attrs.get("reverse", False))
    nt, b, h = y.shape
    hr = np.empty(xw.shape[1:], xw.dtype)
    if _runs_as_loop(xw.dtype, b, h):
        _run_spans(lambda lo, hi: _lstm_seq32(xw, r, h0, c0, y, c, gates, hr, reverse, lo, hi),
                   _batch_spans(b, nt * b * r.size, PARALLEL_MIN_MACS))
        return
    spans = _batch_spans(b, b * r.size, STEP_MIN_MACS)
    # one transposing copy a call: OpenBLAS's small-M GEMM by a transposed operand took ~1.35x
    # the time of the contiguous one (8 x 256 by 256 x 1024), paid at every step
    rt = _transpose.contiguous(r.T)
    cell = _STEP_CELLS[xw.dtype]["lstm"].serial()

    def rows(lo, hi):
        hp, cp, hrs = h0[lo:hi], c0[lo:hi], hr[lo:hi]
        for t in _steps(nt, reverse):
            yt, ct = y[t, lo:hi], c[t, lo:hi]
            _step_gemm(hp, rt, hrs)
            cell(xw[t, lo:hi], hrs, cp, gates[t, lo:hi], ct, yt)
            hp, cp = yt, ct

    with single_threaded_blas():
        _run_spans(rows, spans)


@kernel_attrs(contiguous_inputs=True)
@via_float32
def gru_seq(ins, outs, attrs):
    xw, rw, rb, h0 = ins
    y, gates, q = outs
    reverse = bool(attrs.get("reverse", False))
    lbr = bool(attrs.get("linear_before_reset", False))
    h = y.shape[2]
    # m is read only without linear_before_reset, but zeros: the update cell's select may
    # load it either way, and garbage bits that are subnormals slow the arithmetic
    m = np.zeros(y.shape[1:], y.dtype)
    nt, b = y.shape[:2]
    if _runs_as_loop(y.dtype, b, h):
        hr = np.empty((b, (3 if lbr else 2) * h), y.dtype)
        _run_spans(lambda lo, hi: _gru_seq32(xw, rw, rb, h0, y, gates, q, hr, m, reverse, lbr,
                                             lo, hi),
                   _batch_spans(b, nt * b * rw.size, PARALLEL_MIN_MACS))
        return
    spans = _batch_spans(b, b * rw.size, STEP_MIN_MACS)
    # linear_before_reset: one GEMM by all of rt; otherwise r h is known only after z and r,
    # so z and r take h rt_zr and the candidate (r h) rt_h
    # contiguous transposes, once a call (see lstm_seq)
    rt_first = _transpose.contiguous((rw if lbr else rw[:2 * h]).T)
    rt_h = _transpose.contiguous(rw[2 * h:].T)
    hr = np.empty((b, rt_first.shape[1]), y.dtype)
    cells = _STEP_CELLS[y.dtype]
    zr, update = cells["gru_zr"].serial(), cells["gru_update"].serial()

    def rows(lo, hi):
        hp, hrs, ms = h0[lo:hi], hr[lo:hi], m[lo:hi]
        for t in _steps(nt, reverse):
            xt, gt, qt, yt = xw[t, lo:hi], gates[t, lo:hi], q[t, lo:hi], y[t, lo:hi]
            _step_gemm(hp, rt_first, hrs)
            zr(xt, hrs, rb, hp, gt, qt, lbr)
            if not lbr:
                _step_gemm(qt, rt_h, ms)
            update(xt, ms, rb, hp, gt, qt, yt, lbr)
            hp = yt

    with single_threaded_blas():
        _run_spans(rows, spans)


def _prev(y, h0, t, reverse):
    first = y.shape[0] - 1 if reverse else 0
    return h0 if t == first else y[t + 1 if reverse else t - 1]


def _states_before(y, h0, reverse):
    """(T, B, H): the state each step started from (h0 at the first step of the direction)."""
    hp = np.empty_like(y)
    if reverse:
        hp[:-1], hp[-1] = y[1:], h0
    else:
        hp[1:], hp[0] = y[:-1], h0
    return hp


@kernel_attrs(contiguous_inputs=True)
@via_float32
def lstm_seq_backward(ins, outs, attrs):
    dy, dc, gates, c, y, h0, c0, r = ins
    dxw, dr, dh0, dc0 = outs
    reverse = bool(attrs.get("reverse", False))
    cell = _STEP_CELLS[y.dtype]["lstm_bwd"].serial()
    nt, b, h = y.shape
    dh_next = np.zeros_like(h0)
    dc_next = np.zeros_like(c0)

    def span(lo, hi):
        dhn, dcn = dh_next[lo:hi], dc_next[lo:hi]
        for t in _steps(nt, not reverse):
            cp = _prev(c, c0, t, reverse)
            cell(dy[t, lo:hi], dc[t, lo:hi], gates[t, lo:hi], c[t, lo:hi], cp[lo:hi], dhn, dcn,
                 dxw[t, lo:hi])
            np.matmul(dxw[t, lo:hi], r, out=dhn)

    with single_threaded_blas():
        _run_spans(span, _batch_spans(b, b * r.size, STEP_MIN_MACS))
    # dr = sum over steps of da^T h_prev: one GEMM over all T*B rows instead of one per step,
    # split across threads by rows of dr (each thread sums over all T*B rows)
    hp = _states_before(y, h0, reverse)
    rows = nt * b
    _threads.matmul(dxw.reshape(rows, -1).T, hp.reshape(rows, -1), out=dr)
    dh0[...] = dh_next
    dc0[...] = dc_next


@kernel_attrs(contiguous_inputs=True)
@via_float32
def gru_seq_backward(ins, outs, attrs):
    dy, gates, q, y, h0, rw = ins
    dxw, drw, drb, dh0 = outs
    reverse = bool(attrs.get("reverse", False))
    lbr = bool(attrs.get("linear_before_reset", False))
    h = y.shape[2]
    rh = rw[2 * h:]
    rzr = rw[:2 * h]
    # linear_before_reset: the gradient of the step's h rw^T + rb (z and r's columns of dxw, then
    # dq) gives dh_prev by one GEMM per step, and drw, drb over all steps at the end
    da_hr = np.empty_like(dxw) if lbr else None
    nt, b = y.shape[:2]

    def span(lo, hi):
        dh_next = np.zeros_like(h0[lo:hi])
        for t in _steps(nt, not reverse):
            g = gates[t, lo:hi]
            z, r, n = g[:, :h], g[:, h:2 * h], g[:, 2 * h:]
            hp = _prev(y, h0, t, reverse)[lo:hi]
            dh = dy[t, lo:hi] + dh_next
            da = dxw[t, lo:hi]
            dan = da[:, 2 * h:]
            np.multiply(dh * (1 - z), 1 - n * n, out=dan)
            np.multiply(dh * (hp - n), z * (1 - z), out=da[:, :h])
            dhp = dh * z
            if lbr:
                np.multiply(dan * q[t, lo:hi], r * (1 - r), out=da[:, h:2 * h])
                dq = da_hr[t, lo:hi]
                dq[:, :2 * h] = da[:, :2 * h]
                np.multiply(dan, r, out=dq[:, 2 * h:])
                dhp += dq @ rw
            else:
                drh = dan @ rh
                np.multiply(drh * hp, r * (1 - r), out=da[:, h:2 * h])
                dhp += drh * r
                dhp += da[:, :2 * h] @ rzr
            dh_next = dhp
        dh0[lo:hi] = dh_next

    with single_threaded_blas():
        _run_spans(span, _batch_spans(b, b * rw.size,
                                      GRU_BACKWARD_STEP_FACTOR * STEP_MIN_MACS))
    # the weight gradients over all T*B rows, split across threads by rows of drw
    rows = nt * b
    hp_all = _states_before(y, h0, reverse).reshape(rows, h)
    a = (da_hr if lbr else dxw).reshape(rows, 3 * h)
    if lbr:
        _threads.matmul(a.T, hp_all, out=drw)
    else:  # the candidate's product is by q = r h, the others' by h
        _threads.matmul(a[:, :2 * h].T, hp_all, out=drw[:2 * h])
        _threads.matmul(a[:, 2 * h:].T, q.reshape(rows, h), out=drw[2 * h:])
    np.sum(a, axis=0, out=drb)


KERNELS = {
    "LSTMSeq": lstm_seq,
    "LSTMSeqBackward": lstm_seq_backward,
    "GRUSeq": gru_seq,
    "GRUSeqBackward": gru_seq_backward,
}
