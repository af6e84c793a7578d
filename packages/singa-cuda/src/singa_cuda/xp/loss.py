"""Softmax cross-entropy and cross-entropy of probabilities (rows of an (N, C) input).

Targets are int32 class ids of shape (N,) or a dense (N, C) distribution. float16 inputs are
computed in float32.
"""

from __future__ import annotations

from ._module import ArrayModule

#: SINGA clamps probabilities below at float32's smallest normal number (FLT_MIN).
P_FLOOR = 1.1754943508222875e-38


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for the loss ops."""
    xp = am.xp

    def acc(a):
        return a.astype(xp.float64 if a.dtype == xp.float64 else xp.float32)

    def dense(target, n_classes, dtype, op):
        if target.ndim == 1:  # class ids: no negative ids (-1 is not "the last class")
            am.check_indices(op, target, n_classes, negative=False, what="class id")
            return (xp.arange(n_classes)[None, :] == target[:, None]).astype(dtype)
        return target.astype(dtype)

    def softmax_ce(ins, outs, attrs):
        logits, target = ins
        loss, probs = outs
        z = acc(logits)
        z -= z.max(axis=1, keepdims=True)
        z -= xp.log(xp.exp(z).sum(axis=1, keepdims=True))  # log-softmax
        t = dense(target, z.shape[1], z.dtype, "SoftmaxCrossEntropy")
        loss[...] = (-(t * z).sum() / z.shape[0]).reshape(1)
        probs[...] = xp.exp(z)

    def softmax_ce_backward(ins, outs, attrs):
        probs, target = ins
        p = acc(probs)
        t = dense(target, p.shape[1], p.dtype, "SoftmaxCrossEntropyBackward")
        outs[0][...] = (p - t) / p.shape[0]

    def cross_entropy(ins, outs, attrs):
        p, target = ins
        pw = acc(p)
        t = dense(target, pw.shape[1], pw.dtype, "CrossEntropyFwd")
        outs[0][...] = -(t * xp.log(xp.maximum(pw, P_FLOOR))).sum(axis=1)

    return {"SoftmaxCrossEntropy": softmax_ce,
            "SoftmaxCrossEntropyBackward": softmax_ce_backward,
            "CrossEntropyFwd": cross_entropy}
