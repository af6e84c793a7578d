"""The fused convolutions of graph mode (``Conv2d+ReLU``, ``Conv2d+ReLU+Pooling2d``) on the
host build of ``cu/epilogue.cu``, driven by the GPU's own launchers: bit for bit (compared as
unsigned integers, so signed zeros and NaN payloads count) what the unfused kernels give one
after the other, the Conv2d kernel, then the ReLU epilogue, then ``pool.cu``'s Pooling2d, on
inputs with NaN, -0.0 and +-inf; and the ReLU epilogue computes cupy's ``maximum(y, 0)``
formula (the unfused ReLU on the GPU), whose NaN is ``__int_as_float(0x7fffffff)``. The
conformance kit checks the same fused kernels against the shared ReLU on numpy
(``test_cu_on_host.py``)."""

from __future__ import annotations

import numpy as np
import pytest
from hostcu import HostModules, compiler

from singa_cuda import cu_kernels
from singa_cuda.xp import numpy_module
from singa_cuda.xp.conv import kernels as shared_conv
from singa_cuda.xp.elementwise import kernels as shared_elementwise

pytestmark = pytest.mark.skipif(compiler() is None,
                                reason="no C++ compiler (g++) to build the .cu kernels")
UINT = {np.float16: np.uint16, np.float32: np.uint32, np.float64: np.uint64}
DTYPES = [np.float32, np.float16, np.float64]


class _HostDevice:
    am = numpy_module()


@pytest.fixture(scope="module")
def table():
    return cu_kernels.kernels(_HostDevice(), modules=HostModules(),
                              conv=shared_conv(numpy_module())["Conv2d"])


def bits(a):
    return np.ascontiguousarray(a).view(UINT[a.dtype.type])


