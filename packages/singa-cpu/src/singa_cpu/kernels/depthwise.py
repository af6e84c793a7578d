"""Depthwise convolution (one input channel per group) as wide rows with every tap written
out.

Each output plane is computed from its own input plane. The plane is copied, zero-padded and
split into sw column phases and sh row phases (phase (a, e) row r column col holds
``x[r*sh + a - pt, col*sw + e - pl]``), rows of width ``wp = Wo + (kw-1)*dw // sw``, as in
:mod:`.grouped`'s wide rows; in that layout tap (i, j) reads phase (i*dh % sh, j*dw % sw) at a
fixed offset ``off[i, j]`` from the *wide* output position k = p*wp + q. The whole plane is
then one loop over k::

    yw[k] = b + w[0, 0] * xp[k + off[0, 0]] + w[0, 1] * xp[k + off[0, 1]] + ...  (every tap)

with the multiply-add of every tap written out in the loop's source (:func:`source`, one loop
per kernel size and column stride): numba vectorises it over k with the sum in a vector
register across the taps and the weights in registers across the plane, where a loop over the
taps loads and stores the whole output once per tap. The columns q >= Wo of ``yw`` are
computed and dropped; the rows of the plane are written out (with the ReLU when fused).

The padding is written once per call: a plane's copy writes only the input's own positions,
which are the same for every plane, so the zeros around them stay. With a column stride the
row is first copied whole into a zero-padded row, then split into its sw phases by a loop
that reads it with stride sw (numba vectorises that as interleaved loads).

The taps are summed in the same order as :mod:`.grouped`'s wide rows, one rounding per product
and per add (numba does not contract them into an FMA: on the AMD Zen 4 measured below an FMA
was not faster, the loop being bound by its loads and vector issue), so both kernels give the
same bits. The generated loops are compiled through a source file in the per-user cache,
which lets numba keep their compilations on disk (:func:`_from_file`).

Measured on one AMD EPYC Zen 4 core (2026-11-26, ``time.thread_time``, best of 7 x 50 calls),
batch 1, ms, the wide rows of :mod:`.grouped` with a loop per tap / this kernel / onnxruntime
1.32 (one-node model, one thread): MobileNetV3-small's 16 x 112x112 3x3 stride 2 0.107 /
0.057 / 0.047, 88 x 28x28 3x3 0.080 / 0.038 / 0.043, 240 x 14x14 5x5 0.135 / 0.077 / 0.052, 288
x 14x14 5x5 stride 2 0.077 / 0.066 / 0.025 (the former channels-last kernel on the 7x7 output),
576 x 7x7 5x5 0.094 / 0.076 / 0.031 (channels-last), 144 x 56x56 3x3 0.365 / 0.206 / 0.202;
16 layers of MobileNetV3/EfficientNet shapes 3.22 / 2.07 / 1.39 ms in all, at batch 8 30.1 /
19.8.
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

#: The wide output is computed in whole vectors of this many elements (no remainder loop).
VECTOR = 16
#: False sends every depthwise layer to :mod:`.grouped`'s wide rows with a loop per tap (the
#: tests compare the two kernels bitwise; ``benchmarks/real_models.py --compare-depthwise``
#: times them side by side).
ENABLED = True


def eligible(g) -> bool:
    """A depthwise layer: one input channel per group (any number of outputs per group)."""
    return ENABLED and g.group > 1 and g.c == g.group


_SOURCE = """
def depthwise_taps(x, w, b, y, has_bias, relu, og, sh, dh, dw, pt, pl, t0, t1):
    c_in, h_in, w_in = x.shape[1], x.shape[2], x.shape[3]
    o_ch, ho, wo = y.shape[1], y.shape[2], y.shape[3]
    kh, kw = w.shape[2], w.shape[3]
    wp = wo + (kw - 1) * dw // SW
    hp = ho + (kh - 1) * dh // sh
    plane = hp * wp
    xf, wf, yf = x.reshape(-1), w.reshape(-1), y.reshape(-1)
    zero = y.dtype.type(0)
    # wide outputs computed: up to the last real one, in whole vectors; the phases are
    # followed by VECTOR zeros for the reads of the last vector's dropped positions
    last = (ho - 1) * wp + wo
    span = -(-last // VECTOR) * VECTOR
    offs = np.empty(TAPS, np.uint64)
    for i in range(kh):
        for j in range(kw):
            ri, cj = i * dh, j * dw
            offs[i * kw + j] = U((((ri % sh) * SW + cj % SW) * hp + ri // sh) * wp + cj // SW)
{unpack}
    xp = np.zeros(sh * SW * plane + VECTOR, y.dtype)
    row = np.zeros(SW * wp, y.dtype)  # one zero-padded input row (column stride > 1)
    yw = np.empty(span, y.dtype)
    c0 = max(0, pl)  # the padded columns [c0, c1) that hold input columns (col - pl)
    c1 = min(SW * wp, w_in + pl)
    for t in range(t0, t1):
        n = t // o_ch
        o = t - n * o_ch
        src = (n * c_in + o // og) * h_in
        for a in range(sh):
            for r in range(hp):
                hs = r * sh + a - pt
                if hs >= 0 and hs < h_in:
                    s = U((src + hs) * w_in - pl)
{copy}
        bias = b[o] if has_bias else zero
        wb = U(o * TAPS)
{weights}
        for k in range(span):
            v = bias
{taps}
            yw[U(k)] = v
        ybase = t * ho * wo
        for p in range(ho):
            for q in range(wo):
                v = yw[U(p * wp + q)]
                if relu and not (v > zero or v != v):
                    v = zero
                yf[U(ybase + p * wo + q)] = v
"""

# the input row into its phase rows: directly without a column stride
_COPY_ROW = """\
                    d = U(a * plane + r * wp)
                    for col in range(c0, c1):
                        xp[d + U(col)] = xf[s + U(col)]"""
# with one: the padded row first, then one strided read per phase
_COPY_PHASES = """\
                    for col in range(c0, c1):
                        row[U(col)] = xf[s + U(col)]
                    d = U(a * SW * plane + r * wp)
                    for col in range(wp):
{phases}"""


def source(taps: int, sw: int = 1) -> str:
    """Python source of the loop for kernels of ``taps`` = kh*kw taps and column stride
    ``sw``, every tap's multiply-add written out (see the module docstring)."""
    unpack = "\n".join(f"    o{k} = offs[{k}]" for k in range(taps))
    weights = "\n".join(f"        w{k} = wf[wb + U({k})]" for k in range(taps))
    lines = "\n".join(f"            v += w{k} * xp[U(k) + o{k}]" for k in range(taps))
    if sw == 1:
        copy = _COPY_ROW
    else:
        copy = _COPY_PHASES.format(phases="\n".join(
            f"                        xp[d + U({e} * plane + col)] = row[U(col * SW + {e})]"
            for e in range(sw)))
    return (_SOURCE.format(unpack=unpack, copy=copy, weights=weights, taps=lines)
            .replace("TAPS", str(taps)).replace("SW", str(sw)).replace("VECTOR", str(VECTOR)))


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


def _loop(taps: int, sw: int):
    """The compiled loop for ``taps`` taps and column stride ``sw``: once per kernel size,
    stride and process, from numba's disk cache after the first process (see
    :func:`_from_file`)."""
    with _LOCK:
        fn = _COMPILED.get((taps, sw))
        if fn is None:
            import numba

            src = "import numpy as np\n\nU = np.uint64\n" + source(taps, sw)
            py = _from_file(src)
            cached = py is not None
            if not cached:
                namespace: dict = {}
                exec(compile(src, f"<singa depthwise {taps} taps stride {sw}>", "exec"),
                     namespace)
                py = namespace["depthwise_taps"]
            fn = _COMPILED[(taps, sw)] = numba.njit(nogil=True, cache=cached)(py)
    return fn


def forward(x, w, b, y, g, relu: bool) -> None:
    """y = depthwise conv(x, w) (+ b), with ``relu`` max(y, 0); geometry ``g`` (see
    :func:`eligible`)."""
    conv(x, w, b, y, (g.sh, g.sw), (g.dh, g.dw), (g.pt, g.pl), relu)


def conv(x, w, b, y, stride, dilation, pads, relu: bool) -> None:
    """y = depthwise conv(x, w) (+ b) of ``w``'s shape (O, 1, kh, kw) over x's C channels (O
    a multiple of C: output channel o reads input channel o // (O/C)), with ``relu`` max(y,
    0); ``pads`` the (top, left) padding, negative to crop. The output planes are split
    across the cores when the call has at least :data:`_threads.PARALLEL_MIN_MACS`
    multiply-adds."""
    has_bias = b is not None
    bias = b if has_bias else np.zeros(1, x.dtype)
    n, o, ho, wo = y.shape
    kh, kw = w.shape[2], w.shape[3]
    og = o // x.shape[1]
    loop = _loop(kh * kw, stride[1])
    run_ranges(lambda lo, hi: loop(x, w, bias, y, has_bias, relu, og, stride[0], *dilation,
                                   *pads, lo, hi),
               n * o, parallel=n * o * ho * wo * kh * kw >= _threads.PARALLEL_MIN_MACS)
