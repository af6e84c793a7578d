"""singa.image_tool against numpy slicing of the same pixels."""

from __future__ import annotations

import random
import sys

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")
from singa import image_tool as it  # noqa: E402


@pytest.fixture
def img():
    """A 50x40 (width x height) RGB image whose pixels encode their coordinates."""
    h, w = 40, 50
    yy, xx = np.mgrid[0:h, 0:w]
    arr = np.stack([yy * 5, xx * 5, (yy + xx) % 256], axis=-1).astype(np.uint8)
    return Image.fromarray(arr, "RGB"), arr


def a(pil):
    return np.asarray(pil)


def test_crop_positions(img):
    pil, arr = img
    expect = {"left_top": arr[:10, :20], "left_bottom": arr[30:, :20],
              "right_top": arr[:10, 30:], "right_bottom": arr[30:, 30:],
              "center": arr[15:25, 15:35]}
    for pos, ref in expect.items():
        np.testing.assert_array_equal(a(it.crop(pil, (20, 10), pos)), ref)
    with pytest.raises(ValueError):
        it.crop(pil, (60, 10), "center")
    with pytest.raises(ValueError):
        it.crop(pil, (10, 10), "middle")


def test_crop_and_resize_takes_the_square(img):
    pil, arr = img
    for pos, ref in {"left": arr[:, :40], "center": arr[:, 5:45], "right": arr[:, 10:]}.items():
        out = it.crop_and_resize(pil, (40, 40), pos)  # 40x40 square resized to 40x40: exact
        np.testing.assert_array_equal(a(out), ref)
    assert it.crop_and_resize(pil, (16, 16), "center").size == (16, 16)


def test_scale_resize_and_resize_by_hw(img):
    pil, _ = img
    assert it.scale(pil, 20).size == (25, 20)  # shorter side (height 40) -> 20
    assert it.resize(pil, 20).size == (25, 20)
    assert it.resize(pil, (30, 12)).size == (30, 12)  # (width, height)
    assert it.resize_by_hw(pil, (12, 30)).size == (30, 12)  # (height, width)
    tall = pil.transpose(Image.Transpose.ROTATE_90)  # 40 wide, 50 high
    assert it.scale(tall, 20).size == (20, 25)


def test_flips(img):
    pil, arr = img
    np.testing.assert_array_equal(a(it.flip(pil)), arr[:, ::-1])
    np.testing.assert_array_equal(a(it.flip_down(pil)), arr[::-1])


def test_color_cast_and_enhance_stay_valid(img):
    pil, arr = img
    random.seed(0)
    for _ in range(10):
        out = a(it.color_cast(pil, 60)).astype(int)
        shift = out - arr.astype(int)
        for c in range(3):  # one shift per channel, clipped at 0 and 255
            s = shift[..., c][(arr[..., c] > 60) & (arr[..., c] < 195)]
            assert len(set(s.tolist())) == 1 and abs(s[0]) <= 60
        assert it.enhance(pil, 0.3).size == pil.size


def test_imagetool_chains_and_counts(img, tmp_path):
    pil, arr = img
    path = tmp_path / "x.png"
    pil.save(path)
    random.seed(1)
    tool = it.ImageTool().load(str(path))
    np.testing.assert_array_equal(a(tool.get()[0]), arr)
    out = tool.scale_by_list([30]).crop5((24, 24), 5).flip(2).get()
    assert len(out) == 10 and all(o.size == (24, 24) for o in out)
    assert tool.num_augmentation() == 10
    eight = it.ImageTool().set([pil]).crop8((20, 20), 8, inplace=False)
    assert len(eight) == 8 and all(o.size == (20, 20) for o in eight)
    three = it.ImageTool().set([pil]).crop3((16, 16), 3, inplace=False)
    assert len(three) == 3
    rc = it.ImageTool().set([pil, pil]).random_crop((7, 9)).get()
    assert [o.size for o in rc] == [(7, 9), (7, 9)]
    patch = a(rc[0])  # a random crop is a contiguous window of the original
    r0, c0 = patch[0, 0, 0] // 5, patch[0, 0, 1] // 5
    np.testing.assert_array_equal(patch, arr[r0:r0 + 9, c0:c0 + 7])
    rcr = it.ImageTool().set([pil]).random_crop_resize((12, 12)).rotate_by_range((0, 30))
    assert rcr.get()[0].size == (12, 12)
    sizes = it.ImageTool().set([pil]).resize_by_list([20, (10, 16)], 2, inplace=False)
    assert [o.size for o in sizes] == [(25, 20), (16, 10)]
    assert len(it.ImageTool().set([pil]).rotate_by_list([0, 90, 180], 3).get()) == 3
    with pytest.raises(ValueError):
        it.ImageTool().set([pil]).crop5((8, 8), 6)
    with pytest.raises(ValueError):
        it.ImageTool().set([pil]).flip(3)


def test_grayscale_load(img, tmp_path):
    pil, _ = img
    pil.save(tmp_path / "g.png")
    assert it.load_img(tmp_path / "g.png", grayscale=True).mode == "L"


def test_missing_pillow_names_the_install(monkeypatch, img):
    pil, _ = img
    for name in [m for m in sys.modules if m == "PIL" or m.startswith("PIL.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match="pip install pillow"):
        it.flip(pil)
