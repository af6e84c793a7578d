"""Whole-sequence recurrent cells: LSTM and GRU over every time step in one op.

The input projection ``xw = x W^T + b`` of all steps is one GEMM done by the caller; these ops
run the recurrence, so a step costs one small GEMM and one pass over the gates instead of a
dozen dispatched elementwise ops. Gate order and formulas are ONNX's (LSTM ``i, o, f, c``; GRU
``z, r, h`` with ``linear_before_reset``). ``reverse`` runs the steps from last to first (the
backward direction of a bidirectional layer); outputs stay indexed by time.

The forward ops also write what backpropagation through time reads (activated gates, cell
states), so the backward ops need no recomputation.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype
from ..errors import DtypeMismatchError, ShapeError
from ._registry import FD, defop


def _sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


def _check(op, ins, shapes, dims):
    """Every input floating point, of one dtype, and of the shape ``shapes`` over ``dims``."""
    dt = ins[0].dtype_code
    for i, (x, want) in enumerate(zip(ins, shapes)):
        if x.dtype_code != dt:
            raise DtypeMismatchError(f"{op}: input {i} is {_dtype.name_of(x.dtype_code)}, "
                                     f"input 0 is {_dtype.name_of(dt)}; convert with "
                                     "x.as_type(...)")
        want = tuple(dims[k] if isinstance(k, str) else k for k in want)
        if tuple(x.dims) != want:
            raise ShapeError(f"{op}: input {i} has shape {tuple(x.dims)}, expected {want} "
                             f"(T steps, B batch, H hidden: {dims})")
    return dt


def _dims(op, xw, gates):
    if len(xw.dims) != 3 or xw.dims[2] % gates:
        raise ShapeError(f"{op}: xw must be (T, B, {gates}*H), got {tuple(xw.dims)}")
    t, b, gh = xw.dims
    return {"T": t, "B": b, "H": gh // gates}


def _steps(t, reverse):
    return range(t - 1, -1, -1) if reverse else range(t)


def _prev(y, h0, t, reverse):
    """The state before step ``t``: ``h0`` at the first step of the direction."""
    first = len(y) - 1 if reverse else 0
    return h0 if t == first else y[t + 1 if reverse else t - 1]


# LSTM ----------------------------------------------------------------------------------------

def _lstm_infer(ins, attrs):
    d = _dims("LSTMSeq", ins[0], 4)
    dt = _check("LSTMSeq", ins, [("T", "B", 4 * d["H"]), (4 * d["H"], "H"), ("B", "H"),
                                 ("B", "H")], d)
    t, b, h = d["T"], d["B"], d["H"]
    return [((t, b, h), dt), ((t, b, h), dt), ((t, b, 4 * h), dt)]


def _lstm_ref(xw, r, h0, c0, reverse=False):
    t_len, _, gh = xw.shape
    h = gh // 4
    y = np.empty(xw.shape[:2] + (h,), xw.dtype)
    c = np.empty_like(y)
    gates = np.empty_like(xw)
    hp, cp = h0, c0
    for t in _steps(t_len, reverse):
        a = xw[t] + hp @ r.T
        i, o, f = _sigmoid(a[:, :h]), _sigmoid(a[:, h:2 * h]), _sigmoid(a[:, 2 * h:3 * h])
        g = np.tanh(a[:, 3 * h:])
        cp = f * cp + i * g
        hp = o * np.tanh(cp)
        gates[t] = np.concatenate([i, o, f, g], axis=1)
        c[t], y[t] = cp, hp
    return y, c, gates


def _lstm_bwd_infer(ins, attrs):
    d = _dims("LSTMSeqBackward", ins[2], 4)
    h = d["H"]
    dt = _check("LSTMSeqBackward", ins, [("T", "B", "H"), ("T", "B", "H"), ("T", "B", 4 * h),
                                         ("T", "B", "H"), ("T", "B", "H"), ("B", "H"),
                                         ("B", "H"), (4 * h, "H")], d)
    t, b = d["T"], d["B"]
    return [((t, b, 4 * h), dt), ((4 * h, h), dt), ((b, h), dt), ((b, h), dt)]


def _lstm_bwd_ref(dy, dc, gates, c, y, h0, c0, r, reverse=False):
    t_len, _, h = y.shape
    dxw = np.empty_like(gates)
    dr = np.zeros_like(r)
    dh_next = np.zeros_like(h0)
    dc_next = np.zeros_like(c0)
    for t in _steps(t_len, not reverse):
        i, o, f, g = (gates[t][:, k * h:(k + 1) * h] for k in range(4))
        cp, hp = _prev(c, c0, t, reverse), _prev(y, h0, t, reverse)
        tc = np.tanh(c[t])
        dh = dy[t] + dh_next
        dct = dc[t] + dc_next + dh * o * (1 - tc * tc)
        da = np.concatenate([dct * g * i * (1 - i), dh * tc * o * (1 - o),
                             dct * cp * f * (1 - f), dct * i * (1 - g * g)], axis=1)
        dxw[t] = da
        dr += da.T @ hp
        dh_next = da @ r
        dc_next = dct * f
    return dxw, dr, dh_next, dc_next


def _lstm_sample(g, dtype):
    t, b, h = g.integers(1, 4), g.integers(1, 3), g.integers(1, 4)
    return [g.array((t, b, 4 * h), dtype, -2, 2), g.array((4 * h, h), dtype, -1, 1),
            g.array((b, h), dtype, -1, 1), g.array((b, h), dtype, -1, 1)], \
        {"reverse": g.booleans()}


def _lstm_bwd_sample(g, dtype):
    (xw, r, h0, c0), attrs = _lstm_sample(g, dtype)
    y, c, gates = _lstm_ref(xw, r, h0, c0, **attrs)
    dy, dc = g.array(y.shape, dtype, -1, 1), g.array(y.shape, dtype, -1, 1)
    return [dy, dc, gates, c, y, h0, c0, r], attrs


# GRU -----------------------------------------------------------------------------------------

def _gru_infer(ins, attrs):
    d = _dims("GRUSeq", ins[0], 3)
    h = d["H"]
    dt = _check("GRUSeq", ins, [("T", "B", 3 * h), (3 * h, "H"), (3 * h,), ("B", "H")], d)
    t, b = d["T"], d["B"]
    return [((t, b, h), dt), ((t, b, 3 * h), dt), ((t, b, h), dt)]


def _gru_ref(xw, rw, rb, h0, reverse=False, linear_before_reset=False):
    t_len, _, gh = xw.shape
    h = gh // 3
    y = np.empty(xw.shape[:2] + (h,), xw.dtype)
    gates = np.empty_like(xw)
    q = np.empty_like(y)
    hp = h0
    for t in _steps(t_len, reverse):
        a = xw[t][:, :2 * h] + hp @ rw[:2 * h].T + rb[:2 * h]
        z, r = _sigmoid(a[:, :h]), _sigmoid(a[:, h:])
        if linear_before_reset:
            q[t] = hp @ rw[2 * h:].T + rb[2 * h:]
            n = np.tanh(xw[t][:, 2 * h:] + r * q[t])
        else:
            q[t] = r * hp
            n = np.tanh(xw[t][:, 2 * h:] + q[t] @ rw[2 * h:].T + rb[2 * h:])
        hp = (1 - z) * n + z * hp
        gates[t] = np.concatenate([z, r, n], axis=1)
        y[t] = hp
    return y, gates, q


def _gru_bwd_infer(ins, attrs):
    d = _dims("GRUSeqBackward", ins[1], 3)
    h = d["H"]
    dt = _check("GRUSeqBackward", ins, [("T", "B", "H"), ("T", "B", 3 * h), ("T", "B", "H"),
                                        ("T", "B", "H"), ("B", "H"), (3 * h, "H")], d)
    t, b = d["T"], d["B"]
    return [((t, b, 3 * h), dt), ((3 * h, h), dt), ((3 * h,), dt), ((b, h), dt)]


def _gru_bwd_ref(dy, gates, q, y, h0, rw, reverse=False, linear_before_reset=False):
    t_len, _, h = y.shape
    dxw = np.empty_like(gates)
    drw = np.zeros_like(rw)
    drb = np.zeros(rw.shape[0], rw.dtype)
    dh_next = np.zeros_like(h0)
    rh = rw[2 * h:]
    for t in _steps(t_len, not reverse):
        z, r, n = (gates[t][:, k * h:(k + 1) * h] for k in range(3))
        hp = _prev(y, h0, t, reverse)
        dh = dy[t] + dh_next
        dan = dh * (1 - z) * (1 - n * n)
        daz = dh * (hp - n) * z * (1 - z)
        dhp = dh * z
        if linear_before_reset:
            dq = dan * r
            dr = dan * q[t]
            drw[2 * h:] += dq.T @ hp
            drb[2 * h:] += dq.sum(0)
            dhp = dhp + dq @ rh
        else:
            drw[2 * h:] += dan.T @ q[t]
            drb[2 * h:] += dan.sum(0)
            drh = dan @ rh
            dr = drh * hp
            dhp = dhp + drh * r
        dar = dr * r * (1 - r)
        dzr = np.concatenate([daz, dar], axis=1)
        drw[:2 * h] += dzr.T @ hp
        drb[:2 * h] += dzr.sum(0)
        dhp = dhp + dzr @ rw[:2 * h]
        dxw[t] = np.concatenate([dzr, dan], axis=1)
        dh_next = dhp
    return dxw, drw, drb, dh_next


def _gru_sample(g, dtype):
    t, b, h = g.integers(1, 4), g.integers(1, 3), g.integers(1, 4)
    return [g.array((t, b, 3 * h), dtype, -2, 2), g.array((3 * h, h), dtype, -1, 1),
            g.array((3 * h,), dtype, -1, 1), g.array((b, h), dtype, -1, 1)], \
        {"reverse": g.booleans(), "linear_before_reset": g.booleans()}


def _gru_bwd_sample(g, dtype):
    (xw, rw, rb, h0), attrs = _gru_sample(g, dtype)
    y, gates, q = _gru_ref(xw, rw, rb, h0, **attrs)
    return [g.array(y.shape, dtype, -1, 1), gates, q, y, h0, rw], attrs


_TOL = {_dtype.kFloat32: (1e-4, 1e-5)}

defop("LSTMSeq", 4, _lstm_infer, _lstm_ref, _lstm_sample, nout=3, dtypes=FD, tol=_TOL,
      doc="""LSTM over a sequence (ONNX gates i, o, f, c):
    ``(xw[T, B, 4H], r[4H, H], h0[B, H], c0[B, H]) -> (y[T, B, H], c[T, B, H], gates[T, B, 4H])``
    with ``a = xw[t] + h r^T``, ``i, o, f = sigmoid(a_i, a_o, a_f)``, ``g = tanh(a_c)``,
    ``c_t = f c_{t-1} + i g``, ``h_t = y[t] = o tanh(c_t)``; ``gates`` holds ``i, o, f, g``.
    Attribute ``reverse``: steps from T-1 down to 0.
    """)
defop("LSTMSeqBackward", 8, _lstm_bwd_infer, _lstm_bwd_ref, _lstm_bwd_sample, nout=4,
      dtypes=FD, tol=_TOL,
      doc="""Backpropagation through time of ``LSTMSeq``:
    ``(dy, dc, gates, c, y, h0, c0, r) -> (dxw, dr, dh0, dc0)``, ``dy``/``dc`` the gradients
    of the outputs ``y`` and ``c``.
    """)
defop("GRUSeq", 4, _gru_infer, _gru_ref, _gru_sample, nout=3, dtypes=FD, tol=_TOL,
      doc="""GRU over a sequence (ONNX gates z, r, h):
    ``(xw[T, B, 3H], rw[3H, H], rb[3H], h0[B, H]) -> (y[T, B, H], gates[T, B, 3H], q[T, B, H])``
    with ``z, r = sigmoid(xw[t]_zr + h rw_zr^T + rb_zr)``; ``n = tanh(xw[t]_h + r q + ...)``:
    ``linear_before_reset``: ``q = h rw_h^T + rb_h``, ``n = tanh(xw[t]_h + r q)``; otherwise
    ``q = r h``, ``n = tanh(xw[t]_h + q rw_h^T + rb_h)``. ``h_t = y[t] = (1 - z) n + z h``;
    ``gates`` holds ``z, r, n``. Attribute ``reverse``: steps from T-1 down to 0.
    """)
defop("GRUSeqBackward", 6, _gru_bwd_infer, _gru_bwd_ref, _gru_bwd_sample, nout=4, dtypes=FD,
      tol=_TOL,
      doc="""Backpropagation through time of ``GRUSeq``:
    ``(dy, gates, q, y, h0, rw) -> (dxw, drw, drb, dh0)``.
    """)
