"""The CPU's Winograd transforms (``singa_cpu.kernels.winograd``) against the matrix products
they stand for, tile by tile, computed in float64: the input transform ``V = B^T d B``, the
output transform ``Y = A^T M A (+ bias)`` clipped to the output's extent, and the
gradient-output transform ``Z = A dY A^T`` with cells past dY's extent taken as zero, for
F(2x2, 3x3) and F(4x4, 3x3). Also the layout every caller relies on: ``[point, channel,
tile]`` with the tiles of a chunk's images in image-major order, every cell of the output
written, and nothing of ``y`` outside the chunk's images touched. Both numba compilations run
(the serial one that batch chunks use, and the parallel one), and both kernel families of the
input and output transforms (per channel over the chunk's images, and per image plane, which
single-image calls take). The arrays are float32, whose compilations the convolution tests
share (a float64 set of its own cost CI minutes of compiling); the tolerance is scaled to each
array's largest value."""

from __future__ import annotations

import numpy as np
import pytest

winograd = pytest.importorskip("singa_cpu.kernels.winograd")
_parallel = pytest.importorskip("singa_cpu.kernels._parallel")

BT = {2: np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], float),
      4: np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                   [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float)}
AT = {2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], float),
      4: np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0],
                   [0, 1, -1, 8, -8, 1]], float)}

# (images in the chunk, channels, output rows, output columns): maps that are and are not
# multiples of the tile, one tile row or column, a single image
SHAPES = [(3, 5, 9, 7), (2, 4, 8, 8), (1, 3, 5, 6), (4, 2, 4, 4), (2, 3, 10, 13), (1, 2, 3, 2)]


@pytest.fixture(autouse=True)
def _cpu_session(singa_device):
    if singa_device.backend != "cpu":
        pytest.skip("CPU kernel internals (the cpu session runs them)")


def _close(got, want):
    """float32 results against float64 products: sums of at most 36 terms whose coefficients
    are at most 25 in magnitude."""
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-5 * max(1.0, np.abs(want).max()))


@pytest.fixture(params=["serial", "parallel"])
def compiled(request, monkeypatch):
    """The transform as a batch chunk calls it (serial) or as a big call outside a chunk does
    (numba's parallel compilation, forced)."""
    if request.param == "serial":
        return lambda fn: fn.serial()
    numba = pytest.importorskip("numba")
    if numba.get_num_threads() < 2:
        pytest.skip("numba runs one thread")
    monkeypatch.setattr(_parallel, "PARALLEL_MIN_ITEMS", 0)
    monkeypatch.setattr(_parallel, "SERIAL_BY_DEFAULT", False)
    return lambda fn: fn


def _geometry(m, ho, wo):
    th, tw = -(-ho // m), -(-wo // m)
    return th, tw, (m + 2) ** 2


def _kernel(kind, m, which):
    """The per-channel (``_TRANSFORMS``) or per-plane (``_PLANES``) input (0) or output (1)
    transform."""
    return (winograd._TRANSFORMS if kind == "channels" else winograd._PLANES)[m][which]


KINDS = ["channels", "planes"]


def _tiles(nb, th, tw):
    """(image, tile row, tile column) of each tile index, image-major."""
    return [(n, ty, tx) for n in range(nb) for ty in range(th) for tx in range(tw)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("shape", SHAPES)
def test_input_transform_is_bt_d_b(compiled, kind, m, shape):
    nb, c, ho, wo = shape
    th, tw, k = _geometry(m, ho, wo)
    t = m + 2
    rng = np.random.default_rng(1)
    xp = rng.standard_normal((nb, c, m * th + 2, m * tw + 2)).astype(np.float32)
    v = np.full((k, c, nb * th * tw), np.nan, np.float32)
    compiled(_kernel(kind, m, 0))(xp, v, nb, th, tw)
    bt = BT[m]
    for j, (n, ty, tx) in enumerate(_tiles(nb, th, tw)):
        d = xp[n, :, m * ty:m * ty + t, m * tx:m * tx + t].astype(float)  # (c, t, t)
        _close(v[:, :, j], np.einsum("ar,crs,bs->abc", bt, d, bt).reshape(k, c))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("has_bias", [True, False])
def test_output_transform_is_at_m_a_clipped(compiled, kind, m, shape, has_bias):
    nb, o, ho, wo = shape
    th, tw, k = _geometry(m, ho, wo)
    t = m + 2
    rng = np.random.default_rng(2)
    mm = rng.standard_normal((k, o, nb * th * tw)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    n0 = 1  # the chunk's first image in y: images outside the chunk stay as they were
    y = np.full((nb + 2, o, ho, wo), np.nan, np.float32)
    compiled(_kernel(kind, m, 1))(mm, y, bias, has_bias, n0, nb, th, tw)
    at = AT[m]
    want = np.zeros((nb, o, th * m, tw * m))
    for j, (n, ty, tx) in enumerate(_tiles(nb, th, tw)):
        tile = np.einsum("ia,oab,jb->oij", at,
                         mm[:, :, j].astype(float).reshape(t, t, o).transpose(2, 0, 1), at)
        want[n, :, m * ty:m * ty + m, m * tx:m * tx + m] = tile
    want = want[:, :, :ho, :wo] + (bias[None, :, None, None] if has_bias else 0)
    _close(y[n0:n0 + nb], want)
    assert np.isnan(y[:n0]).all() and np.isnan(y[n0 + nb:]).all()


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("shape", SHAPES)
def test_grad_output_transform_is_a_dy_at_zero_padded(compiled, m, shape):
    nb, o, ho, wo = shape
    th, tw, k = _geometry(m, ho, wo)
    rng = np.random.default_rng(3)
    n0 = 1
    dy = rng.standard_normal((nb + 1, o, ho, wo)).astype(np.float32)
    z = np.full((k, o, nb * th * tw), np.nan, np.float32)
    compiled(winograd._TRANSFORMS[m][2])(dy, z, n0, nb, th, tw)
    a = AT[m].T
    padded = np.zeros((nb, o, th * m, tw * m))  # float64
    padded[:, :, :ho, :wo] = dy[n0:n0 + nb]
    for j, (n, ty, tx) in enumerate(_tiles(nb, th, tw)):
        g = padded[n, :, m * ty:m * ty + m, m * tx:m * tx + m]  # (o, m, m)
        _close(z[:, :, j], np.einsum("ai,oij,bj->abo", a, g, a).reshape(k, o))


@pytest.mark.parametrize("m", [2, 4])
def test_single_image_calls_take_the_plane_kernels(m):
    assert winograd._forward(m, 1) == winograd._PLANES[m]
    assert winograd._forward(m, 2) == winograd._TRANSFORMS[m][:2]
