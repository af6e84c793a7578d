"""Depthwise convolution on small maps with the channels in the vector lanes.

On 7x7 maps (the last stages of MobileNetV3, EfficientNet and ConvNeXt) an output
plane is too small for :mod:`.grouped`'s wide rows: a 5x5 tap on a 7x7 map is a run of 11
wide outputs, rounded up to whole vectors, and every plane pays its own padding copy and loop
entries (576 x 7x7, 5x5: 3.8 G multiply-adds/s on one AMD Zen 4 core). Here a block of ``CB``
channels of one image is copied, zero-padded, into a channels-last scratch
``xp[r, col, c] = x[n, c0 + c, r - pt, col - pl]``, and each output pixel is, for the block's
channels c at once::

    v[c] = b[c0 + c] + w[c0 + c, 0, 0, 0] * xp[p*sh, q*sw, c] + ... (every tap (i, j) in order)

with the multiply-add of every tap written out in the loop's source (:func:`source`, one
loop per kernel size): the sums then stay in vector registers across the taps, where a loop
over the taps would load and store them once per tap. Row p of the block's output planes is
then written back to NCHW (with the ReLU when fused). The taps are summed in the same order
as :mod:`.grouped`'s forward, one rounding per add and per product (numba does not contract
them into an FMA), so both kernels give the same bits. The generated loops are compiled
through a source file in the per-user cache, which lets numba keep their compilations on
disk (:func:`_from_file`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import threading

import numpy as np

from . import _threads
from ._threads import run_ranges

U = np.uint64  # unsigned flat indices: signed ones keep numba from vectorising (see conv)

#: Channels per block: the vector loop's length, one AVX-512 vector of float32 (a wider block
#: would not keep the sums of a pixel in registers across its taps).
CB = 16
#: Depthwise layers whose output planes have at most this many pixels take this kernel;
#: larger maps keep :mod:`.grouped`'s wide rows, whose runs are long enough there. Measured on
#: one AMD Zen 4 core, wide rows / this kernel, ms, batch 1 and 8: 7x7 outputs 1.5-2x faster
#: (576 x 7x7, 5x5: 0.177 / 0.091, 1.43 / 0.70; 768 x 7x7, 7x7: 0.385 / 0.236), 14x14 even
#: (672 x 14x14, 5x5: 0.373 / 0.369, 3.01 / 3.11; 384 x 14x14, 7x7: 3.27 / 3.51 at batch 8).
MAX_HW = 100


def eligible(g) -> bool:
    """A depthwise layer (one input and one output channel per group) on a small map."""
    return (g.group > 1 and g.c == g.group and g.o == g.group
            and g.ho * g.wo <= MAX_HW)


_SOURCE = """
def depthwise_taps(x, w, b, y, has_bias, relu, sh, sw, dh, dw, pt, pl, t0, t1):
    c_all, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    ho, wo = y.shape[2], y.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    hp = (ho - 1) * sh + (kh - 1) * dh + 1
    wp = (wo - 1) * sw + (kw - 1) * dw + 1
    blocks = -(-c_all // CB)
    xf, wf, yf = x.reshape(-1), w.reshape(-1), y.reshape(-1)
    zero = y.dtype.type(0)
    xp = np.empty(hp * wp * CB, y.dtype)
    wt = np.zeros(TAPS * CB, y.dtype)
    acc = np.empty(ho * wo * CB, y.dtype)
    bias = np.zeros(CB, y.dtype)
    offs = np.empty(TAPS, np.uint64)
    for i in range(kh):
        for j in range(kw):
            offs[i * kw + j] = U((i * dh * wp + j * dw) * CB)
{unpack}
    for t in range(t0, t1):
        n = t // blocks
        c0 = (t - n * blocks) * CB
        cb = min(CB, c_all - c0)
        for c in range(cb):
            if has_bias:
                bias[c] = b[c0 + c]
            for tap in range(TAPS):
                wt[U(tap * CB + c)] = wf[U((c0 + c) * TAPS + tap)]
        # lanes past the last channel (c >= cb) read zeros from xp and are never written out;
        # each input plane is read in order (a large batch comes from memory, and one
        # sequential stream per plane is what the prefetchers follow)
        for k in range(hp * wp * CB):
            xp[U(k)] = zero
        for c in range(cb):
            src = (n * c_all + c0 + c) * h_in
            for r in range(max(0, pt), min(hp, h_in + pt)):
                s = U((src + r - pt) * w_in)
                d = U(r * wp * CB + c)
                for col in range(max(0, pl), min(wp, w_in + pl)):
                    xp[d + U(col * CB)] = xf[s + U(col - pl)]
        for p in range(ho):
            for q in range(wo):
                x0 = U((p * sh * wp + q * sw) * CB)
                a0 = U((p * wo + q) * CB)
                for c in range(CB):
                    v = bias[c]
{taps}
                    acc[a0 + U(c)] = v
        for c in range(cb):  # plane by plane, in order (see the input above)
            base = U((n * c_all + c0 + c) * ho * wo)
            for k in range(ho * wo):
                v = acc[U(k * CB + c)]
                if relu and not (v > zero or v != v):
                    v = zero
                yf[base + U(k)] = v
"""


def source(taps: int) -> str:
    """Python source of the loop for kernels of ``taps`` = kh*kw taps, every tap's
    multiply-add written out (see the module docstring)."""
    unpack = "\n".join(f"    o{k} = offs[{k}]" for k in range(taps))
    lines = "\n".join(f"                    v += wt[U({k * CB}) + U(c)] * xp[x0 + o{k} + U(c)]"
                       for k in range(taps))
    return _SOURCE.format(unpack=unpack, taps=lines).replace("TAPS", str(taps)).replace(
        "CB", str(CB))


_COMPILED: dict = {}
_LOCK = threading.Lock()


def _cache_dir() -> str:
    """Where the generated sources live, so that numba caches their compilations beside them
    (per-user: ``$XDG_CACHE_HOME/singa/depthwise``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "singa", "depthwise")


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _from_file(src: str):
    """``depthwise_taps`` of ``src`` imported from a file named by its hash (written once),
    for numba's on-disk cache: compiling a 5x5 loop takes ~3 s, loading it ~20 ms. None when
    the cache directory cannot be written."""
    name = "singa_depthwise_" + hashlib.sha256(src.encode()).hexdigest()[:16]
    try:
        folder = _cache_dir()
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, name + ".py")
        if not os.path.exists(path) or _read(path) != src:
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(src)
            os.replace(tmp, path)  # whole, even with another process writing it too
    except OSError:
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # numba's cached code refers to its globals by module name
    spec.loader.exec_module(module)
    return module.depthwise_taps


