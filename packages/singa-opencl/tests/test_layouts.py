"""Strided, offset and broadcast views give the same results as contiguous copies, and the
large-size paths (two-stage reductions, GEMM tile edges, batched GEMM, chunked convolution)
match numpy."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import to_device
from singa import _math
from singa.ops import OPS, run

RNG = np.random.default_rng(7)


def views(dev):
    """(name, strided CTensor view, the same values as numpy)."""
    base = RNG.standard_normal((6, 9, 8)).astype(np.float32)
    t = to_device(base, dev)
    yield "transpose", _math.transpose(t, (2, 0, 1)), base.transpose(2, 0, 1)
    yield "slice", _math.slice_view(t, [1, 2, 1], [5, 9, 8], [2, 3, 2]), base[1:5:2, 2:9:3, 1:8:2]
    row = base[0, 0]
    yield "broadcast", _math.broadcast_to(to_device(row, dev), (3, 5, 8)), \
        np.broadcast_to(row, (3, 5, 8))


@pytest.mark.parametrize("fn,ref", [
    (_math.exp, np.exp),
    (_math.relu, lambda x: np.maximum(x, 0)),
    (lambda x: _math.mul(x, x), lambda x: x * x),
    (lambda x: _math.add(x, 1.5), lambda x: x + 1.5),
    (lambda x: _math.sum(x, (1,)), lambda x: x.sum(1)),
    (lambda x: _math.reduce_max(x, (0, 2), True), lambda x: x.max((0, 2), keepdims=True)),
    (lambda x: _math.softmax(x, 1), lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True)),
    (lambda x: _math.argmax(x, 2), lambda x: x.argmax(2)),
    (_math.copy, np.array),
])
def test_strided_inputs_match_contiguous(cl_device, fn, ref):
    for name, view, host in views(cl_device):
        got = fn(view).to_numpy()
        same = fn(_math.copy(view)).to_numpy()
        np.testing.assert_allclose(got, same, rtol=1e-6, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(got, ref(host.astype(np.float64)), rtol=1e-5, atol=1e-5,
                                   err_msg=name)


def test_strided_output_leaves_surroundings_alone(cl_device):
    base = np.zeros((4, 6), np.float32)
    t = to_device(base, cl_device)
    dst = _math.slice_view(t, [0, 1], [4, 6], [2, 2])
    src = to_device(np.ones((2, 3), np.float32), cl_device)
    run(OPS["Copy"], [src], {}, [dst])
    want = base.copy()
    want[0:4:2, 1:6:2] = 1
    np.testing.assert_array_equal(t.to_numpy(), want)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (13, 7, 33), (100, 257, 65), (300, 64, 1)])
@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True)])
def test_gemm_edges_and_transposes(cl_device, m, k, n, ta, tb):
    a = RNG.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = RNG.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c = RNG.standard_normal((n,)).astype(np.float32)
    out = _math.gemm(to_device(a, cl_device), to_device(b, cl_device),
                     to_device(c, cl_device), 0.5, 2.0, ta, tb).to_numpy()
    want = 0.5 * ((a.T if ta else a) @ (b.T if tb else b)) + 2.0 * c
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


def test_batched_broadcast_matmul(cl_device):
    a = RNG.standard_normal((2, 1, 5, 7)).astype(np.float32)
    b = RNG.standard_normal((3, 7, 4)).astype(np.float32)
    got = _math.matmul(to_device(a, cl_device), to_device(b, cl_device)).to_numpy()
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-5)


def test_two_stage_reductions(cl_device):
    x = RNG.standard_normal((3, 50000)).astype(np.float32)
    t = to_device(x, cl_device)
    np.testing.assert_allclose(_math.sum(t, (1,)).to_numpy(), x.sum(1, dtype=np.float64),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(_math.reduce_min(t).to_numpy(), x.min())
    np.testing.assert_allclose(_math.nrm2(t).to_numpy(), np.linalg.norm(x), rtol=1e-5)


@pytest.mark.parametrize("attrs,wshape", [
    ({"stride": (2, 1), "pads": (1, 0, 1, 1), "group": 2}, (6, 2, 3, 3)),  # columns + col2im
    ({"pads": (2, 0, 1, 3), "dilation": (2, 1), "group": 2}, (4, 2, 3, 3)),  # flipped conv
    ({"pads": (3, 3, 0, 0)}, (5, 4, 2, 2)),  # flipped, padding larger than the kernel
])
def test_convolution_in_image_chunks(cl_device, monkeypatch, attrs, wshape):
    from singa_opencl.kernels import conv

    monkeypatch.setattr(conv, "WORKSPACE_BYTES", 4096)  # force one image per chunk
    x = RNG.standard_normal((3, 4, 9, 8)).astype(np.float32)
    w = RNG.standard_normal(wshape).astype(np.float32)
    op = OPS["Conv2d"]
    y = run(op, [to_device(x, cl_device), to_device(w, cl_device)], attrs)[0].to_numpy()
    np.testing.assert_allclose(y, op.reference(x.astype(np.float64), w.astype(np.float64),
                                               **attrs), rtol=1e-4, atol=1e-4)
    dy = RNG.standard_normal(y.shape).astype(np.float32)
    for name, args, extra in (("Conv2dBackwardX", (dy, w), {"x_shape": x.shape}),
                              ("Conv2dBackwardW", (dy, x), {"w_shape": w.shape})):
        op = OPS[name]
        got = run(op, [to_device(a, cl_device) for a in args], {**attrs, **extra})[0]
        want = op.reference(*(a.astype(np.float64) for a in args), **attrs, **extra)
        np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("inplace", [False, True])
def test_gemm_long_k_in_chunks(cl_device, monkeypatch, inplace):
    from singa_opencl.kernels import linalg

    monkeypatch.setattr(linalg, "K_CHUNK", 64)  # 200 = 64 + 64 + 64 + 8
    a = RNG.standard_normal((37, 200)).astype(np.float32)
    b = RNG.standard_normal((200, 45)).astype(np.float32)
    c = RNG.standard_normal((37, 45)).astype(np.float32)
    tc = to_device(c, cl_device)
    out = _math.gemm(to_device(a, cl_device), to_device(b, cl_device), tc, 1.5, 0.5,
                     out=tc if inplace else None)
    np.testing.assert_allclose(out.to_numpy(), 1.5 * (a @ b) + 0.5 * c, rtol=1e-4, atol=1e-4)
    y16 = _math.matmul(to_device(a.astype(np.float16), cl_device),
                       to_device(b.astype(np.float16), cl_device)).to_numpy()
    np.testing.assert_allclose(y16, a.astype(np.float16).astype(np.float32)
                               @ b.astype(np.float16).astype(np.float32), rtol=2e-2, atol=0.2)


def test_long_strided_rows(cl_device):
    # rows longer than one segment of the nd kernels (32 elements), with a partial last one
    a = RNG.standard_normal((70, 5, 3)).astype(np.float32)
    b = RNG.standard_normal((70,)).astype(np.float32)
    ta = _math.transpose(to_device(a, cl_device), (2, 1, 0))  # (3, 5, 70), inner stride 15
    got = _math.add(ta, to_device(b, cl_device)).to_numpy()
    np.testing.assert_allclose(got, a.transpose(2, 1, 0) + b, rtol=1e-6)
    np.testing.assert_allclose(_math.copy(ta).to_numpy(), a.transpose(2, 1, 0))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_blocked_transpose_copies(cl_device, dtype):
    a = (RNG.standard_normal((3, 40, 33)) * 10).astype(dtype)
    t = to_device(a, cl_device)
    for axes in ((0, 2, 1), (2, 1, 0), (1, 0, 2)):
        got = _math.copy(_math.transpose(t, axes)).to_numpy()
        np.testing.assert_array_equal(got, a.transpose(axes))
    rev = _math.slice_view(t, [2, 39, 0], [0, 2, 33], [-1, -2, 1])  # negative strides
    np.testing.assert_array_equal(_math.copy(_math.transpose(rev, (0, 2, 1))).to_numpy(),
                                  a[2:0:-1, 39:2:-2, :].transpose(0, 2, 1))
