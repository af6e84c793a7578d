"""ONNX Attention (opset 23+): scaled dot-product attention composed from autograd ops.

Q (B, Hq, S, d) or (B, S, Hq d); K, V likewise with Hkv heads (grouped-query attention repeats
each K/V head Hq / Hkv times). Optional past key/value are concatenated along the sequence;
the mask is additive (float) or boolean (True = attend); ``is_causal`` hides later positions;
``softcap`` applies c tanh(s / c) to the scores.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
from singa import autograd

from ._registry import register

_ATTRS = ("is_causal", "kv_num_heads", "q_num_heads", "qk_matmul_output_mode", "scale",
          "softcap", "softmax_precision")


def _heads(x, n):
    """(B, S, n d) -> (B, n, S, d)."""
    b, s, hd = x.shape
    y = autograd.reshape(x, [b, s, n, hd // n])
    return autograd.identity(autograd.transpose(y, [0, 2, 1, 3]))


def _repeat_heads(x, r):
    """(B, H, L, d) -> (B, H r, L, d), each head repeated r times in a row."""
    if r == 1:
        return x
    b, h, length, d = x.shape
    y = autograd.expand(autograd.unsqueeze(x, [2]), [b, h, r, length, d])
    return autograd.reshape(y, [b, h * r, length, d])


@register("Attention", attrs=_ATTRS)
def attention(ctx, attrs, q, k, v, mask=None, past_k=None, past_v=None, nonpad=None):
    """softmax(Q K^T scale + mask) V, with the present key/value and the scores as extra
    outputs."""
    q = ctx.tensor(q)
    k, v = ctx.tensor(k, like=q), ctx.tensor(v, like=q)
    three_d = len(q.shape) == 3
    if three_d:
        q = _heads(q, attrs["q_num_heads"])
        k = _heads(k, attrs["kv_num_heads"])
        v = _heads(v, attrs["kv_num_heads"])
    if past_k is not None:
        k = autograd.cat([ctx.tensor(past_k, like=q), k], 2)
        v = autograd.cat([ctx.tensor(past_v, like=q), v], 2)
    present_k, present_v = k, v
    b, hq, s, d = q.shape
    length = k.shape[2]
    r = hq // k.shape[1]
    k, v = _repeat_heads(k, r), _repeat_heads(v, r)
    scale = attrs.get("scale", 1.0 / math.sqrt(d))
    kt = autograd.identity(autograd.transpose(k, [0, 1, 3, 2]))
    scores = autograd.matmul(autograd.mul(q, ctx.tensor(np.float32(scale), like=q)), kt)
    # qk_matmul_output: 0 raw scores, 1 after softcap, 2 after the bias, 3 after softmax
    mode = attrs.get("qk_matmul_output_mode", 0)
    cap = attrs.get("softcap", 0.0)
    raw = scores
    if cap:  # before the mask, so masked cells stay -inf
        c = ctx.tensor(np.float32(cap), like=q)
        scores = autograd.mul(autograd.tanh(autograd.div(scores, c)), c)
    qk = scores if mode == 1 else raw
    bias = np.zeros((s, length), np.float32)  # host part of the additive bias
    runtime_mask = None
    if mask is not None:
        if ctx.is_host(mask):
            m = np.asarray(mask)
            m = np.where(m, 0, -np.inf).astype(np.float32) if m.dtype == np.bool_ \
                else m.astype(np.float32)
            bias = bias + _pad_mask(m, length)
        else:
            runtime_mask = ctx.tensor(mask, like=q)
            if len(ctx.in_types) > 3 and ctx.in_types[3] == onnx.TensorProto.BOOL:
                # singa holds the boolean mask as 0/1: True attends (0), False hides (-inf)
                runtime_mask = autograd.where(ctx.tensor(np.float32(0), like=q),
                                              ctx.tensor(np.float32(-np.inf), like=q),
                                              runtime_mask.data)
            if runtime_mask.shape[-1] < length:
                raise ctx.error("Attention: a runtime attn_mask shorter than the keys")
    if attrs.get("is_causal", 0):
        i, j = np.indices((s, length))
        if past_k is None and nonpad is not None:
            off = ctx.host(nonpad).reshape(-1) - s  # per batch, bottom-right aligned
            allowed = j[None] <= i[None] + off[:, None, None]
            causal = np.where(allowed, 0, -np.inf).astype(np.float32)[:, None]
        else:
            off = past_k.shape[2] if past_k is not None else 0
            causal = np.where(j <= i + off, 0, -np.inf).astype(np.float32)
        bias = bias + causal
    if nonpad is not None:
        lens = ctx.host(nonpad).reshape(-1)
        pad = np.arange(length)[None, :] >= lens[:, None]
        bias = bias + np.where(pad, -np.inf, 0).astype(np.float32)[:, None, None, :]
    if np.any(bias) or bias.ndim > 2:
        scores = autograd.add(scores, ctx.tensor(bias, like=q))
    if runtime_mask is not None:
        scores = autograd.add(scores, runtime_mask)
    if mode == 2:
        qk = scores
    p = autograd.softmax(scores, 3)
    if runtime_mask is None:
        # rows with no attendable key give zeros, not NaN (ONNX's convention)
        dead = np.isneginf(np.max(np.broadcast_to(bias, bias.shape), axis=-1, keepdims=True))
        if dead.any():
            keep = ctx.tensor((~dead).astype(np.float32), like=q)
            p = autograd.where(p, autograd.mul(p, ctx.tensor(np.float32(0), like=q)),
                               ctx.tensor(np.broadcast_to(~dead, np.broadcast_shapes(
                                   dead.shape, tuple(p.shape))).astype(np.float32),
                                   like=q).data)
            del keep
    if mode == 3:
        qk = p
    y = autograd.matmul(p, v)
    if three_d:
        y = autograd.identity(autograd.transpose(y, [0, 2, 1, 3]))
        y = autograd.reshape(y, [b, s, hq * y.shape[3]])
    return y, present_k, present_v, qk


def _pad_mask(m, length):
    if m.shape[-1] < length:
        pad = [(0, 0)] * (m.ndim - 1) + [(0, length - m.shape[-1])]
        m = np.pad(m, pad, constant_values=-np.inf)
    return m
