"""Batch normalisation (training, inference, backward) over channel axis 1.

Statistics are computed in float32 for float16 inputs (float64 stays float64). Training may be
called with the running-statistic outputs aliasing their inputs: they are read before any
output is written.
"""

from __future__ import annotations

from ._module import ArrayModule


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for the three batch-norm ops."""
    xp = am.xp

    def acc(a):
        return a.astype(xp.float64 if a.dtype == xp.float64 else xp.float32)

    def bcast(v, ndim):
        return v.reshape((1, -1) + (1,) * (ndim - 2))

    def axes(ndim):
        return (0,) + tuple(range(2, ndim))

    def train(ins, outs, attrs):
        x, scale, bias, rmean, rvar = (acc(a) for a in ins)
        y, smean, sinv, nmean, nvar = outs
        momentum, eps = attrs.get("momentum", 0.9), attrs.get("eps", 1e-5)
        nd = x.ndim
        m = x.size // x.shape[1]
        mean = x.mean(axis=axes(nd))
        centred = x - bcast(mean, nd)
        var = (centred * centred).mean(axis=axes(nd))
        inv_std = 1.0 / xp.sqrt(var + eps)
        unbiased = var * (m / max(m - 1, 1))
        new_mean = momentum * rmean + (1 - momentum) * mean
        new_var = momentum * rvar + (1 - momentum) * unbiased
        y[...] = centred * bcast(inv_std * scale, nd) + bcast(bias, nd)
        smean[...] = mean
        sinv[...] = inv_std
        nmean[...] = new_mean
        nvar[...] = new_var

    def infer(ins, outs, attrs):
        x, scale, bias, rmean, rvar = (acc(a) for a in ins)
        nd = x.ndim
        inv_std = 1.0 / xp.sqrt(rvar + attrs.get("eps", 1e-5))
        outs[0][...] = (x - bcast(rmean, nd)) * bcast(inv_std * scale, nd) + bcast(bias, nd)

    def backward(ins, outs, attrs):
        dy, x, scale, smean, sinv = (acc(a) for a in ins)
        dx, dscale, dbias = outs
        nd = x.ndim
        m = x.size // x.shape[1]
        xhat = (x - bcast(smean, nd)) * bcast(sinv, nd)
        db = dy.sum(axis=axes(nd))
        ds = (dy * xhat).sum(axis=axes(nd))
        dx[...] = bcast(scale * sinv / m, nd) * (m * dy - bcast(db, nd) - xhat * bcast(ds, nd))
        dscale[...] = ds
        dbias[...] = db

    return {"BatchNormTrain": train, "BatchNormInfer": infer, "BatchNormBackward": backward}