def _loop(taps: int):
    """The compiled loop for ``taps`` taps: once per kernel size and process, from numba's
    disk cache after the first process (see :func:`_from_file`)."""
    with _LOCK:
        fn = _COMPILED.get(taps)
        if fn is None:
            import numba

            src = "import numpy as np\n\nU = np.uint64\n" + source(taps)
            py = _from_file(src)
            cached = py is not None
            if not cached:
                namespace: dict = {}
                exec(compile(src, f"<singa depthwise {taps} taps>", "exec"), namespace)
                py = namespace["depthwise_taps"]
            fn = _COMPILED[taps] = numba.njit(nogil=True, cache=cached)(py)
    return fn


def forward(x, w, b, y, g, relu: bool) -> None:
    """y = depthwise conv(x, w) (+ b), with ``relu`` max(y, 0); geometry ``g`` (see
    :func:`eligible`)."""
    conv(x, w, b, y, (g.sh, g.sw), (g.dh, g.dw), (g.pt, g.pl), relu)


def conv(x, w, b, y, stride, dilation, pads, relu: bool) -> None:
    """y = depthwise conv(x, w) (+ b) of ``w``'s shape (C, 1, kh, kw), with ``relu`` max(y,
    0); ``pads`` the (top, left) padding, negative to crop. Blocks of (image, channels) are
    split across the cores when the call has at least :data:`_threads.PARALLEL_MIN_MACS`
    multiply-adds."""
    has_bias = b is not None
    bias = b if has_bias else np.zeros(1, x.dtype)
    n, c, ho, wo = y.shape
    kh, kw = w.shape[2], w.shape[3]
    loop = _loop(kh * kw)
    run_ranges(lambda lo, hi: loop(x, w, bias, y, has_bias, relu, *stride, *dilation, *pads,
                                   lo, hi),
               n * -(-c // CB), parallel=n * c * ho * wo * kh * kw >= _threads.PARALLEL_MIN_MACS)