def special_values(rng, shape, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    flat = x.reshape(-1)
    pick = rng.choice(flat.size, size=max(1, flat.size // 6), replace=False)
    flat[pick] = rng.choice(np.array([np.nan, -0.0, 0.0, np.inf, -np.inf], dtype), pick.size)
    return x


def relu_epilogue(y):
    HostModules().launch("epilogue.cu", f"relu_{cu_kernels.SUFFIX[y.dtype.name]}", y.size,
                         (y, np.int64(y.size)))


POOLS = [
    dict(kernel=(2, 2), stride=(2, 2), mode="max"),               # disjoint: the one-pass kernel
    dict(kernel=(2, 3), stride=(3, 3), pads=(0, 1, 1, 0), mode="avg"),  # disjoint, gaps + pads
    dict(kernel=(3, 3), stride=(2, 2), pads=(1, 1, 1, 1), mode="max"),  # overlapping
    dict(kernel=(2, 2), stride=(1, 1), mode="avg"),               # overlapping
]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_relu_epilogue_is_cupys_maximum_formula(dtype):
    rng = np.random.default_rng(1)
    y = special_values(rng, (5, 7, 3), dtype)
    want = np.maximum(y, dtype(0))
    # cupy: isnan(v) ? out0_type(NAN) : max(v, 0) with NAN the float 0x7fffffff
    want[np.isnan(y)] = np.array([0x7FFFFFFF], np.uint32).view(np.float32)[0].astype(dtype)
    got = y.copy()
    relu_epilogue(got)
    nan = np.isnan(y)
    np.testing.assert_array_equal(bits(got)[nan], bits(want)[nan])  # the canonical NaN
    # zeros: fmaxf's sign of max(-0, 0) is the GPU's, not checked here; values are
    np.testing.assert_array_equal(got[~nan], want[~nan])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_conv_relu_is_conv_then_relu_bitwise(table, dtype, bias):
    rng = np.random.default_rng(2)
    x = special_values(rng, (2, 3, 9, 8), dtype)
    ins = [x, rng.standard_normal((4, 3, 3, 3)).astype(dtype)]
    if bias:
        ins.append(rng.standard_normal(4).astype(dtype))
    attrs = dict(stride=(1, 1), pads=(1, 1, 1, 1))
    want = np.empty((2, 4, 9, 8), dtype)
    shared_conv(numpy_module())["Conv2d"](ins, [want], attrs)
    relu_epilogue(want)
    got = np.full_like(want, 7)
    table["Conv2d+ReLU"](ins, [got], attrs)
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
@pytest.mark.parametrize("pool", POOLS, ids=lambda p: f"{p['mode']}{p['kernel']}s{p['stride']}")
@pytest.mark.parametrize("hw", [(8, 8), (9, 7)], ids=["even", "odd"])
def test_conv_relu_pool_is_the_three_kernels_bitwise(table, dtype, pool, hw):
    rng = np.random.default_rng(3)
    h, w = hw
    x = special_values(rng, (2, 2, h, w), dtype)
    ins = [x, rng.standard_normal((3, 2, 3, 3)).astype(dtype), rng.standard_normal(3).astype(dtype)]
    attrs = dict(stride=(1, 1), pads=(1, 1, 1, 1))
    y_want = np.empty((2, 3, h, w), dtype)
    shared_conv(numpy_module())["Conv2d"](ins, [y_want], attrs)
    relu_epilogue(y_want)
    geom = cu_kernels.pool_geom(y_want.shape, pool)
    p_want = np.empty((2, 3, int(geom["ho"][0]), int(geom["wo"][0])), dtype)
    table["Pooling2d"]([y_want], [p_want], pool)
    y_got, p_got = np.full_like(y_want, 7), np.full_like(p_want, 7)
    table["Conv2d+ReLU+Pooling2d"](ins, [y_got, p_got], {**attrs, "second": pool})
    np.testing.assert_array_equal(bits(y_got), bits(y_want))  # the kept ReLU output
    np.testing.assert_array_equal(bits(p_got), bits(p_want))


def test_disjoint_windows_decides_the_one_pass_kernel():
    def disjoint(**pool):
        return cu_kernels.disjoint_windows(cu_kernels.pool_geom((1, 1, 9, 9), pool))

    assert disjoint(kernel=(2, 2), stride=(2, 2), mode="max")
    assert disjoint(kernel=(2, 3), stride=(3, 3), mode="avg")
    assert not disjoint(kernel=(3, 3), stride=(2, 2), mode="max")
    assert not disjoint(kernel=(2, 2), stride=(2, 1), mode="max")


# ---------------------------------------------- elementwise.cu: ReLUBackward and Add+ReLU


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_add_relu_is_the_shared_add_then_the_relu_bitwise(table, dtype):
    rng = np.random.default_rng(5)
    a, b = special_values(rng, (4, 33, 7), dtype), special_values(rng, (4, 33, 7), dtype)
    want = a + b  # the shared Add: numpy's, correctly rounded in every dtype
    relu_epilogue(want)  # the GPU's ReLU (test_relu_epilogue_is_cupys_maximum_formula)
    got = np.empty_like(a)
    table["Add+ReLU"]([a, b], [got], {})
    np.testing.assert_array_equal(bits(got), bits(want))
    inplace = a.copy()  # the output over its first input, as graph mode's in-place reuse runs it
    table["Add+ReLU"]([inplace, b], [inplace], {})
    np.testing.assert_array_equal(bits(inplace), bits(want))


def test_add_relu_wraps_int32_as_the_shared_add(table):
    big = np.array([2**31 - 1, -5, 7, -(2**31)], np.int32)
    one = np.array([1, 3, -9, -1], np.int32)
    got = np.empty_like(big)
    table["Add+ReLU"]([big, one], [got], {})
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, np.maximum(big + one, 0))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_relu_backward_is_the_shared_product_bitwise(table, dtype):
    rng = np.random.default_rng(6)
    dy, x = special_values(rng, (3, 65, 5), dtype), special_values(rng, (3, 65, 5), dtype)
    with np.errstate(invalid="ignore"):  # inf * 0
        want = np.multiply(dy, x > 0, dtype=dtype)  # the shared kernel: dy times the mask
    got = np.empty_like(dy)
    table["ReLUBackward"]([dy, x], [got], {})
    np.testing.assert_array_equal(bits(got)[~np.isnan(want)], bits(want)[~np.isnan(want)])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.signbit(got[(dy < 0) & ~(x > 0)]).all()  # -0.0 where a negative dy is masked


@pytest.mark.parametrize("op", ["Add+ReLU", "ReLUBackward"])
def test_one_launch_kernels_serve_strided_and_broadcast_operands(table, op):
    """Not contiguous, or not one shape: the shared code's two launches, same values."""
    rng = np.random.default_rng(7)
    shared = shared_elementwise(numpy_module())[op]
    a = rng.standard_normal((6, 10)).astype(np.float32)
    cases = [(a[:, ::2], rng.standard_normal((6, 5)).astype(np.float32)),  # strided
             (a, rng.standard_normal((1, 10)).astype(np.float32))]          # broadcast
    for x, y in cases:
        got, want = np.empty(x.shape, np.float32), np.empty(x.shape, np.float32)
        table[op]([x, y], [got], {})
        shared([x, y], [want], {})
        np.testing.assert_array_equal(bits(got), bits(want))
