"""Convolution as im2col + matrix product, written against the array module.

On a GPU, float32 and float16 convolutions run through cuDNN (:mod:`singa_cuda.cudnn_conv`);
this path serves float64 (which cuDNN's graph engines do not cover for every geometry) and is
the code CI checks on numpy. ``cols[n, g, (c, i, j), (p, q)] = xpad[n, g*Cg + c, p*sh + i*dh,
q*sw + j*dw]``; ``y[n, g] = W[g] @ cols[n, g]``.
"""

from __future__ import annotations

from singa.backend import conv2d_geometry

from ._module import ArrayModule


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for Conv2d, Conv2dBackwardX and Conv2dBackwardW."""
    xp = am.xp

    def wide(a):
        if am.half_gemm_in_fp32 and a.dtype == xp.float16:
            return a.astype(xp.float32)
        return a

    def window(g, i, j):
        return (slice(None), slice(None),
                slice(i * g.dh, i * g.dh + g.sh * (g.ho - 1) + 1, g.sh),
                slice(j * g.dw, j * g.dw + g.sw * (g.wo - 1) + 1, g.sw))

    def im2col(x, g):
        xp_ = xp.zeros((g.n, g.c, g.h + g.pt + g.pb, g.w + g.pl + g.pr), x.dtype)
        xp_[:, :, g.pt:g.pt + g.h, g.pl:g.pl + g.w] = x
        cols = xp.empty((g.n, g.c, g.kh, g.kw, g.ho, g.wo), x.dtype)
        for i in range(g.kh):
            for j in range(g.kw):
                cols[:, :, i, j] = xp_[window(g, i, j)]
        cg = g.c // g.group
        return cols.reshape(g.n, g.group, cg * g.kh * g.kw, g.ho * g.wo)

    def forward(ins, outs, attrs):
        x, w = ins[0], ins[1]
        g = conv2d_geometry("Conv2d", x.shape, w.shape, attrs)
        cols = wide(im2col(x, g))
        wg = wide(w).reshape(g.group, g.o // g.group, -1)
        y = xp.matmul(wg[None], cols).reshape(g.n, g.o, g.ho, g.wo)
        if len(ins) == 3:
            y += wide(ins[2]).reshape(1, -1, 1, 1)
        outs[0][...] = y

    def backward_x(ins, outs, attrs):
        dy, w = ins
        g = conv2d_geometry("Conv2dBackwardX", attrs["x_shape"], w.shape, attrs)
        og, cg = g.o // g.group, g.c // g.group
        dyg = wide(dy).reshape(g.n, g.group, og, g.ho * g.wo)
        wg = wide(w).reshape(g.group, og, cg * g.kh * g.kw)
        dcols = xp.matmul(xp.swapaxes(wg, 1, 2)[None], dyg)  # (n, group, cg*kh*kw, ho*wo)
        dcols = dcols.reshape(g.n, g.c, g.kh, g.kw, g.ho, g.wo)
        dxp = xp.zeros((g.n, g.c, g.h + g.pt + g.pb, g.w + g.pl + g.pr), dcols.dtype)
        for i in range(g.kh):
            for j in range(g.kw):
                dxp[window(g, i, j)] += dcols[:, :, i, j]
        outs[0][...] = dxp[:, :, g.pt:g.pt + g.h, g.pl:g.pl + g.w]

    def backward_w(ins, outs, attrs):
        dy, x = ins
        g = conv2d_geometry("Conv2dBackwardW", x.shape, attrs["w_shape"], attrs)
        og = g.o // g.group
        cols = wide(im2col(x, g))  # (n, group, cg*kh*kw, L)
        dyg = wide(dy).reshape(g.n, g.group, og, g.ho * g.wo)
        dw = xp.matmul(dyg, xp.swapaxes(cols, 2, 3)).sum(axis=0)  # (group, og, cg*kh*kw)
        outs[0][...] = dw.reshape(outs[0].shape)

    return {"Conv2d": forward, "Conv2dBackwardX": backward_x, "Conv2dBackwardW": backward_w}
