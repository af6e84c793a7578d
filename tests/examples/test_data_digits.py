"""singa.data.load_digits and resize_images: shapes, ranges, split, and that upsampling keeps
the image (checked by an exact area-average downsampling written here)."""

from __future__ import annotations

import numpy as np
import pytest
from singa import data

sklearn_datasets = pytest.importorskip("sklearn.datasets")


@pytest.fixture(scope="module")
def originals():
    bunch = sklearn_datasets.load_digits()
    return bunch.images.astype(np.float32) / 16.0, bunch.target


def _area_matrix(n_in, n_out):
    """(n_out, n_in): the mean of the input cells each output cell covers (exact areas)."""
    m = np.zeros((n_out, n_in))
    step = n_in / n_out
    for j in range(n_out):
        lo, hi = j * step, (j + 1) * step
        for i in range(n_in):
            m[j, i] = max(0.0, min(hi, i + 1) - max(lo, i))
    return m / m.sum(1, keepdims=True)


def test_shapes_dtypes_range_and_labels():
    tx, ty, vx, vy = data.load_digits(size=28)
    assert tx.shape == (len(ty), 1, 28, 28) and vx.shape == (len(vy), 1, 28, 28)
    assert len(ty) + len(vy) == 1797
    assert tx.dtype == vx.dtype == np.float32
    assert ty.dtype == vy.dtype == np.int32
    for x in (tx, vx):
        assert x.min() >= 0.0 and x.max() <= 1.0
        assert x.max() > 0.99  # ink reaches full intensity
    assert set(np.unique(ty)) == set(range(10)) == set(np.unique(vy))
    assert tx.flags.c_contiguous and vx.flags.c_contiguous


def test_split_is_stratified_disjoint_and_seeded(originals):
    images, labels = originals
    tx, ty, vx, vy = data.load_digits(size=8, val_fraction=0.2, seed=3)
    # at size 8 the images are the originals: find each one to check the split is a partition
    flat = images.reshape(len(images), -1)
    index = {row.tobytes(): i for i, row in enumerate(flat)}
    got_t = [index.get(x.reshape(-1).tobytes()) for x in tx]
    got_v = [index.get(x.reshape(-1).tobytes()) for x in vx]
    assert None not in got_t and None not in got_v
    assert np.array_equal(labels[got_t], ty) and np.array_equal(labels[got_v], vy)
    per_class_val = np.bincount(vy, minlength=10) / np.bincount(labels, minlength=10)
    assert np.all(np.abs(per_class_val - 0.2) < 0.02)
    again = data.load_digits(size=8, val_fraction=0.2, seed=3)
    assert all(np.array_equal(a, b) for a, b in zip((tx, ty, vx, vy), again))
    other = data.load_digits(size=8, val_fraction=0.2, seed=4)
    assert not np.array_equal(other[1], ty)


def test_upsampling_preserves_the_image(originals):
    images, labels = originals
    up = data.resize_images(images, 28)
    area = _area_matrix(28, 8)
    down = area @ up @ area.T
    err = np.abs(down - images)
    assert err.mean() < 0.1
    # orientation and position kept: any flip, transpose or shift is far worse
    for wrong in (images[:, ::-1, :], images[:, :, ::-1], images.transpose(0, 2, 1),
                  np.roll(images, 1, axis=2)):
        assert np.abs(down - wrong).mean() > 2 * err.mean()
    # every downsampled digit is closest to its own original among all 1797
    d = down.reshape(len(down), -1)
    o = images.reshape(len(images), -1)
    dist = (d * d).sum(1)[:, None] - 2 * d @ o.T + (o * o).sum(1)[None, :]
    assert (dist.argmin(1) == np.arange(len(d))).mean() > 0.99


def test_loader_matches_resize_of_the_originals(originals):
    images, labels = originals
    tx, ty, vx, vy = data.load_digits(size=20, seed=0)
    up = data.resize_images(images, 20)
    flat = {up[i].tobytes(): labels[i] for i in range(len(up))}
    for x, y in zip(np.concatenate([tx, vx])[:, 0], np.concatenate([ty, vy])):
        assert flat[np.clip(x, 0, 1).tobytes()] == y


def test_channels_repeat_the_grey_image():
    tx, _, _, _ = data.load_digits(size=12, channels=3)
    assert tx.shape[1:] == (3, 12, 12)
    assert np.array_equal(tx[:, 0], tx[:, 1]) and np.array_equal(tx[:, 0], tx[:, 2])


def test_resize_images_exact_cases():
    rng = np.random.default_rng(0)
    x = rng.random((2, 3, 5, 7)).astype(np.float32)
    assert np.array_equal(data.resize_images(x, (5, 7)), x)
    const = np.full((1, 4, 4), 0.25, np.float32)
    assert np.allclose(data.resize_images(const, (9, 13)), 0.25)
    # nearest-integer upsampling of a ramp by 2 is linear interpolation between centres
    ramp = np.arange(4, dtype=np.float32)[None, :].repeat(2, 0)
    out = data.resize_images(ramp, (2, 8))[0]
    assert np.allclose(out[1:-1], 0.25 + 0.5 * np.arange(1, 7) - 0.5)
    assert out[0] == 0 and out[-1] == 3


def test_resize_matches_pillow_bilinear():
    pil = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (9, 11)).astype(np.uint8)
    for size in ((28, 30), (5, 4)):
        ref = np.asarray(pil.fromarray(img).resize(size[::-1], pil.BILINEAR), np.float32)
        ours = data.resize_images(img.astype(np.float32), size)
        assert np.abs(ours - ref).max() <= 1.0  # Pillow rounds to uint8
