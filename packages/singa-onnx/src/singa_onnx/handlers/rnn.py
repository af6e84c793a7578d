"""Recurrent ONNX ops (LSTM, GRU, RNN).

Each direction projects the whole input sequence with one matmul; LSTM and GRU then run the
recurrence as one whole-sequence op (``LSTMSeq``/``GRUSeq``: one small GEMM and one pass over
the gates per step) where the device has a kernel for it or falls back to the host; RNN, and
LSTM/GRU on other devices, run their cell's autograd ops step by step. Outputs are Y (seq, dirs,
batch, hidden), Y_h and (LSTM) Y_c (dirs, batch, hidden).
"""

from __future__ import annotations

import numpy as np
from singa import autograd

from ._registry import register

_ATTRS = ("hidden_size", "direction", "activations", "activation_alpha", "activation_beta",
          "clip", "layout", "input_forget", "linear_before_reset")
_DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"],
                 "RNN": ["Tanh"]}
_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def _check(op):
    def check(attrs):
        bad = []
        acts = attrs.get("activations")
        dirs = 2 if attrs.get("direction", "forward") == "bidirectional" else 1
        if acts is not None and list(acts) != _DEFAULT_ACTS[op] * dirs:
            bad.append(f"activations={list(acts)} (the defaults only)")
        if attrs.get("clip") is not None:
            bad.append("clip")
        if attrs.get("input_forget", 0):
            bad.append("input_forget=1")
        return bad

    return check


def _row(ctx, w, d):
    """w[d] of a (dirs, ...) parameter, differentiable."""
    return autograd.squeeze(autograd.slice(w, [d], [d + 1], [0]), [0])


def _cols(t, i, h):
    """Gate i of a (batch, gates*h) tensor."""
    return autograd.slice(t, [i * h], [(i + 1) * h], [1])


