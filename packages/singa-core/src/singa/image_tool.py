"""``singa.image_tool``: image loading and augmentation on Pillow.

Functions take and return PIL images. :class:`ImageTool` holds a list of images and applies
augmentations to all of them; with ``inplace=True`` (default) a method replaces the list and
returns the tool, so calls chain::

    imgs = ImageTool().load("cat.jpg").scale_by_list([112]).crop5((96, 96), 5).flip(2).get()

Methods with ``num_case`` make that many variants of each image (1 for training, the maximum
for test-time augmentation). Random choices use Python's ``random`` module.

Pillow is optional for SINGA; using this module without it raises an ImportError that says
``pip install pillow``.
"""

from __future__ import annotations

import math
import random

import numpy as np

__all__ = ["load_img", "crop", "crop_and_resize", "resize", "scale", "resize_by_hw",
           "color_cast", "enhance", "flip", "flip_down", "rotate", "get_list_sample",
           "ImageTool"]


def _pil():
    try:
        from PIL import Image, ImageEnhance
    except ImportError:
        raise ImportError("singa.image_tool needs Pillow: pip install pillow") from None
    return Image, ImageEnhance


def load_img(path, grayscale=False):
    """Read an image file as RGB (or grey, 'L', when ``grayscale``)."""
    Image, _ = _pil()
    with Image.open(path) as img:
        return img.convert("L" if grayscale else "RGB")


_CROP5 = ("left_top", "left_bottom", "right_top", "right_bottom", "center")


