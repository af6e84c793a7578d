"""ImageBatchIter on small PNGs whose pixels encode their label, so every (x, y) pair can be
checked."""

from __future__ import annotations

import numpy as np
import pytest

Image = pytest.importorskip("PIL.Image")
from singa.data import ImageBatchIter  # noqa: E402


@pytest.fixture
def listing(tmp_path):
    folder = tmp_path / "imgs"
    folder.mkdir()
    lines = []
    for i in range(7):
        label = i % 3
        arr = np.full((6, 5, 3), 40 * label + i, np.uint8)  # label and index in the pixels
        Image.fromarray(arr).save(folder / f"{i}.png")
        lines.append(f"{i}.png {label}")
    (tmp_path / "list.txt").write_text("\n".join(lines) + "\n")
    return tmp_path / "list.txt", folder


def load(path):
    return [Image.open(path)]


def load_twice(path):
    img = Image.open(path).convert("RGB")
    return [img, img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)]


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_batches_pair_images_with_their_labels(listing, worker):
    list_file, folder = listing
    it = ImageBatchIter(str(list_file), 4, load, image_folder=str(folder), worker=worker)
    assert it.num_samples == 7
    it.start()
    try:
        seen = []
        for _ in range(7):  # 28 images: every one of the 7 four times
            x, y = next(it)
            assert x.shape == (4, 3, 6, 5) and x.dtype == np.float32
            assert y.dtype == np.int32
            vals = x[:, 0, 0, 0].astype(int)
            np.testing.assert_array_equal(vals // 40, y)
            seen += list(vals % 40)
        assert sorted(seen) == sorted(list(range(7)) * 4)
    finally:
        it.end()
    assert it.p is None


def test_unshuffled_order_and_multi_image_transforms(listing):
    list_file, folder = listing
    with ImageBatchIter(str(list_file), 4, load_twice, shuffle=False,
                        image_folder=str(folder), worker="thread") as it:
        x, y = next(it)
        idx = x[:, 0, 0, 0].astype(int) % 40
        assert idx.tolist() == [0, 0, 1, 1] and y.tolist() == [0, 0, 1, 1]


def test_non_integer_meta_gives_strings(tmp_path):
    Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(tmp_path / "a.png")
    (tmp_path / "l.txt").write_text("a.png,cat\n")
    with ImageBatchIter(str(tmp_path / "l.txt"), 2, load, delimiter=",",
                        image_folder=str(tmp_path), worker="thread") as it:
        _, y = next(it)
    assert y == ["cat", "cat"]


def _broken(path):
    raise OSError(f"cannot decode {path}")


def test_loader_errors_reach_the_caller(listing):
    list_file, folder = listing
    it = ImageBatchIter(str(list_file), 2, _broken, image_folder=str(folder))
    with pytest.raises(RuntimeError, match="cannot decode"):
        it.start()
        next(it)
    it.end()
    with pytest.raises(RuntimeError, match="start"):
        next(ImageBatchIter(str(list_file), 2, load))
