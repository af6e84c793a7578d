"""MNIST idx parsing on tiny files written here byte by byte (the oracle is what we wrote)."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest
from singa import data

_CODES = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(">i2"): 0x0B,
          np.dtype(">i4"): 0x0C, np.dtype(">f4"): 0x0D, np.dtype(">f8"): 0x0E}


def idx_bytes(arr: np.ndarray) -> bytes:
    """The idx encoding, written independently of the reader: header then big-endian data."""
    be = arr.astype(arr.dtype.newbyteorder(">")) if arr.dtype.itemsize > 1 else arr
    header = struct.pack(">HBB", 0, _CODES[be.dtype], arr.ndim)
    header += b"".join(struct.pack(">I", d) for d in arr.shape)
    return header + be.tobytes()


def write(path, arr, gz=False):
    raw = idx_bytes(arr)
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return path


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32,
                                   np.float64])
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trip(tmp_path, dtype, gz):
    rng = np.random.default_rng(0)
    arr = (rng.standard_normal((3, 4, 5)) * 50).astype(dtype)
    got = data.read_idx(write(tmp_path / "a.idx", arr, gz))
    assert got.shape == arr.shape and got.dtype == np.dtype(dtype)
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, arr)


def test_read_idx_rejects_bad_files(tmp_path):
    arr = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    raw = idx_bytes(arr)
    (tmp_path / "trunc").write_bytes(raw[:-1])
    with pytest.raises(ValueError, match="truncated"):
        data.read_idx(tmp_path / "trunc")
    (tmp_path / "extra").write_bytes(raw + b"\0")
    with pytest.raises(ValueError, match="extra bytes"):
        data.read_idx(tmp_path / "extra")
    (tmp_path / "magic").write_bytes(b"\x01\x02" + raw[2:])
    with pytest.raises(ValueError, match="not an idx file"):
        data.read_idx(tmp_path / "magic")
    (tmp_path / "huge").write_bytes(struct.pack(">HBBIII", 0, 8, 3, 70000, 70000, 70000))
    with pytest.raises(ValueError, match="corrupt"):
        data.read_idx(tmp_path / "huge")


def _tiny_mnist(folder, n_train=6, n_test=4, gz=True, dotted=False):
    rng = np.random.default_rng(1)
    arrays = {
        "train_images": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train_labels": rng.integers(0, 10, n_train).astype(np.uint8),
        "test_images": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "test_labels": rng.integers(0, 10, n_test).astype(np.uint8),
    }
    for role, arr in arrays.items():
        name = data.MNIST_FILES[role]
        if dotted:
            name = name.replace("-idx", ".idx")
        write(folder / (name + (".gz" if gz else "")), arr, gz)
    return arrays


@pytest.mark.parametrize("gz,dotted", [(True, False), (False, False), (True, True)])
def test_load_mnist(tmp_path, gz, dotted):
    arrays = _tiny_mnist(tmp_path, gz=gz, dotted=dotted)
    tx, ty, vx, vy = data.load_mnist(str(tmp_path))
    assert tx.shape == (6, 1, 28, 28) and vx.shape == (4, 1, 28, 28)
    assert tx.dtype == vx.dtype == np.float32 and ty.dtype == vy.dtype == np.int32
    np.testing.assert_allclose(tx[:, 0], arrays["train_images"] / 255.0, rtol=1e-6)
    np.testing.assert_allclose(vx[:, 0], arrays["test_images"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(ty, arrays["train_labels"])
    np.testing.assert_array_equal(vy, arrays["test_labels"])


def test_missing_mnist_says_where_to_put_what(tmp_path):
    _tiny_mnist(tmp_path)
    (tmp_path / (data.MNIST_FILES["test_labels"] + ".gz")).unlink()
    with pytest.raises(data.DatasetNotFoundError) as info:
        data.load_mnist(str(tmp_path))
    msg = str(info.value)
    assert str(tmp_path) in msg and "t10k-labels-idx1-ubyte" in msg
    assert "train-images" not in msg  # only what is missing is listed
    assert "--data-dir" in msg and "download" in msg
    assert isinstance(info.value, FileNotFoundError)


def test_mismatched_mnist_counts(tmp_path):
    _tiny_mnist(tmp_path)
    write(tmp_path / (data.MNIST_FILES["train_labels"] + ".gz"),
          np.zeros(5, np.uint8), gz=True)
    with pytest.raises(ValueError, match="disagree"):
        data.load_mnist(str(tmp_path))
