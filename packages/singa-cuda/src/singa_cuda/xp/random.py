"""Counter-based random draws: Philox4x32-10 (Salmon et al., SC'11), the generator cuRAND and
Random123 use.

Draw ``e`` of a call is a pure function of ``(seed, call number, e)``: the 128-bit counter is
``(e mod 2^32, e div 2^32, call mod 2^32, call div 2^32)`` and the key is the seed's two 32-bit
halves. So draws need no per-thread state, a graph replay continues the stream (the call number
is read when the kernel runs, not when it is recorded), and ``cu/philox.cu`` computes the same
words on a GPU. Words become numbers in float64, then round once to the output dtype:

- uniform on [low, high): ``low + (high - low) * (w0 >> 8) * 2^-24`` (float16/float32) or with
  53 bits from ``w0, w1`` (float64);
- normal: Box-Muller, ``sqrt(-2 ln u1) cos(2 pi u2)`` with ``u1 in (0, 1]`` from ``w0`` and
  ``u2`` from ``w2`` (53-bit versions from ``w0, w1`` and ``w2, w3`` for float64);
- Bernoulli(p): ``1`` if the uniform draw is below ``p``.
"""

from __future__ import annotations

import math
import os

from ._module import ArrayModule

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF
ROUNDS = 10


class PhiloxState:
    """A device's generator: the seed (the key) and the number of calls made (the counter's
    upper half). ``SetRandSeed`` resets both."""

    def __init__(self, seed: int | None = None):
        self.reseed(seed)

    def reseed(self, seed: int | None) -> None:
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.calls = 0

    def next_call(self) -> tuple[int, int, int, int]:
        """``(key0, key1, call0, call1)`` for the next draw and advance."""
        call = self.calls
        self.calls += 1
        return (self.seed & MASK32, self.seed >> 32, call & MASK32, (call >> 32) & MASK32)


def philox4x32(xp, c0, c1, c2, c3, k0: int, k1: int):
    """Philox4x32-10 of counter arrays ``c0..c3`` (uint32) under key ``(k0, k1)``: four
    uint32 arrays."""
    u64 = xp.uint64
    c0, c1, c2, c3 = (xp.asarray(c, dtype=u64) for c in (c0, c1, c2, c3))
    for r in range(ROUNDS):
        if r:
            k0 = (k0 + W0) & MASK32
            k1 = (k1 + W1) & MASK32
        p0 = c0 * u64(M0)
        p1 = c2 * u64(M1)
        hi0, lo0 = p0 >> u64(32), p0 & u64(MASK32)
        hi1, lo1 = p1 >> u64(32), p1 & u64(MASK32)
        c0, c1, c2, c3 = (hi1 ^ c1 ^ u64(k0), lo1, hi0 ^ c3 ^ u64(k1), lo0)
    return tuple(c.astype(xp.uint32) for c in (c0, c1, c2, c3))


def words(xp, n: int, key_call: tuple[int, int, int, int]):
    """The four Philox words of draws ``0 .. n-1`` of one call."""
    k0, k1, call0, call1 = key_call
    e = xp.arange(n, dtype=xp.uint64)
    lo = e & xp.uint64(MASK32)
    hi = e >> xp.uint64(32)
    c2 = xp.full(n, call0, dtype=xp.uint64)
    c3 = xp.full(n, call1, dtype=xp.uint64)
    return philox4x32(xp, lo, hi, c2, c3, k0, k1)


def unit(xp, a, b, wide: bool, open_low: bool = False):
    """A uniform number on [0, 1) (or (0, 1] with ``open_low``) in float64 from words."""
    f64 = xp.float64
    if wide:
        bits = (a >> xp.uint32(5)).astype(f64) * 67108864.0 + (b >> xp.uint32(6)).astype(f64)
        scale = 2.0 ** -53
    else:
        bits = (a >> xp.uint32(8)).astype(f64)
        scale = 2.0 ** -24
    if open_low:
        bits = bits + 1.0
    return bits * scale


def kernels(am: ArrayModule, state_of) -> dict:
    """``{op_name: kernel}`` for Gaussian, Uniform and Bernoulli. ``state_of()`` returns the
    device's :class:`PhiloxState` when the kernel runs."""
    xp = am.xp

    def draw(out, kind, attrs):
        n = out.size
        w0, w1, w2, w3 = words(xp, n, state_of().next_call())
        wide = out.dtype == xp.float64
        if kind == "gauss":
            u1 = unit(xp, w0, w1, wide, open_low=True)
            u2 = unit(xp, w2, w3, wide)
            z = xp.sqrt(-2.0 * xp.log(u1)) * xp.cos((2.0 * math.pi) * u2)
            v = attrs["mean"] + attrs["std"] * z
        else:
            u = unit(xp, w0, w1, wide)
            if kind == "uniform":
                v = attrs["low"] + (attrs["high"] - attrs["low"]) * u
            else:
                v = (u < attrs["p"]).astype(xp.float64)
        out[...] = v.reshape(out.shape)

    def gaussian(ins, outs, attrs):
        draw(outs[0], "gauss", attrs)

    def uniform(ins, outs, attrs):
        draw(outs[0], "uniform", attrs)

    def bernoulli(ins, outs, attrs):
        draw(outs[0], "bernoulli", attrs)

    return {"Gaussian": gaussian, "Uniform": uniform, "Bernoulli": bernoulli}
