"""The idx format of the MNIST files, and the MNIST loader.

An idx file is: two zero bytes, a type byte, a byte ``ndim``, then ``ndim`` big-endian uint32
dimensions, then the values in C order, big-endian. Types: 0x08 uint8, 0x09 int8, 0x0B int16,
0x0C int32, 0x0D float32, 0x0E float64. Files may be gzip-compressed (``.gz``).
"""

from __future__ import annotations

import gzip
import math
import os
import struct
import zlib

import numpy as np

from ..errors import DataFileError
from ._files import DatasetNotFoundError, find_file

__all__ = ["read_idx", "load_mnist", "MNIST_FILES"]

_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

#: The four MNIST files: role -> file stem (each may also be spelled with a dot before
#: "idx", as some mirrors do, and may end in ``.gz``).
MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

# 4 GiB of values is far beyond any idx dataset (MNIST's largest file holds 47 MB); a larger
# header is corrupt or hostile. The limit is on bytes, computed in Python ints (no overflow).
_MAX_BYTES = 1 << 32
# numpy arrays have at most 64 axes; real idx files have 1 to 4
_MAX_DIMS = 16


def _open(path: str):
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


def _read_exact(fh, n: int, path: str, what: str) -> bytes:
    buf = fh.read(n)
    if len(buf) != n:
        raise DataFileError(f"{path}: truncated idx file: expected {n} bytes of {what}, "
                         f"found {len(buf)}")
    return buf


def read_idx(path: str) -> np.ndarray:
    """Read an idx file (raw or gzip) into a numpy array of its shape, in native byte order.

    Raises :class:`~singa.errors.DataFileError` (a ValueError) naming the file when the header
    is not idx, declares more than 16 dimensions or 4 GiB of values, the data is truncated,
    bytes follow the data, or the gzip stream is corrupt.
    """
    path = os.fspath(path)
    try:
        return _read_idx(path)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataFileError(f"{path}: corrupt gzip stream ({type(exc).__name__}: {exc}); "
                            "download the file again") from None


def _read_idx(path: str) -> np.ndarray:
    with _open(path) as fh:
        header = _read_exact(fh, 4, path, "header")
        zero, code, ndim = struct.unpack(">HBB", header)
        if zero != 0 or code not in _IDX_DTYPES:
            raise DataFileError(f"{path} is not an idx file (magic bytes {header.hex()}; expected "
                             "0000 then a type byte among 08 09 0b 0c 0d 0e)")
        if not 0 < ndim <= _MAX_DIMS:
            raise DataFileError(f"{path}: idx header declares {ndim} dimensions (1 to "
                                f"{_MAX_DIMS} are accepted); the file is corrupt")
        dims = struct.unpack(f">{ndim}I", _read_exact(fh, 4 * ndim, path, "dimensions"))
        dtype = _IDX_DTYPES[code]
        nbytes = math.prod(dims) * dtype.itemsize
        if nbytes > _MAX_BYTES:
            raise DataFileError(f"{path}: idx header declares {dims} = {nbytes} bytes of "
                                f"values, more than {_MAX_BYTES} (any real dataset); the file "
                                "is corrupt")
        count = math.prod(dims)
        raw = _read_exact(fh, count * dtype.itemsize, path, f"data for shape {dims}")
        if fh.read(1):
            raise DataFileError(f"{path}: extra bytes after the {dims} values the header declares")
    arr = np.frombuffer(raw, dtype=dtype).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def _mnist_candidates(stem: str):
    dotted = stem.replace("-idx", ".idx")
    return [stem, stem + ".gz", dotted, dotted + ".gz"]


def _missing_mnist(data_dir: str, missing) -> DatasetNotFoundError:
    wanted = "\n".join(f"  {MNIST_FILES[r]}.gz (or {MNIST_FILES[r]})" for r in missing)
    return DatasetNotFoundError(
        f"MNIST files not found in {os.path.abspath(data_dir)!r}. Missing:\n{wanted}\n"
        "singa does not download datasets: get the four idx files of MNIST (from "
        "http://yann.lecun.com/exdb/mnist/ or one of its mirrors), put them in that folder "
        "(gzip or uncompressed), or pass the folder that holds them (train_cnn.py --data-dir "
        "DIR). To try the examples without any download, use the 'digits' dataset "
        "(train_cnn.py cnn digits)."
    )


def load_mnist(data_dir: str):
    """MNIST from its four idx files in ``data_dir``.

    Returns ``(train_x, train_y, val_x, val_y)``: x float32 (N, 1, 28, 28) scaled to [0, 1],
    y int32 class ids; the validation set is the 10k test set. Raises
    :class:`DatasetNotFoundError` listing the files that are missing.
    """
    paths: dict[str, str] = {}
    missing = []
    for role, stem in MNIST_FILES.items():
        p = find_file(data_dir, _mnist_candidates(stem))
        if p is None:
            missing.append(role)
        else:
            paths[role] = p
    if missing:
        raise _missing_mnist(data_dir, missing)
    out = []
    for split in ("train", "test"):
        images = read_idx(paths[f"{split}_images"])
        labels = read_idx(paths[f"{split}_labels"])
        if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
            raise DataFileError(f"MNIST {split} files disagree: images {images.shape} "
                             f"({paths[f'{split}_images']}), labels {labels.shape} "
                             f"({paths[f'{split}_labels']}); expected (N, H, W) and (N,)")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            bad = labels.max() if labels.max() > 9 else labels.min()
            raise DataFileError(f"{paths[f'{split}_labels']}: label {bad} is not a digit "
                                "(MNIST labels are 0-9); the file is corrupt or not MNIST")
        x = images.astype(np.float32)[:, None, :, :] / np.float32(255.0)
        out += [x, labels.astype(np.int32)]
    return tuple(out)