def _run(op, ctx, attrs, x, w, r, b, seq_lens, h0, c0=None, p=None):
    x = ctx.tensor(x)
    w, r = ctx.tensor(w, like=x), ctx.tensor(r, like=x)
    if p is not None:
        raise ctx.error(f"{op}: peephole weights P are not supported")
    if attrs.get("layout", 0):
        # batch-major: X (batch, seq, in) and the initial states (batch, dirs, hidden)
        x = autograd.identity(autograd.transpose(x, [1, 0, 2]))
        h0, c0 = (None if s is None else autograd.identity(
            autograd.transpose(ctx.tensor(s, like=x), [1, 0, 2])) for s in (h0, c0))
    seq, batch, _ = x.shape
    if seq_lens is not None and np.any(ctx.host(seq_lens) != seq):
        raise ctx.error(f"{op}: sequence_lens shorter than the sequence are not supported")
    hs = int(attrs["hidden_size"])
    g = _GATES[op]
    direction = attrs.get("direction", "forward")
    dirs = [0, 1] if direction == "bidirectional" else [0]
    ys, hts, cts = [], [], []
    flat = autograd.reshape(x, [seq * batch, x.shape[2]])
    for d in dirs:
        wd, rd = _row(ctx, w, d), _row(ctx, r, d)
        xw = autograd.matmul(flat, autograd.transpose(wd))  # BLAS reads W^T in place
        if b is not None:
            bd = _row(ctx, ctx.tensor(b, like=x), d)
            wb = autograd.slice(bd, [0], [g * hs], [0])
            rb = autograd.slice(bd, [g * hs], [2 * g * hs], [0])
        else:
            wb = rb = None
        if wb is not None and op != "GRU":
            xw = autograd.add(xw, autograd.add(wb, rb))
        elif wb is not None:
            xw = autograd.add(xw, wb)
        xw = autograd.reshape(xw, [seq, batch, g * hs])
        zeros = ctx.tensor(np.zeros((batch, hs), np.float32), like=x)
        h = _row(ctx, ctx.tensor(h0, like=x), d) if h0 is not None else zeros
        c = _row(ctx, ctx.tensor(c0, like=x), d) if c0 is not None else zeros
        reverse = direction == "reverse" or d == 1
        if op != "RNN" and autograd.has_seq_kernel(x, f"{op}Seq"):
            last = [0] if reverse else [seq - 1]
            if op == "LSTM":
                yd, cd = autograd.LSTMSeq(reverse)(xw, rd, h, c)
                cts.append(autograd.slice(cd, last, [last[0] + 1], [0]))
            else:
                if rb is None:
                    rb = ctx.tensor(np.zeros(g * hs, np.float32), like=x)
                yd = autograd.GRUSeq(reverse, bool(attrs.get("linear_before_reset", 0)))(
                    xw, rd, rb, h)[0]
            ys.append(yd)
            hts.append(autograd.slice(yd, last, [last[0] + 1], [0]))
            continue
        rt = autograd.identity(autograd.transpose(rd))
        steps = range(seq - 1, -1, -1) if reverse else range(seq)
        outs = [None] * seq
        for t in steps:
            xt = autograd.squeeze(autograd.slice(xw, [t], [t + 1], [0]), [0])
            hr = autograd.matmul(h, rt)
            if op == "LSTM":
                gates = autograd.add(xt, hr)
                i, o, f, cc = (_cols(gates, k, hs) for k in range(4))
                c = autograd.add(autograd.mul(autograd.sigmoid(f), c),
                                 autograd.mul(autograd.sigmoid(i), autograd.tanh(cc)))
                h = autograd.mul(autograd.sigmoid(o), autograd.tanh(c))
            elif op == "GRU":
                if rb is not None:
                    hr = autograd.add(hr, rb)
                z = autograd.sigmoid(autograd.add(_cols(xt, 0, hs), _cols(hr, 0, hs)))
                rr = autograd.sigmoid(autograd.add(_cols(xt, 1, hs), _cols(hr, 1, hs)))
                if attrs.get("linear_before_reset", 0):
                    cand = autograd.add(_cols(xt, 2, hs), autograd.mul(rr, _cols(hr, 2, hs)))
                else:
                    rh = autograd.matmul(autograd.mul(rr, h),
                                         autograd.slice(rt, [2 * hs], [3 * hs], [1]))
                    if rb is not None:
                        rh = autograd.add(rh, autograd.slice(rb, [2 * hs], [3 * hs], [0]))
                    cand = autograd.add(_cols(xt, 2, hs), rh)
                cand = autograd.tanh(cand)
                # h = (1 - z) cand + z h = cand + z (h - cand)
                h = autograd.add(cand, autograd.mul(z, autograd.sub(h, cand)))
            else:
                h = autograd.tanh(autograd.add(xt, hr))
            outs[t] = autograd.unsqueeze(h, [0])
        ys.append(autograd.cat(outs, 0) if seq > 1 else outs[0])
        hts.append(autograd.unsqueeze(h, [0]))
        cts.append(autograd.unsqueeze(c, [0]))
    y = autograd.cat([autograd.unsqueeze(v, [1]) for v in ys], 1) if len(ys) > 1 \
        else autograd.unsqueeze(ys[0], [1])
    yh = autograd.cat(hts, 0) if len(hts) > 1 else hts[0]
    if attrs.get("layout", 0):
        y = autograd.identity(autograd.transpose(y, [2, 0, 1, 3]))
        yh = autograd.identity(autograd.transpose(yh, [1, 0, 2]))
    if op != "LSTM":
        return y, yh
    yc = autograd.cat(cts, 0) if len(cts) > 1 else cts[0]
    if attrs.get("layout", 0):
        yc = autograd.identity(autograd.transpose(yc, [1, 0, 2]))
    return y, yh, yc


@register("LSTM", attrs=_ATTRS, check=_check("LSTM"))
def lstm(ctx, attrs, x, w, r, b=None, seq_lens=None, h0=None, c0=None, p=None):
    """LSTM, gates i, o, f, c: c' = f c + i tanh(.), h' = o tanh(c')."""
    return _run("LSTM", ctx, attrs, x, w, r, b, seq_lens, h0, c0, p)


@register("GRU", attrs=_ATTRS, check=_check("GRU"))
def gru(ctx, attrs, x, w, r, b=None, seq_lens=None, h0=None):
    """GRU, gates z, r, h: h' = (1 - z) tanh(.) + z h."""
    return _run("GRU", ctx, attrs, x, w, r, b, seq_lens, h0)


@register("RNN", attrs=_ATTRS, check=_check("RNN"))
def rnn(ctx, attrs, x, w, r, b=None, seq_lens=None, h0=None):
    """Elman RNN: h' = tanh(x W^T + h R^T + b)."""
    return _run("RNN", ctx, attrs, x, w, r, b, seq_lens, h0)
