"""2-D max/average pooling and its gradient: numba loops, parallel over (n, c) planes.

Windows are clipped to the input (padding never wins a max) and, for the average's divisor,
to the padded input (count_include_pad) or the input itself; see the Pooling2d declaration.
"""

from __future__ import annotations

import numpy as np
from singa.backend import kernel_attrs, pool2d_geometry

from ._float16 import via_float32
from ._jit import helper
from ._parallel import pjit
from ._threads import num_threads, run_ranges

#: Inputs with fewer elements run on one thread (measured on 2 cores, 2x2 max pooling of 184k
#: elements: 260 us on one thread, 190 us split; the windows make it compute-bound).
PARALLEL_MIN_ITEMS = 1 << 17

prange = range  # numba.prange once compiled (see _parallel.pjit)
U = np.uint64  # unsigned flat indices in the jitted loops (see conv._im2col)


@helper(inline="always")
def _window(i, k, s, pad, size):
    """``(lo, hi)``: the input rows (or columns) ``lo .. hi - 1`` of output row (or column)
    i's window, which starts at ``i * s - pad``, clipped to the input (padding never wins a
    max)."""
    start = i * s - pad
    hi = min(start + k, size)  # before lo: the other order schedules the average loops'
    return max(start, 0), hi  # window arithmetic differently (same values, other code)


@helper(inline="always")
def _padded_length(i, k, s, pad, padded_size):
    """The length of :func:`_window`'s window clipped to the padded input only (its end at
    ``padded_size``, the input's size plus the end padding): the average's divisor with
    count_include_pad."""
    start = i * s - pad
    return min(start + k, padded_size) - start


@helper(inline="always")
def _zero_plane(a, n, c, h_in, w_in):
    """a[n, c] = 0 (an image plane of h_in x w_in)."""
    for h in range(h_in):
        for w in range(w_in):
            a[n, c, h, w] = 0


@helper(inline="always")
def _nanmax(a, b):
    """max(a, b) with a NaN winning (numpy's maximum, PyTorch's max_pool2d); the builtin max
    returns whichever operand its comparison picks."""
    return a if (a > b or a != a) else b


@pjit()
def _max_fwd(x, y, kh, kw, sh, sw, pt, pl):
    """Max pooling, any window: per output row, first the max over the window's rows of every
    input column (branch-free, so it vectorises), then per output the max of those over the
    window's columns. 3x3/stride-2 on 64x112x112 (ResNet's stem): 4.7 ms with the window loops
    of every output, measured."""
    n_, c_, h_in, w_in = x.shape
    ho, wo = y.shape[2], y.shape[3]
    for t in prange(n_ * c_):
        n = t // c_
        c = t - n * c_
        r = np.empty(w_in, x.dtype)
        for p in range(ho):
            h0, h1 = _window(p, kh, sh, pt, h_in)
            for w in range(w_in):
                r[w] = x[n, c, h0, w]
            for h in range(h0 + 1, h1):
                for w in range(w_in):
                    r[w] = _nanmax(x[n, c, h, w], r[w])  # a NaN wins and stays
            for q in range(wo):
                w0, w1 = _window(q, kw, sw, pl, w_in)
                best = r[w0]
                for w in range(w0 + 1, w1):
                    # _nanmax written out: as a call here, the parallel compilation's machine
                    # code differs (the serial one's does not)
                    v = r[w]
                    if v > best or v != v:  # NaN > x is false: the NaN stays
                        best = v
                y[n, c, p, q] = best


@pjit()
def _max_fwd_2x2(x, y, p0, p1):
    """Max pooling with 2x2 windows, stride 2, no padding (the common case), of output rows
    ``p0 .. p1-1``: one pass over two input rows per output row, branch-free, on flat
    unsigned indices (see conv._im2col), so it vectorises (16x faster than _max_fwd's window
    loops on a 64x20x24x24 input, measured)."""
    n_, c_, h_in, w_in = x.shape
    ho, wo = y.shape[2], y.shape[3]
    xf = x.reshape(-1)
    yf = y.reshape(-1)
    for t in prange(n_ * c_):
        for p in range(p0, p1):
            r0 = U((t * h_in + 2 * p) * w_in)
            r1 = r0 + U(w_in)
            o = U((t * ho + p) * wo)
            for q in range(wo):
                i = U(2 * q)
                a, b = xf[r0 + i], xf[r0 + i + U(1)]
                e, f = xf[r1 + i], xf[r1 + i + U(1)]
                yf[o + U(q)] = _nanmax(_nanmax(a, b), _nanmax(e, f))


