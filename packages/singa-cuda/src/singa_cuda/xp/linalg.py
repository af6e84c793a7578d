"""Matrix products: numpy's matmul in CI, cuBLAS (through cupy) on a GPU.

float16 products accumulate in float32: cuBLAS does it itself (tensor-core GEMM with a float32
compute type); numpy would accumulate in half, so there the operands are widened first
(:attr:`ArrayModule.half_gemm_in_fp32`).
"""

from __future__ import annotations

from ._module import ArrayModule


def kernels(am: ArrayModule) -> dict:
    """``{op_name: kernel}`` for Matmul, GEMM and Axpy."""
    xp = am.xp

    def product(a, b):
        if am.half_gemm_in_fp32 and a.dtype == xp.float16:
            return xp.matmul(a.astype(xp.float32), b.astype(xp.float32))
        return xp.matmul(a, b)

    def matmul(ins, outs, attrs):
        outs[0][...] = product(ins[0], ins[1])

    def gemm(ins, outs, attrs):
        a, b, c = ins
        a = a.T if attrs.get("transA") else a
        b = b.T if attrs.get("transB") else b
        alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 0.0)
        if a.dtype == xp.float16 and (alpha != 1.0 or beta != 0.0):
            # the scaling and the sum in float32 too, rounded once: cuBLAS's half result is
            # already rounded, and two more half roundings drift past an ulp
            a, b = a.astype(xp.float32), b.astype(xp.float32)
        prod = product(a, b)  # a new array: out may alias c
        if alpha != 1.0:
            prod *= alpha
        if beta != 0.0:
            prod += beta * c.astype(prod.dtype)
        outs[0][...] = prod

    def axpy(ins, outs, attrs):
        alpha, x, y = ins
        # alpha stays on the device: a 0-d view, no host round trip; float16 is computed in
        # float32 and rounded once (two float16 roundings are off by an ulp)
        wide = am.acc_dtype(x.dtype)
        if wide is not None:
            x, y, alpha = x.astype(wide), y.astype(wide), alpha.astype(wide)
        res = xp.multiply(x, alpha.reshape(()))
        res += y
        outs[0][...] = res

    return {"Matmul": matmul, "GEMM": gemm, "Axpy": axpy}
