"""Softmax cross-entropy and cross-entropy kernels (vectorised numpy; float16 via float32)."""

from __future__ import annotations

import numpy as np
from singa.backend import check_indices, kernel_attrs

from ._float16 import via_float32

#: SINGA clamps probabilities at FLT_MIN before the log.
_P_FLOOR = np.finfo(np.float32).tiny


def _is_ids(target, op: str = "", classes: int = 0) -> bool:
    """True for int class ids (N,), checked to lie in [0, classes) (no negative ids: -1 is
    not "the last class" for a loss)."""
    if target.ndim != 1:
        return False
    if op:
        check_indices(op, target, classes, negative=False, what="class id")
    return True


@kernel_attrs(contiguous_inputs=True)
@via_float32
def softmax_cross_entropy(ins, outs, attrs):
    x, t = ins
    loss, probs = outs
    n = x.shape[0]
    ids = _is_ids(t, "SoftmaxCrossEntropy", x.shape[1])
    np.subtract(x, x.max(axis=1, keepdims=True), out=probs)  # z = x - rowmax
    if ids:
        z_t = probs[np.arange(n), t].astype(np.float64)
        t_mass = 1.0
    else:
        z_t = np.einsum("nc,nc->n", t, probs, dtype=np.float64)
        t_mass = t.sum(axis=1, dtype=np.float64)
    np.exp(probs, out=probs)
    sums = probs.sum(axis=1, keepdims=True)
    probs /= sums
    # -log softmax(x)[t] = log(sum exp z) - z_t, weighted by the target mass of each row
    log_sums = np.log(sums[:, 0].astype(np.float64))
    loss[0] = (t_mass * log_sums - z_t).sum() / n


@kernel_attrs(contiguous_inputs=True)
@via_float32
def softmax_cross_entropy_backward(ins, outs, attrs):
    probs, t = ins
    dx = outs[0]
    n = probs.shape[0]
    if _is_ids(t, "SoftmaxCrossEntropyBackward", probs.shape[1]):
        np.copyto(dx, probs)
        dx[np.arange(n), t] -= 1
    else:
        np.subtract(probs, t, out=dx)
    dx /= n


@kernel_attrs(contiguous_inputs=True)
@via_float32
def cross_entropy_fwd(ins, outs, attrs):
    p, t = ins
    out = outs[0]
    if _is_ids(t, "CrossEntropyFwd", p.shape[1]):
        picked = np.maximum(p[np.arange(p.shape[0]), t], _P_FLOOR)
        np.negative(np.log(picked), out=out)
    else:
        logp = np.log(np.maximum(p, _P_FLOOR))
        out[...] = -np.einsum("nc,nc->n", t, logp)


KERNELS = {
    "SoftmaxCrossEntropy": softmax_cross_entropy,
    "SoftmaxCrossEntropyBackward": softmax_cross_entropy_backward,
    "CrossEntropyFwd": cross_entropy_fwd,
}
