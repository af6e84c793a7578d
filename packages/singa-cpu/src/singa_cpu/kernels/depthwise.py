"""Direct convolution with every tap written out: depthwise layers (one input channel per
group), and layers with few taps and outputs per group (a network's stem on RGB images).

Each group's input planes are copied, zero-padded and split into sw column phases and sh row
phases (channel c, phase (a, e), row r, column col holds ``x[c, r*sh + a - pt, col*sw + e -
pl]``), rows of width ``wp = Wo + (kw-1)*dw // sw``, as in :mod:`.grouped`'s wide rows; in
that layout tap (c, i, j) reads phase (c, i*dh % sh, j*dw % sw) at a fixed offset ``off[c, i,
j]`` from the *wide* output position k = p*wp + q. An output plane is then one loop over k::

    yw[k] = b + w[0] * xp[k + off[0]] + w[1] * xp[k + off[1]] + ...  (every tap, in order)

with the multiply-add of every tap written out in the loop's source (:func:`source`, one loop
per tap count, column stride and block): numba vectorises it over k with the sum in a vector
register across the taps and the weights in registers across the plane, where a loop over the
taps loads and stores the whole output once per tap. A block of ``ob`` output channels of one
group (:func:`block`: 4, 2 or 1) is computed in the same loop, each input vector read once for
all of them. The columns q >= Wo of ``yw`` are computed and dropped; the rows of each plane
are written out (with the ReLU when fused; a fused HardSwish is applied to the wide plane,
see :func:`source`).

The padding is written once per call: a plane's copy writes only the input's own positions,
which are the same for every plane, so the zeros around them stay; a group's planes are copied
once for all its outputs. With a column stride the row is first copied whole into a
zero-padded row, then split into its sw phases by a loop that reads it with stride sw;
float32 rows of even width with a column stride of 2 (the stride-2 layers of MobileNetV3 and
EfficientNet, their stems) skip that row: each pair of input columns is read as one 64-bit
word and its two halves stored in the two phases (the same bits, in whole vectors), which
cut the stride-2 layers to 0.60-0.84x of their time (2026-11-27, batch 1, one thread,
ms before / after / onnxruntime one-node: 96 x 112x112 3x3 0.438 / 0.286 / 0.558, 240 x
28x28 3x3 0.121 / 0.073 / 0.057, 672 x 14x14 5x5 0.166 / 0.128 / 0.063, 72 x 56x56 3x3
0.090 / 0.057 / 0.066).

The taps are summed in the same order as :mod:`.grouped`'s wide rows, one rounding per product
and per add (numba does not contract them into an FMA: on the AMD Zen 4 measured below an FMA
was not faster, the loop being bound by its loads and vector issue), so both kernels give the
same bits, whatever the block. The generated loops are compiled through a source file in the
per-user cache, which lets numba keep their compilations on disk (:func:`_from_file`).

Measured on one AMD EPYC Zen 4 core (2026-11-26, ``time.thread_time``, best of 7 x 50 calls),
depthwise layers at batch 1, ms, the wide rows of :mod:`.grouped` with a loop per tap (the
channels-last kernel this replaced, on 7x7 outputs) / this kernel / onnxruntime 1.32 (one-node
model, one thread): MobileNetV3-small's 16 x 112x112 3x3 stride 2 0.107 / 0.057 / 0.047, 88 x
28x28 3x3 0.080 / 0.038 / 0.043, 240 x 14x14 5x5 0.135 / 0.077 / 0.052, 288 x 14x14 5x5
stride 2 0.077 / 0.066 / 0.025, 576 x 7x7 5x5 0.094 / 0.076 / 0.031; 144 x 56x56 3x3 0.365 /
0.206 / 0.202; 16 layers of MobileNetV3/EfficientNet shapes 3.22 / 2.07 / 1.39 ms in all, at
batch 8 30.1 / 19.8. Stems: see :data:`MAX_DENSE_OUTPUTS`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import textwrap
import threading

import numpy as np

from . import _threads
from ._jit import compilable
from ._threads import run_ranges

U = np.uint64  # unsigned flat indices: signed ones keep numba from vectorising (see conv)

#: The activation a convolution kernel applies as it writes its output (its ``act``
#: argument): none, ReLU (``max(v, 0)``, NaN kept: the ReLU kernel's), HardSwish (the
#: HardSwish kernel's :func:`.elementwise.hard_swish_scalar`). Fused kernels give the bits of
#: the convolution followed by the activation's own kernel.
ACT_NONE, ACT_RELU, ACT_HARDSWISH = 0, 1, 2

#: The wide output is computed in whole vectors of this many elements (no remainder loop).
VECTOR = 16
#: False sends every depthwise layer to :mod:`.grouped`'s wide rows with a loop per tap (the
#: tests compare the two kernels bitwise; ``benchmarks/real_models.py --compare-depthwise``
#: times them side by side).
ENABLED = True
#: False copies float32 rows with column stride 2 through the padded row (see _COPY_PAIRS).
PAIRS = True


#: Other layers take this kernel when a group has at most this many taps (C/group * kh * kw:
#: a 3x3 stem on RGB images, a 5x5 layer on one channel) and at most MAX_DENSE_OUTPUTS
#: outputs. Past 27 taps the block's weights no longer stay in registers (a 4x4 stem on RGB,
#: 48 taps: 1.35x slower than im2col + GEMM with blocks of 2 outputs, 7.8x with 4).
MAX_DENSE_TAPS = 27
#: im2col + GEMM catches up with more outputs per group, its GEMM longer. Measured on one AMD
#: Zen 4 core (2026-11-26, one-node models, this kernel / im2col + GEMM, batch 1 and 8): 3x3
#: stride 2 stems on 224x224 RGB with 16 outputs (MobileNetV3) 0.65 / 0.64, 24 (ShuffleNetV2)
#: 0.77 / 0.83, 32 (EfficientNet) 0.86 / 0.86; 3x3 on 32x32 RGB with 64 outputs 0.75 / 0.89;
#: 5x5 on 28x28, one channel, 20 outputs 0.63 / 0.96; but 3x3 on 56x56 with 2 channels and
#: 64 outputs 1.15 / 1.01, 3x3 on 64x64 RGB with 128 outputs 1.04 / 0.97.
MAX_DENSE_OUTPUTS = 32


def eligible(g) -> bool:
    """A depthwise layer: one input channel per group (any number of outputs per group)."""
    return ENABLED and g.group > 1 and g.c == g.group


def eligible_dense(g) -> bool:
    """A layer with few taps and outputs per group (see MAX_DENSE_TAPS): a network's stem."""
    return (ENABLED and g.c // g.group * g.kh * g.kw <= MAX_DENSE_TAPS
            and g.o // g.group <= MAX_DENSE_OUTPUTS)


def block(g) -> int:
    """Output channels computed per pass over a group's input planes: 4, 2 or 1, dividing
    the outputs per group (each input read once for the block; a depthwise layer has one)."""
    og = g.o // g.group
    return 4 if og % 4 == 0 else 2 if og % 2 == 0 else 1


_SOURCE = """
def depthwise_taps(x, w, b, y, has_bias, act, og, sh, dh, dw, pt, pl, xu, pairs, t0, t1):
    c_in, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    o_ch, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    wp = wo + (kw - 1) * dw // SW
    hp = ho + (kh - 1) * dh // sh
    plane = hp * wp
    xf, wf, yf = x.reshape(-1), w.reshape(-1), y.reshape(-1)
    ftype = y.dtype.type
    zero = ftype(0)
    # wide outputs computed: up to the last real one, in whole vectors; the phases are
    # followed by VECTOR zeros for the reads of the last vector's dropped positions
    last = (ho - 1) * wp + wo
    span = -(-last // VECTOR) * VECTOR
    offs = np.empty(TAPS, np.uint64)
    for c in range(cg):
        for i in range(kh):
            for j in range(kw):
                ri, cj = i * dh, j * dw
                offs[(c * kh + i) * kw + j] = U(((((c * sh + ri % sh) * SW + cj % SW) * hp
                                                  + ri // sh) * wp + cj // SW))
{unpack}
    xp = np.zeros(cg * sh * SW * plane + VECTOR, y.dtype)
    # float32 with column stride 2 (pairs): xp's words, written from x's pairs of columns
    xpu = xp.view(np.uint32) if pairs else np.zeros(1, np.uint32)
    # pairs (x[2m], x[2m+1]) -> columns m + pl // 2 of phase pl % 2 and m + (pl + 1) // 2 of
    # the other, for m < mhi (both inside the row); input columns from 2 * mhi one by one
    mhi = max(0, min(w_in // 2, wp - (pl + 1) // 2))
    e0, e1 = U((pl % 2) * plane + pl // 2), U((1 - pl % 2) * plane + (pl + 1) // 2)
    lo = U(0xFFFFFFFF)
    row = np.zeros(SW * wp, y.dtype)  # one zero-padded input row (column stride > 1)
    yw = np.empty(OB * span, y.dtype)
    c0 = max(0, pl)  # the padded columns [c0, c1) that hold input columns (col - pl)
    c1 = min(SW * wp, w_in + pl)
    filled = -1  # the first input channel of the planes in xp
    blocks = o_ch // OB
    for t in range(t0, t1):  # blocks of OB output planes of one group
        n = t // blocks
        o = (t - n * blocks) * OB
        first = n * c_in + o // og * cg
        if first != filled:  # the group's planes, once for its og outputs
            filled = first
            for c in range(cg):
                for a in range(sh):
                    for r in range(hp):
                        hs = r * sh + a - pt
                        if hs >= 0 and hs < h_in:
                            s = U(((first + c) * h_in + hs) * w_in - pl)
{copy}
{weights}
        for k in range(span):
{taps}
        for m in range(OB):
            ybase = (n * o_ch + o + m) * ho * wo
            for p in range(ho):
                src, dst = U(m * span + p * wp), U(ybase + p * wo)
                if act == ACT_RELU:
                    for q in range(wo):
                        yf[dst + U(q)] = relu_scalar(yw[src + U(q)], zero)
                else:
                    for q in range(wo):
                        yf[dst + U(q)] = yw[src + U(q)]
"""

# the input row into its phase rows: directly without a column stride
_COPY_ROW = """\
                            d = U((c * sh + a) * plane + r * wp)
                            for col in range(c0, c1):
                                xp[d + U(col)] = xf[s + U(col)]"""
# with a column stride of 2, float32 rows of even width (``pairs``): each pair of input
# columns read as one 64-bit word, its halves stored in the two phases (the same bits)
_COPY_PAIRS = """\
                            if pairs:
                                d = U((c * sh + a) * SW * plane + r * wp)
                                su = U((((first + c) * h_in + hs) * w_in) // 2)
                                for m in range(mhi):
                                    v = xu[su + U(m)]
                                    xpu[d + e0 + U(m)] = np.uint32(v & lo)
                                    xpu[d + e1 + U(m)] = np.uint32(v >> U(32))
                                for ic in range(2 * mhi, w_in):
                                    pc = ic + pl
                                    if pc < SW * wp:
                                        xp[d + U((pc % 2) * plane + pc // 2)] = xf[s + U(pc)]
                            else:
"""
# with one: the padded row first, then one strided read per phase
_COPY_PHASES = """\
                            for col in range(c0, c1):
                                row[U(col)] = xf[s + U(col)]
                            d = U((c * sh + a) * SW * plane + r * wp)
                            for col in range(wp):
{phases}"""


def _phases(sw: int) -> str:
    return _COPY_PHASES.format(phases="\n".join(
        f"                                xp[d + U({e} * plane + col)] = row[U(col * SW + {e})]"
        for e in range(sw)))


def source(taps: int, sw: int = 1, ob: int = 1, hard_swish: bool = False) -> str:
    """Python source of the loop for kernels of ``taps`` = (C/group)*kh*kw taps, column stride
    ``sw`` and blocks of ``ob`` output channels, every tap's multiply-add written out (see
    the module docstring); with ``hard_swish``, each sum's HardSwish stored in its place
    (:data:`ACT_HARDSWISH`; the loop's ``act`` is then ignored). The HardSwish goes in the
    loop over the wide plane, which is long and vectorised, rather than in the rows written
    out: a 14x14 map's rows are shorter than a vector, and their per-element branches made
    the fused layer slower than the convolution and the HardSwish kernel after it."""
    unpack = "\n".join(f"    o{k} = offs[{k}]" for k in range(taps))
    weights = "\n".join(
        f"        bias{m} = b[o + {m}] if has_bias else zero\n"
        f"        wb{m} = U((o + {m}) * TAPS)" for m in range(ob))
    # the weights as loop invariants (numba keeps them in registers as far as they go);
    # each input read once for the block's outputs
    weights += "\n" + "\n".join(f"        w{m}_{k} = wf[wb{m} + U({k})]"
                                  for m in range(ob) for k in range(taps))
    lines = [f"            v{m} = bias{m}" for m in range(ob)]
    for k in range(taps):
        lines.append(f"            xv = xp[U(k) + o{k}]")
        lines += [f"            v{m} += w{m}_{k} * xv" for m in range(ob)]
    if hard_swish:
        lines += [f"            v{m} = hard_swish_scalar(v{m}, ftype)" for m in range(ob)]
    lines += [f"            yw[U({m} * span) + U(k)] = v{m}" for m in range(ob)]
    if sw == 1:
        copy = _COPY_ROW
    elif sw == 2:
        copy = _COPY_PAIRS + textwrap.indent(_phases(sw), "    ")
    else:
        copy = _phases(sw)
    return (_SOURCE.format(unpack=unpack, copy=copy, weights=weights, taps="\n".join(lines))
            .replace("TAPS", str(taps)).replace("SW", str(sw)).replace("VECTOR", str(VECTOR))
            .replace("OB", str(ob)))


#: What the generated loops import: the activations' constants and the HardSwish that
#: :mod:`.elementwise` writes (a helper: compiled into the loop, its digest in the loop's
#: cache name, see :func:`._jit.compilable`).
_HEADER = f"""import numpy as np

from {__package__}.depthwise import ACT_RELU
from {__package__}.elementwise import hard_swish_scalar, relu_scalar

U = np.uint64
"""
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


def _loop(taps: int, sw: int, ob: int, hard_swish: bool = False):
    """The compiled loop of :func:`source`: once per process, from numba's disk cache after
    the first process (see :func:`_from_file`)."""
    key = (taps, sw, ob, hard_swish)
    with _LOCK:
        fn = _COMPILED.get(key)
        if fn is None:
            import numba

            src = _HEADER + source(*key)
            py = _from_file(src)
            cached = py is not None
            if not cached:
                namespace: dict = {}
                name = (f"<singa depthwise {taps} taps stride {sw} block {ob}"
                        f"{' hardswish' if hard_swish else ''}>")
                exec(compile(src, name, "exec"), namespace)
                py = namespace["depthwise_taps"]
            fn = _COMPILED[key] = numba.njit(nogil=True, cache=cached)(compilable(py))
    return fn


def forward(x, w, b, y, g, act: int) -> None:
    """y = act(conv(x, w) (+ b)) (``act``: :data:`ACT_NONE`, ...); geometry ``g`` (see
    :func:`eligible`, :func:`eligible_dense`)."""
    prepared(x, w, b, y, g, act)()


def prepared(x, w, b, y, g, act: int):
    """:func:`forward` on exactly these arrays as a function of no arguments, the loop and
    its arguments resolved here (a graph's bound kernel builds it once per plan)."""
    return planned(x, w, b, y, (g.sh, g.sw), (g.dh, g.dw), (g.pt, g.pl), act, block(g))


def conv(x, w, b, y, stride, dilation, pads, act: int, ob: int = 1) -> None:
    """y = act(conv(x, w) (+ b)): :func:`planned`'s call, run once."""
    planned(x, w, b, y, stride, dilation, pads, act, ob)()


def planned(x, w, b, y, stride, dilation, pads, act: int, ob: int = 1):
    """y = act(conv(x, w) (+ b)) of ``w``'s shape (O, C/group, kh, kw) over x's C channels
    (output channel o reads the group of input channels o // (O/group)), ``act`` one of
    :data:`ACT_NONE`, :data:`ACT_RELU`, :data:`ACT_HARDSWISH`, as a function of no
    arguments; ``pads`` the (top, left) padding, negative to crop; ``ob`` output channels of
    a group at a time (a divisor of O/group). The blocks of output planes are split across
    the cores when the call has at least
    :data:`_threads.PARALLEL_MIN_MACS` multiply-adds (the split does not change the bits:
    each block is computed alone)."""
    has_bias = b is not None
    bias = b if has_bias else np.zeros(1, x.dtype)
    n, o, ho, wo = y.shape
    cg, kh, kw = w.shape[1], w.shape[2], w.shape[3]
    og = o // (x.shape[1] // cg)  # outputs per group
    loop = _loop(cg * kh * kw, stride[1], ob, act == ACT_HARDSWISH)
    # a pair's even column is the word's low half on a little-endian machine only
    pairs = (PAIRS and stride[1] == 2 and x.dtype == np.float32 and x.flags.c_contiguous
             and x.shape[3] % 2 == 0 and pads[1] >= 0 and x.ctypes.data % 8 == 0
             and sys.byteorder == "little")
    xu = x.reshape(-1).view(np.uint64) if pairs else np.zeros(1, np.uint64)
    args = (x, w, bias, y, has_bias, int(act), og, stride[0], *dilation, *pads, xu, pairs)
    items = n * o // ob
    parallel = n * o * ho * wo * cg * kh * kw >= _threads.PARALLEL_MIN_MACS
    return lambda: run_ranges(lambda lo, hi: loop(*args, lo, hi), items, parallel=parallel)
