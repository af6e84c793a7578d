"""Whole-sequence LSTM and GRU (``LSTMSeq``, ``GRUSeq`` and their backward ops).

A step is one product of the previous state by the recurrent weights and one numba pass over
the gates that applies the activations and the state update, with no temporaries per step.
float32 forward calls whose batch is at most ``MAX_LOOP_BATCH``'s bound for their hidden size
(8 under hidden 192, 32 from 192, 64 from 512) run all steps in one compiled function, the
product as dot products of contiguous rows of the weights (``_rows_dot32``); larger batches
and float64 run a Python loop over the steps, numpy's GEMM into a preallocated buffer and the
cell, two calls a step instead of the dozen ops of an unrolled cell. The backward ops take
the per-step path at every batch. float16 runs in float32 (``via_float32``).

Each cell is written once for both dtypes, naming its activations as globals (``_sigmoid``,
``_tanh``, ``_lstm_gate``): float64's (libm's exp and tanh) as defined, float32's
(``_sigmoid32``, a polynomial exp that LLVM vectorises) in its twin from ``Helper.bind``.
"""

from __future__ import annotations

import math

import numpy as np
from singa.backend import kernel_attrs

from ._expf import exp_neg_parts32
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
    scale = np.int32((np.int32(127) - np.int32(kf)) << np.int32(23)).view(np.float32)
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


@njit(error_model="numpy")
def _lstm_seq32(xw, r, h0, c0, y, c, gates, hr, reverse):
    """float32 LSTMSeq of a small batch as one compiled loop: per step ``_rows_dot32`` and
    the cell, no Python call between steps."""
    nt = xw.shape[0]
    hp, cp = h0, c0
    for s in range(nt):
        t = nt - 1 - s if reverse else s
        _rows_dot32(r, hp, hr)
        _lstm_cell32(xw[t], hr, cp, gates[t], c[t], y[t])
        hp, cp = y[t], c[t]


@njit(error_model="numpy")
def _gru_seq32(xw, rw, rb, h0, y, gates, q, hr, m, reverse, lbr):
    """float32 GRUSeq of a small batch as one compiled loop (``gru_seq``'s steps)."""
    nt = xw.shape[0]
    h = y.shape[2]
    rw_first = rw if lbr else rw[:2 * h]
    rw_h = rw[2 * h:]
    hp = h0
    for s in range(nt):
        t = nt - 1 - s if reverse else s
        _rows_dot32(rw_first, hp, hr)
        _gru_zr32(xw[t], hr, rb, hp, gates[t], q[t], lbr)
        if not lbr:
            _rows_dot32(rw_h, q[t], m)
        _gru_update32(xw[t], m, rb, hp, gates[t], q[t], y[t], lbr)
        hp = y[t]


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
    """The cells as kernels of their own (compiled on first call, cached on disk), which the
    per-step loops call from Python."""
    return {name: njit(**cell.options)(cell.py_func) for name, cell in cells.items()}


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