@pjit()
def _max_bwd(dy, x, dx, kh, kw, sh, sw, pt, pl):
    n_, c_, h_in, w_in = x.shape
    ho, wo = dy.shape[2], dy.shape[3]
    for t in prange(n_ * c_):
        n = t // c_
        c = t - n * c_
        _zero_plane(dx, n, c, h_in, w_in)
        for p in range(ho):
            h0, h1 = _window(p, kh, sh, pt, h_in)
            for q in range(wo):
                w0, w1 = _window(q, kw, sw, pl, w_in)
                best = x[n, c, h0, w0]
                bh, bw = h0, w0
                for h in range(h0, h1):
                    for w in range(w0, w1):
                        v = x[n, c, h, w]
                        if v > best:  # strict: the first maximal cell keeps the gradient
                            best = v
                            bh, bw = h, w
                dx[n, c, bh, bw] += dy[n, c, p, q]


@pjit()
def _max_bwd_2x2(dy, x, dx, relu_mask):
    """Max-pool backward for 2x2 windows, stride 2, no padding (the common case): each image
    plane of dx is zeroed, then each window's gradient is stored at its first maximal cell
    (row-major), whose position is computed branch-free from the comparisons; flat unsigned
    indices. 1.6-2x faster than writing all four cells of every window with selects.

    ``relu_mask``: x is a ReLU's output and dx also takes that ReLU's gradient: the cell that
    gets ``dy`` gets ``dy * (max > 0)``, what ReLUBackward would make of it (every other cell
    stays 0)."""
    n_, c_, h_in, w_in = x.shape
    ho, wo = dy.shape[2], dy.shape[3]
    xf = x.reshape(-1)
    df = dx.reshape(-1)
    gf = dy.reshape(-1)
    zero = dx.dtype.type(0)
    one = dx.dtype.type(1)
    plane = h_in * w_in
    for t in prange(n_ * c_):
        base = U(t * plane)
        for k in range(plane):
            df[base + U(k)] = zero
        for p in range(ho):
            r0 = U((t * h_in + 2 * p) * w_in)
            r1 = r0 + U(w_in)
            o = U((t * ho + p) * wo)
            for q in range(wo):
                i = U(2 * q)
                a, b = xf[r0 + i], xf[r0 + i + U(1)]
                e, f = xf[r1 + i], xf[r1 + i + U(1)]
                m = max(max(a, b), max(e, f))
                # 0, 1, 2, 3: the first of a, b, e, f equal to the maximum (3 if none is: NaN)
                k = U(a != m) * (U(1) + U(b != m) * (U(1) + U(e != m)))
                g = gf[o + U(q)]
                df[r0 + i + (k & U(1)) + (k >> U(1)) * U(w_in)] = (
                    g * (one if m > zero else zero) if relu_mask else g)


@pjit()
def _avg_fwd(x, y, kh, kw, sh, sw, pt, pb, pl, pr, include_pad):
    n_, c_, h_in, w_in = x.shape
    ho, wo = y.shape[2], y.shape[3]
    for t in prange(n_ * c_):
        n = t // c_
        c = t - n * c_
        for p in range(ho):
            h0, h1 = _window(p, kh, sh, pt, h_in)
            for q in range(wo):
                w0, w1 = _window(q, kw, sw, pl, w_in)
                acc = 0.0
                for h in range(h0, h1):
                    for w in range(w0, w1):
                        acc += x[n, c, h, w]
                if include_pad:
                    cnt = (_padded_length(p, kh, sh, pt, h_in + pb)
                           * _padded_length(q, kw, sw, pl, w_in + pr))
                else:
                    cnt = (h1 - h0) * (w1 - w0)
                y[n, c, p, q] = acc / cnt


@pjit()
def _avg_bwd(dy, dx, kh, kw, sh, sw, pt, pb, pl, pr, include_pad):
    n_, c_, h_in, w_in = dx.shape
    ho, wo = dy.shape[2], dy.shape[3]
    for t in prange(n_ * c_):
        n = t // c_
        c = t - n * c_
        _zero_plane(dx, n, c, h_in, w_in)
        for p in range(ho):
            h0, h1 = _window(p, kh, sh, pt, h_in)
            for q in range(wo):
                w0, w1 = _window(q, kw, sw, pl, w_in)
                if include_pad:
                    cnt = (_padded_length(p, kh, sh, pt, h_in + pb)
                           * _padded_length(q, kw, sw, pl, w_in + pr))
                else:
                    cnt = (h1 - h0) * (w1 - w0)
                share = dy[n, c, p, q] / cnt
                for h in range(h0, h1):
                    for w in range(w0, w1):
                        dx[n, c, h, w] += share


