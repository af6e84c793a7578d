"""The handwritten digits that ship inside scikit-learn: a dataset that needs no download.

1797 8x8 grey images (values 0-16) of the digits 0-9. They are scaled to [0, 1] and
upsampled (bilinear) to the model's input size, e.g. 28x28 for SINGA's MNIST CNN.
"""

from __future__ import annotations

import numpy as np

from ._resize import resize_images

__all__ = ["load_digits"]


def load_digits(size: int = 28, val_fraction: float = 0.2, seed: int = 0, channels: int = 1):
    """Digits as ``(train_x, train_y, val_x, val_y)``.

    x is float32 (N, channels, size, size) in [0, 1] (the grey image repeated over
    ``channels``), y int32 in 0..9. The split is a seeded shuffle: ``val_fraction`` of the
    1797 images (stratified by class) go to validation. Needs scikit-learn.
    """
    try:
        from sklearn.datasets import load_digits as _sk_load_digits
    except ImportError:
        raise ImportError("the 'digits' dataset comes with scikit-learn: pip install "
                          "scikit-learn") from None
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
    bunch = _sk_load_digits()
    images = bunch.images.astype(np.float32) / np.float32(16.0)
    labels = bunch.target.astype(np.int32)
    x = resize_images(images, size) if size != images.shape[-1] else images
    np.clip(x, 0.0, 1.0, out=x)
    x = np.repeat(x[:, None], channels, axis=1) if channels != 1 else x[:, None]

    rng = np.random.default_rng(seed)
    chosen: list[int] = []
    for c in range(10):  # stratified: the same fraction of every class
        idx = rng.permutation(np.flatnonzero(labels == c))
        chosen.extend(idx[:int(round(len(idx) * val_fraction))])
    val_mask = np.zeros(len(labels), bool)
    val_mask[chosen] = True
    train_idx = rng.permutation(np.flatnonzero(~val_mask))
    val_idx = rng.permutation(np.flatnonzero(val_mask))
    return (np.ascontiguousarray(x[train_idx]), labels[train_idx],
            np.ascontiguousarray(x[val_idx]), labels[val_idx])