@kernel_attrs(contiguous_inputs=True)
@via_float32
def lstm_seq(ins, outs, attrs):
    xw, r, h0, c0 = ins
    y, c, gates = outs
    reverse = bool(attrs.get("reverse", False))
    if _runs_as_loop(xw.dtype, xw.shape[1], h0.shape[1]):
        _lstm_seq32(xw, r, h0, c0, y, c, gates, np.empty(xw.shape[1:], xw.dtype), reverse)
        return
    # one transposing copy a call: OpenBLAS's small-M GEMM by a transposed operand took ~1.35x
    # the time of the contiguous one (8 x 256 by 256 x 1024), paid at every step
    rt = np.ascontiguousarray(r.T)
    hr = np.empty(xw.shape[1:], xw.dtype)
    hp, cp = h0, c0
    cell = _STEP_CELLS[xw.dtype]["lstm"].serial()
    with single_threaded_blas():
        for t in _steps(xw.shape[0], reverse):
            _step_gemm(hp, rt, hr)
            cell(xw[t], hr, cp, gates[t], c[t], y[t])
            hp, cp = y[t], c[t]


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
    if _runs_as_loop(y.dtype, y.shape[1], h):
        hr = np.empty((y.shape[1], (3 if lbr else 2) * h), y.dtype)
        _gru_seq32(xw, rw, rb, h0, y, gates, q, hr, m, reverse, lbr)
        return
    # linear_before_reset: one GEMM by all of rt; otherwise r h is known only after z and r,
    # so z and r take h rt_zr and the candidate (r h) rt_h
    # contiguous transposes, once a call (see lstm_seq)
    rt_first = np.ascontiguousarray((rw if lbr else rw[:2 * h]).T)
    rt_h = np.ascontiguousarray(rw[2 * h:].T)
    hr = np.empty((y.shape[1], rt_first.shape[1]), y.dtype)
    hp = h0
    cells = _STEP_CELLS[y.dtype]
    zr, update = cells["gru_zr"].serial(), cells["gru_update"].serial()
    with single_threaded_blas():
        for t in _steps(xw.shape[0], reverse):
            _step_gemm(hp, rt_first, hr)
            zr(xw[t], hr, rb, hp, gates[t], q[t], lbr)
            if not lbr:
                _step_gemm(q[t], rt_h, m)
            update(xw[t], m, rb, hp, gates[t], q[t], y[t], lbr)
            hp = y[t]


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
    dh_next = np.zeros_like(h0)
    dc_next = np.zeros_like(c0)
    with single_threaded_blas():
        for t in _steps(y.shape[0], not reverse):
            cp = _prev(c, c0, t, reverse)
            cell(dy[t], dc[t], gates[t], c[t], cp, dh_next, dc_next, dxw[t])
            np.matmul(dxw[t], r, out=dh_next)
    # dr = sum over steps of da^T h_prev: one GEMM over all T*B rows instead of one per step
    hp = _states_before(y, h0, reverse)
    rows = y.shape[0] * y.shape[1]
    np.matmul(dxw.reshape(rows, -1).T, hp.reshape(rows, -1), out=dr)
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
    dh_next = np.zeros_like(h0)
    with single_threaded_blas():
        for t in _steps(y.shape[0], not reverse):
            g = gates[t]
            z, r, n = g[:, :h], g[:, h:2 * h], g[:, 2 * h:]
            hp = _prev(y, h0, t, reverse)
            dh = dy[t] + dh_next
            da = dxw[t]
            dan = da[:, 2 * h:]
            np.multiply(dh * (1 - z), 1 - n * n, out=dan)
            np.multiply(dh * (hp - n), z * (1 - z), out=da[:, :h])
            dhp = dh * z
            if lbr:
                np.multiply(dan * q[t], r * (1 - r), out=da[:, h:2 * h])
                dq = da_hr[t]
                dq[:, :2 * h] = da[:, :2 * h]
                np.multiply(dan, r, out=dq[:, 2 * h:])
                dhp += dq @ rw
            else:
                drh = dan @ rh
                np.multiply(drh * hp, r * (1 - r), out=da[:, h:2 * h])
                dhp += drh * r
                dhp += da[:, :2 * h] @ rzr
            dh_next = dhp
    rows = y.shape[0] * y.shape[1]
    hp_all = _states_before(y, h0, reverse).reshape(rows, h)
    a = (da_hr if lbr else dxw).reshape(rows, 3 * h)
    if lbr:
        np.matmul(a.T, hp_all, out=drw)
    else:  # the candidate's product is by q = r h, the others' by h
        np.matmul(a[:, :2 * h].T, hp_all, out=drw[:2 * h])
        np.matmul(a[:, 2 * h:].T, q.reshape(rows, h), out=drw[2 * h:])
    np.sum(a, axis=0, out=drb)
    dh0[...] = dh_next


KERNELS = {
    "LSTMSeq": lstm_seq,
    "LSTMSeqBackward": lstm_seq_backward,
    "GRUSeq": gru_seq,
    "GRUSeqBackward": gru_seq_backward,
}
