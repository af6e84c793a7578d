"""Whole-sequence LSTM and GRU (``LSTMSeq``, ``GRUSeq`` and their backward ops) on an array
module: per step one matrix product of the previous state by the recurrent weights (cuBLAS on
a GPU) and the gate arithmetic as array operations, where an unrolled cell dispatches a dozen
ops. The formulas and the gate orders are the op table's (``singa.ops._recurrent_ops``: ONNX's
``i, o, f, c`` and ``z, r, h``); ``reverse`` runs the steps from last to first, outputs stay
indexed by time.
"""

from __future__ import annotations

from ._module import ArrayModule


def _steps(t: int, reverse: bool):
    return range(t - 1, -1, -1) if reverse else range(t)


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for LSTMSeq, LSTMSeqBackward, GRUSeq and GRUSeqBackward."""
    xp = am.xp

    def sigmoid_into(a, out):
        xp.negative(a, out=out)
        xp.exp(out, out=out)
        out += 1
        xp.reciprocal(out, out=out)

    def prev(y, h0, t, reverse):
        first = y.shape[0] - 1 if reverse else 0
        return h0 if t == first else y[t + 1 if reverse else t - 1]

    def lstm_seq(ins, outs, attrs):
        xw, r, h0, c0 = ins
        y, c, gates = outs
        h = y.shape[2]
        reverse = bool(attrs.get("reverse", False))
        rt = r.T
        hp, cp = h0, c0
        for t in _steps(xw.shape[0], reverse):
            a = xp.matmul(hp, rt)
            a += xw[t]
            g = gates[t]
            sigmoid_into(a[:, :3 * h], g[:, :3 * h])
            xp.tanh(a[:, 3 * h:], out=g[:, 3 * h:])
            i, o, f, gg = (g[:, k * h:(k + 1) * h] for k in range(4))
            ct = c[t]
            xp.multiply(f, cp, out=ct)
            ct += i * gg
            xp.tanh(ct, out=y[t])
            y[t] *= o
            hp, cp = y[t], ct

    def lstm_seq_backward(ins, outs, attrs):
        dy, dc, gates, c, y, h0, c0, r = ins
        dxw, dr, dh0, dc0 = outs
        h = y.shape[2]
        reverse = bool(attrs.get("reverse", False))
        dr[...] = 0
        dh_next = xp.zeros_like(h0)
        dc_next = xp.zeros_like(c0)
        for t in _steps(y.shape[0], not reverse):
            i, o, f, g = (gates[t][:, k * h:(k + 1) * h] for k in range(4))
            cp, hp = prev(c, c0, t, reverse), prev(y, h0, t, reverse)
            tc = xp.tanh(c[t])
            dh = dy[t] + dh_next
            dct = dc[t] + dc_next + dh * o * (1 - tc * tc)
            da = dxw[t]
            da[:, :h] = dct * g * i * (1 - i)
            da[:, h:2 * h] = dh * tc * o * (1 - o)
            da[:, 2 * h:3 * h] = dct * cp * f * (1 - f)
            da[:, 3 * h:] = dct * i * (1 - g * g)
            dr += xp.matmul(da.T, hp)
            dh_next = xp.matmul(da, r)
            dc_next = dct * f
        dh0[...] = dh_next
        dc0[...] = dc_next

    def gru_seq(ins, outs, attrs):
        xw, rw, rb, h0 = ins
        y, gates, q = outs
        h = y.shape[2]
        reverse = bool(attrs.get("reverse", False))
        lbr = bool(attrs.get("linear_before_reset", False))
        rzr, rh = rw[:2 * h].T, rw[2 * h:].T
        hp = h0
        for t in _steps(xw.shape[0], reverse):
            g = gates[t]
            a = xp.matmul(hp, rzr)
            a += xw[t][:, :2 * h]
            a += rb[:2 * h]
            sigmoid_into(a, g[:, :2 * h])
            z, r = g[:, :h], g[:, h:2 * h]
            n = g[:, 2 * h:]
            if lbr:
                xp.matmul(hp, rh, out=q[t])
                q[t] += rb[2 * h:]
                xp.multiply(r, q[t], out=n)
            else:
                xp.multiply(r, hp, out=q[t])
                xp.matmul(q[t], rh, out=n)
                n += rb[2 * h:]
            n += xw[t][:, 2 * h:]
            xp.tanh(n, out=n)
            yt = y[t]
            xp.subtract(hp, n, out=yt)  # (1 - z) n + z h = n + z (h - n)
            yt *= z
            yt += n
            hp = yt

    def gru_seq_backward(ins, outs, attrs):
        dy, gates, q, y, h0, rw = ins
        dxw, drw, drb, dh0 = outs
        h = y.shape[2]
        reverse = bool(attrs.get("reverse", False))
        lbr = bool(attrs.get("linear_before_reset", False))
        drw[...] = 0
        drb[...] = 0
        dh_next = xp.zeros_like(h0)
        rh = rw[2 * h:]
        for t in _steps(y.shape[0], not reverse):
            z, r, n = (gates[t][:, k * h:(k + 1) * h] for k in range(3))
            hp = prev(y, h0, t, reverse)
            dh = dy[t] + dh_next
            dan = dh * (1 - z) * (1 - n * n)
            daz = dh * (hp - n) * z * (1 - z)
            dhp = dh * z
            if lbr:
                dq = dan * r
                dr = dan * q[t]
                drw[2 * h:] += xp.matmul(dq.T, hp)
                drb[2 * h:] += dq.sum(0)
                dhp += xp.matmul(dq, rh)
            else:
                drw[2 * h:] += xp.matmul(dan.T, q[t])
                drb[2 * h:] += dan.sum(0)
                drh = xp.matmul(dan, rh)
                dr = drh * hp
                dhp += drh * r
            da = dxw[t]
            da[:, :h] = daz
            da[:, h:2 * h] = dr * r * (1 - r)
            da[:, 2 * h:] = dan
            dzr = da[:, :2 * h]
            drw[:2 * h] += xp.matmul(dzr.T, hp)
            drb[:2 * h] += dzr.sum(0)
            dhp += xp.matmul(dzr, rw[:2 * h])
            dh_next = dhp
        dh0[...] = dh_next

    return {"LSTMSeq": lstm_seq, "LSTMSeqBackward": lstm_seq_backward,
            "GRUSeq": gru_seq, "GRUSeqBackward": gru_seq_backward}
