"""CIFAR-10: the binary batches (``cifar-10-batches-bin``) and, through a restricted
unpickler, the python-pickle batches (``cifar-10-batches-py``).

A binary batch is a run of 3073-byte records: one label byte (0-9), then 1024 red, 1024 green
and 1024 blue bytes of a 32x32 image in row-major order.
"""

from __future__ import annotations

import os

import numpy as np

from ..errors import DataFileError
from ._files import DatasetNotFoundError, find_file
from ._pickle import restricted_load

__all__ = ["read_cifar_bin", "read_cifar_pickle", "load_cifar10", "CIFAR10_MEAN",
           "CIFAR10_STD", "CIFAR10_CLASSES"]

_RECORD = 1 + 3 * 32 * 32
#: Per-channel mean and standard deviation of the CIFAR-10 training images (in [0, 1]).
CIFAR10_MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32)
CIFAR10_STD = np.array([0.2470, 0.2435, 0.2616], np.float32)
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse",
                   "ship", "truck")
_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
_TEST = "test_batch"


def read_cifar_bin(path: str, num_classes: int = 10):
    """One binary batch: ``(images uint8 (N, 3, 32, 32), labels int32 (N,))``."""
    path = os.fspath(path)
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0 or raw.size % _RECORD:
        raise DataFileError(f"{path} is not a CIFAR-10 binary batch: {raw.size} bytes is not a "
                         f"multiple of the {_RECORD}-byte record (1 label + 3x32x32 pixels)")
    rec = raw.reshape(-1, _RECORD)
    labels = rec[:, 0].astype(np.int32)
    if labels.max() >= num_classes:
        raise DataFileError(f"{path}: label {labels.max()} out of range for {num_classes} "
                         "classes; is this a CIFAR-100 file?")
    return rec[:, 1:].reshape(-1, 3, 32, 32).copy(), labels


def _key(d: dict, name: str):
    for k in (name, name.encode()):
        if k in d:
            return d[k]
    raise ValueError(f"missing key {name!r}")


def read_cifar_pickle(path: str):
    """One python-pickle batch, read with the restricted unpickler (never plain pickle).

    Returns ``(images uint8 (N, 3, 32, 32), labels int32 (N,))``.
    """
    path = os.fspath(path)
    batch = restricted_load(path)
    try:
        if not isinstance(batch, dict):
            raise ValueError(f"a dict was expected, got {type(batch).__name__}")
        data = _key(batch, "data")
        if not isinstance(data, np.ndarray):  # a nested list could expand without bound
            raise ValueError(f"'data' must be a numpy array, got {type(data).__name__}")
        labels = _key(batch, "labels")
        if isinstance(labels, list) and not all(type(v) is int for v in labels):
            raise ValueError("'labels' must be a list of ints")
        if not isinstance(labels, (list, np.ndarray)):
            raise ValueError(f"'labels' must be a list or array, got {type(labels).__name__}")
        labels = np.asarray(labels, dtype=np.int64)
        if labels.size and (labels.min() < 0 or labels.max() >= 10):
            raise ValueError(f"label {labels.max() if labels.max() >= 10 else labels.min()} "
                             "is outside the 10 CIFAR-10 classes")
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or len(labels) != len(data):
            raise ValueError(f"data {data.shape} and labels {labels.shape} do not form a "
                             "batch of 32x32 RGB images")
    except (ValueError, TypeError) as exc:
        raise DataFileError(f"{path} is not a CIFAR-10 python batch: {exc}") from None
    return data.astype(np.uint8).reshape(-1, 3, 32, 32), labels.astype(np.int32)


def _locate(data_dir: str):
    """(reader, train paths, test path) for the first layout found under ``data_dir``."""
    layouts = [
        (read_cifar_bin, ".bin", ["", "cifar-10-batches-bin"]),
        (read_cifar_pickle, "", ["", "cifar-10-batches-py"]),
    ]
    for reader, ext, subdirs in layouts:
        for sub in subdirs:
            folder = os.path.join(data_dir, sub)
            train = [find_file(folder, [n + ext]) for n in _TRAIN]
            test = find_file(folder, [_TEST + ext])
            if all(train) and test:
                return reader, train, test
    return None


def load_cifar10(data_dir: str, normalize: bool = True):
    """CIFAR-10 from ``data_dir`` (binary batches preferred, python batches accepted).

    Looks in ``data_dir`` and in its ``cifar-10-batches-bin`` / ``cifar-10-batches-py``
    sub-folders. Returns ``(train_x, train_y, val_x, val_y)``: x float32 (N, 3, 32, 32) in
    [0, 1], standardised per channel when ``normalize``; y int32; validation is the test batch.
    """
    found = _locate(data_dir)
    if found is None:
        raise DatasetNotFoundError(
            f"CIFAR-10 not found in {os.path.abspath(data_dir)!r}. Expected the binary "
            "version (data_batch_1.bin ... data_batch_5.bin and test_batch.bin, as in "
            "cifar-10-binary.tar.gz, either directly there or in a cifar-10-batches-bin "
            "sub-folder) or the python version (data_batch_1 ... data_batch_5, test_batch in "
            "cifar-10-batches-py). singa does not download datasets: fetch the archive into "
            "that folder and extract it there (curl -O https://www.cs.toronto.edu/~kriz/"
            "cifar-10-binary.tar.gz && tar -xzf cifar-10-binary.tar.gz; see "
            "https://www.cs.toronto.edu/~kriz/cifar.html), or pass the folder that holds it "
            "(train_cnn.py --data-dir DIR). To try the examples without any download, use the "
            "'digits' dataset (train_cnn.py cnn digits)."
        )
    reader, train_paths, test_path = found
    parts = [reader(p) for p in train_paths]
    train_x = np.concatenate([p[0] for p in parts])
    train_y = np.concatenate([p[1] for p in parts])
    val_x, val_y = reader(test_path)
    return (_to_float(train_x, normalize), train_y, _to_float(val_x, normalize), val_y)


def _to_float(x: np.ndarray, normalize: bool) -> np.ndarray:
    x = x.astype(np.float32) / np.float32(255.0)
    if normalize:
        x -= CIFAR10_MEAN.reshape(1, 3, 1, 1)
        x /= CIFAR10_STD.reshape(1, 3, 1, 1)
    return x
