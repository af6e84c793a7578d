"""Resizing batches of images in numpy (no Pillow needed).

Each output pixel is a weighted mean of input pixels under a triangle filter centred on it
(pixel centres at half-integers). Upsampling is then plain bilinear interpolation;
downsampling widens the triangle to the scale factor, so every input pixel contributes
(anti-aliased, like Pillow's BILINEAR).
"""

from __future__ import annotations

import numpy as np

__all__ = ["resize_images", "resize_matrix"]


def resize_matrix(n_in: int, n_out: int) -> np.ndarray:
    """The (n_out, n_in) matrix that resamples a 1-D signal; rows sum to 1."""
    if n_in < 1 or n_out < 1:
        raise ValueError(f"sizes must be positive, got {n_in} -> {n_out}")
    scale = n_in / n_out
    support = max(scale, 1.0)
    centers = (np.arange(n_out) + 0.5) * scale
    pos = np.arange(n_in) + 0.5
    w = np.maximum(0.0, 1.0 - np.abs(pos[None, :] - centers[:, None]) / support)
    empty = w.sum(1) == 0
    if empty.any():  # cannot happen for support >= 1, but never divide by zero
        w[empty, np.clip(np.floor(centers[empty]).astype(int), 0, n_in - 1)] = 1.0
    return w / w.sum(1, keepdims=True)


def resize_images(x: np.ndarray, size) -> np.ndarray:
    """Resize images ``x`` (..., H, W) to ``size`` (int or (h, w)); returns float32."""
    h, w = (size, size) if isinstance(size, int) else tuple(int(s) for s in size)
    x = np.asarray(x, dtype=np.float32)
    if x.shape[-2:] == (h, w):
        return x.copy()
    ry = resize_matrix(x.shape[-2], h).astype(np.float32)
    rx = resize_matrix(x.shape[-1], w).astype(np.float32)
    return np.matmul(np.matmul(ry, x), rx.T)