def crop(img, patch, position):
    """Cut a ``patch`` = (width, height) region at ``position``: left_top, left_bottom,
    right_top, right_bottom or center."""
    w, h = img.size
    pw, ph = patch
    if pw > w or ph > h:
        raise ValueError(f"patch {pw}x{ph} is larger than the image {w}x{h}")
    corners = {
        "left_top": (0, 0),
        "left_bottom": (0, h - ph),
        "right_top": (w - pw, 0),
        "right_bottom": (w - pw, h - ph),
        "center": ((w - pw) // 2, (h - ph) // 2),
    }
    if position not in corners:
        raise ValueError(f"position must be one of {list(corners)}, got {position!r}")
    left, top = corners[position]
    return img.crop((left, top, left + pw, top + ph))


def crop_and_resize(img, patch, position):
    """Cut the largest square at ``position`` (left, center, right for landscape images;
    top, middle, bottom for portrait ones) and resize it to ``patch`` = (width, height).

    (SINGA resized the whole image instead of the square; this resizes the square.)
    """
    Image, _ = _pil()
    w, h = img.size
    s = min(w, h)
    boxes = {
        "left": (0, 0), "center": ((w - s) // 2, 0), "right": (w - s, 0),
        "top": (0, 0), "middle": (0, (h - s) // 2), "bottom": (0, h - s),
    }
    if position not in boxes:
        raise ValueError(f"position must be one of {list(boxes)}, got {position!r}")
    left, top = boxes[position]
    return img.crop((left, top, left + s, top + s)).resize(tuple(patch), Image.BILINEAR)


def scale(img, small_size):
    """Resize keeping the aspect ratio so that the shorter side is ``small_size``."""
    Image, _ = _pil()
    w, h = img.size
    if w < h:
        size = (small_size, max(1, int(small_size * h / w)))
    else:
        size = (max(1, int(small_size * w / h)), small_size)
    return img.resize(size, Image.BILINEAR)


def resize(img, size):
    """``resize(img, n)``: the shorter side becomes n (as :func:`scale`, SINGA's meaning);
    ``resize(img, (width, height))``: exactly that size."""
    if isinstance(size, (int, np.integer)):
        return scale(img, int(size))
    Image, _ = _pil()
    return img.resize(tuple(int(s) for s in size), Image.BILINEAR)


def resize_by_hw(img, size):
    """Resize to ``size`` = (height, width), ignoring the aspect ratio."""
    Image, _ = _pil()
    h, w = size
    return img.resize((int(w), int(h)), Image.BILINEAR)


def rotate(img, angle):
    """Rotate counter-clockwise by ``angle`` degrees (same size, corners filled black)."""
    return img.rotate(angle)


def color_cast(img, offset):
    """Add a random value in [-offset, offset] to each of the R, G, B channels (each channel
    is shifted with probability 1/2), clipping to [0, 255]."""
    Image, _ = _pil()
    x = np.asarray(img.convert("RGB"), dtype=np.int16)
    shift = np.array([random.randint(-offset, offset) if random.randint(0, 1) else 0
                      for _ in range(3)], np.int16)
    return Image.fromarray(np.clip(x + shift, 0, 255).astype(np.uint8), "RGB")


def enhance(img, scale=0.2):
    """Randomly change colour, contrast, brightness and sharpness (each with probability 1/2)
    by a factor in [1 - scale, 1 + scale]."""
    _, ImageEnhance = _pil()
    for kind in (ImageEnhance.Color, ImageEnhance.Contrast, ImageEnhance.Brightness,
                 ImageEnhance.Sharpness):
        if random.randint(0, 1):
            img = kind(img).enhance(random.uniform(1 - scale, 1 + scale))
    return img


def flip(img):
    """Mirror left to right."""
    Image, _ = _pil()
    return img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)


def flip_down(img):
    """Mirror top to bottom."""
    Image, _ = _pil()
    return img.transpose(Image.Transpose.FLIP_TOP_BOTTOM)


def get_list_sample(items, sample_size):
    """``sample_size`` distinct items of ``items``, in their original order."""
    return [items[i] for i in sorted(random.sample(range(len(items)), sample_size))]


def _cases(options, num_case, what):
    options = list(options)
    if not 1 <= num_case <= len(options):
        raise ValueError(f"{what}: num_case must be in [1, {len(options)}], got {num_case}")
    return options if num_case == len(options) else get_list_sample(options, num_case)


class ImageTool:
    """A list of images and chainable augmentations over it (see the module docstring)."""

    def __init__(self):
        self.imgs = []

    # ------------------------------------------------------------------ the image list
    def load(self, path, grayscale=False):
        """Replace the list by the image at ``path``."""
        self.imgs = [load_img(path, grayscale)]
        return self

    def set(self, imgs):
        """Replace the list by the images in ``imgs``; returns self (chainable)."""
        self.imgs = list(imgs)
        return self

    def append(self, img):
        """Add ``img`` to the end of the list; returns self (chainable)."""
        self.imgs.append(img)
        return self

    def get(self):
        """The current list of images (the list itself, not a copy)."""
        return self.imgs

    def num_augmentation(self):
        """Number of images currently held (augmented variants included)."""
        return len(self.imgs)

    def _apply(self, fn, inplace):
        new = []
        for img in self.imgs:
            new.extend(fn(img))
        if inplace:
            self.imgs = new
            return self
        return new

    # ------------------------------------------------------------------ geometry
    def scale_by_range(self, rng, inplace=True):
        """Scale each image so its shorter side is a random size in [rng[0], rng[1])."""
        return self.scale_by_list(list(range(rng[0], rng[1])), 1, inplace)

    def scale_by_list(self, size_list, num_case=1, inplace=True):
        """``num_case`` variants per image, shorter side from ``size_list``."""
        return self._apply(lambda img: [scale(img, s) for s in
                                        _cases(size_list, num_case, "scale_by_list")], inplace)

    def resize_by_range(self, rng, inplace=True):
        """As :meth:`scale_by_range` (SINGA's older name)."""
        return self.resize_by_list(list(range(rng[0], rng[1])), 1, inplace)

    def resize_by_list(self, size_list, num_case=1, inplace=True):
        """``num_case`` variants per image; an int entry sets the shorter side, an
        (height, width) entry the exact size."""
        def one(img, s):
            return resize_by_hw(img, s) if isinstance(s, (tuple, list)) else scale(img, s)

        return self._apply(lambda img: [one(img, s) for s in
                                        _cases(size_list, num_case, "resize_by_list")],
                           inplace)

    def rotate_by_range(self, rng, inplace=True):
        """Rotate each image by a random whole angle in [rng[0], rng[1]) degrees."""
        return self.rotate_by_list(list(range(rng[0], rng[1])), 1, inplace)

    def rotate_by_list(self, angle_list, num_case=1, inplace=True):
        """``num_case`` rotated variants per image, angles from ``angle_list``."""
        return self._apply(lambda img: [rotate(img, a) for a in
                                        _cases(angle_list, num_case, "rotate_by_list")],
                           inplace)

    def crop5(self, patch, num_case=1, inplace=True):
        """Patches of size ``patch`` at ``num_case`` of the four corners and the centre."""
        return self._apply(lambda img: [crop(img, patch, p) for p in
                                        _cases(_CROP5, num_case, "crop5")], inplace)

    def crop3(self, patch, num_case=1, inplace=True):
        """Largest squares at ``num_case`` of three positions, resized to the square
        ``patch``."""
        if patch[0] != patch[1]:
            raise ValueError(f"crop3 needs a square patch, got {patch}")

        def three(img):
            w, h = img.size
            options = ("left", "center", "right") if w > h else ("top", "middle", "bottom")
            return [crop_and_resize(img, patch, p) for p in _cases(options, num_case, "crop3")]

        return self._apply(three, inplace)

    def crop8(self, patch, num_case=1, inplace=True):
        """``num_case`` of the 8 patches of :meth:`crop5` and :meth:`crop3` together."""
        if not 1 <= num_case <= 8:
            raise ValueError(f"crop8: num_case must be in [1, 8], got {num_case}")

        def eight(img):
            picks = _cases(range(8), num_case, "crop8")
            n5 = sum(1 for p in picks if p < 5)
            tool = ImageTool().set([img])
            out = tool.crop5(patch, n5, False) if n5 else []
            if num_case - n5:
                out += tool.crop3(patch, num_case - n5, False)
            return out

        return self._apply(eight, inplace)

    def random_crop(self, patch, inplace=True):
        """A ``patch`` = (width, height) region at a random offset of each image."""
        def one(img):
            w, h = img.size
            if patch[0] > w or patch[1] > h:
                raise ValueError(f"patch {patch} is larger than the image {img.size}")
            left = random.randint(0, w - patch[0])
            top = random.randint(0, h - patch[1])
            return [img.crop((left, top, left + patch[0], top + patch[1]))]

        return self._apply(one, inplace)

    def random_crop_resize(self, patch, inplace=True):
        """Inception-style crop: a region of 8%-100% of the area with aspect ratio in
        [3/4, 4/3] (10 tries, else the whole image), resized to ``patch``."""
        Image, _ = _pil()

        def one(img):
            w, h = img.size
            for _ in range(10):
                area = random.uniform(0.08, 1.0) * w * h
                ratio = random.uniform(3 / 4, 4 / 3)
                cw = int(round(math.sqrt(area * ratio)))
                ch = int(round(math.sqrt(area / ratio)))
                if 0 < cw <= w and 0 < ch <= h:
                    left = random.randint(0, w - cw)
                    top = random.randint(0, h - ch)
                    region = img.crop((left, top, left + cw, top + ch))
                    return [region.resize(tuple(patch), Image.BILINEAR)]
            return [img.resize(tuple(patch), Image.BILINEAR)]

        return self._apply(one, inplace)

    # ------------------------------------------------------------------ flips and colour
    def _flips(self, fn, num_case, inplace, what):
        if num_case not in (1, 2):
            raise ValueError(f"{what}: num_case must be 1 (random) or 2 (both), got {num_case}")
        if num_case == 2:
            return self._apply(lambda img: [fn(img), img], inplace)
        return self._apply(lambda img: [fn(img) if random.randint(0, 1) else img], inplace)

    def flip(self, num_case=1, inplace=True):
        """Mirror left-right at random (num_case=1) or keep both versions (2)."""
        return self._flips(flip, num_case, inplace, "flip")

    def flip_down(self, num_case=1, inplace=True):
        """Mirror top-bottom at random (num_case=1) or keep both versions (2)."""
        return self._flips(flip_down, num_case, inplace, "flip_down")

    def color_cast(self, offset=20, inplace=True):
        """:func:`color_cast` each image; 0 <= offset <= 255."""
        if not 0 <= offset <= 255:
            raise ValueError(f"color_cast: offset must be in [0, 255], got {offset}")
        return self._apply(lambda img: [color_cast(img, offset)], inplace)

    def enhance(self, scale=0.2, inplace=True):
        """:func:`enhance` each image."""
        return self._apply(lambda img: [enhance(img, scale)], inplace)