def is_2x2_max(g) -> bool:
    """Max pooling with 2x2 windows, stride 2, no padding, floor mode."""
    return (g.is_max and not g.ceil_mode
            and (g.kh, g.kw, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr) == (2, 2, 2, 2, 0, 0, 0, 0))


def max_2x2(x, y, rows=None) -> None:
    """2x2/stride-2 max pooling of contiguous NCHW ``x`` into ``y`` on the calling thread (a
    fused convolution pools each chunk of its output with it); ``rows = (p0, p1)`` pools only
    those output rows (a band of a convolution's output)."""
    p0, p1 = rows if rows is not None else (0, y.shape[2])
    _max_fwd_2x2(x, y, p0, p1)


def max_2x2_serial():
    """The compiled loop of :func:`max_2x2`: ``(x, y, p0, p1)`` (for bound kernels)."""
    return _max_fwd_2x2.serial()


@kernel_attrs(contiguous_inputs=True)
@via_float32
def pooling2d(ins, outs, attrs):
    x, y = ins[0], outs[0]
    g = pool2d_geometry("Pooling2d", x.shape, attrs)
    if is_2x2_max(g):
        def pool(a, b):
            _max_fwd_2x2(a, b, 0, b.shape[2])
    elif g.is_max:
        def pool(a, b):
            _max_fwd(a, b, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)
    else:
        def pool(a, b):
            _avg_fwd(a, b, g.kh, g.kw, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr, g.count_include_pad)
    parallel = x.size >= PARALLEL_MIN_ITEMS
    if x.shape[0] < num_threads() and not is_2x2_max(g):  # batch 1: channel ranges
        run_ranges(lambda lo, hi: pool(x[:, lo:hi], y[:, lo:hi]), x.shape[1], parallel)
    else:  # image ranges (the 2x2 kernel reads its arrays flat: whole images)
        run_ranges(lambda lo, hi: pool(x[lo:hi], y[lo:hi]), x.shape[0], parallel)


@kernel_attrs(contiguous_inputs=True)
@via_float32
def pooling2d_backward(ins, outs, attrs):
    dy, x = ins[0], ins[1]
    dx = outs[0]
    g = pool2d_geometry("Pooling2dBackward", x.shape, attrs)
    if is_2x2_max(g):
        def part(lo, hi):
            _max_bwd_2x2(dy[lo:hi], x[lo:hi], dx[lo:hi], False)
    elif g.is_max:
        def part(lo, hi):
            _max_bwd(dy[lo:hi], x[lo:hi], dx[lo:hi], g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)
    else:
        def part(lo, hi):
            _avg_bwd(dy[lo:hi], dx[lo:hi], g.kh, g.kw, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr,
                     g.count_include_pad)
    run_ranges(part, x.shape[0], x.size >= PARALLEL_MIN_ITEMS)  # image ranges


@kernel_attrs(contiguous_inputs=True)
@via_float32
def pooling2d_backward_relu(ins, outs, attrs):
    """Fused Pooling2dBackward+ReLUBackward (graph mode, see singa.ops.FUSIONS):
    ``dx = pool_backward(dy, x, y) * (r > 0)``, r the ReLU's output. When the pooling reads
    that output (``r`` is ``x``, as in conv -> ReLU -> pool) and is 2x2 max pooling, the mask
    of the one cell that gets a gradient is the window's maximum > 0, applied in the pooling
    gradient's own pass; else the pooling gradient runs, then the mask. Either way the
    arithmetic of the two kernels, so bitwise their result (with a NaN in a window, the fast
    path masks by the window's maximum rather than by the cell that gets the gradient)."""
    *pool_ins, r = ins  # the pooling gradient's (dy, x, y), then the ReLU's output
    dy, x = pool_ins[0], pool_ins[1]
    dx = outs[0]
    g = pool2d_geometry("Pooling2dBackward", x.shape, attrs)
    if is_2x2_max(g) and _same_array(r, x):
        def part(lo, hi):
            _max_bwd_2x2(dy[lo:hi], x[lo:hi], dx[lo:hi], True)

        run_ranges(part, x.shape[0], x.size >= PARALLEL_MIN_ITEMS)
        return
    pooling2d_backward(pool_ins, [dx], attrs)
    np.multiply(dx, r > 0, out=dx)


def _same_array(a, b) -> bool:
    """Whether views ``a`` and ``b`` are the same elements of the same memory."""
    return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


KERNELS = {"Pooling2d": pooling2d, "Pooling2dBackward": pooling2d_backward,
           "Pooling2dBackward+ReLUBackward": pooling2d_backward_relu}
