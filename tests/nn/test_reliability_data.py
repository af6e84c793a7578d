"""Issue 15 items 3, 6 (loader part) and 14: hostile data files.

A "billion laughs" pickle (shared references nested 22+ levels) loads in linear time and
memory; idx headers that overflow, declare too many dimensions or too many bytes, corrupt
gzip streams and out-of-range labels raise DataFileError naming the file.
"""

from __future__ import annotations

import gzip
import pickle
import struct
import time
import tracemalloc

import numpy as np
import pytest
from singa.data import load_mnist, read_cifar_pickle, read_idx, restricted_load
from singa.errors import DataFileError


def _laughs(levels: int) -> bytes:
    x = [b"x"]
    for _ in range(levels):
        x = [x, x]
    return pickle.dumps(x, protocol=2)


def test_billion_laughs_pickle_is_linear():
    raw = _laughs(40)  # expanded: 2**40 leaves; before the fix 22 levels took 8 s and 0.8 GB
    tracemalloc.start()
    t0 = time.perf_counter()
    out = restricted_load(raw)
    elapsed = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20 and elapsed < 5, (peak, elapsed)
    assert out[0] is out[1]  # sharing preserved, as plain pickle would leave it
    depth, node = 0, out
    while isinstance(node, list) and len(node) == 2:
        node, depth = node[0], depth + 1
    assert depth == 40 and node == [b"x"]


def test_recursive_pickle_terminates():
    x = []
    x.append(x)
    out = restricted_load(pickle.dumps(x))
    assert out[0] is out


def test_cifar_pickle_with_nested_list_data_is_refused(tmp_path):
    x = [b"x"]
    for _ in range(22):
        x = [x, x]
    p = tmp_path / "data_batch_1"
    p.write_bytes(pickle.dumps({b"data": x, b"labels": [0]}, protocol=2))
    with pytest.raises(DataFileError, match="data_batch_1.*numpy array"):
        read_cifar_pickle(p)


def test_cifar_pickle_label_out_of_range(tmp_path):
    p = tmp_path / "data_batch_1"
    data = np.zeros((2, 3072), np.uint8)
    p.write_bytes(pickle.dumps({b"data": data, b"labels": [0, 250]}, protocol=2))
    with pytest.raises(DataFileError, match="label 250"):
        read_cifar_pickle(p)


def _idx(dims, code=0x08, payload=b"", ndim=None) -> bytes:
    ndim = len(dims) if ndim is None else ndim
    return struct.pack(">HBB", 0, code, ndim) + struct.pack(f">{len(dims)}I", *dims) + payload


def test_idx_header_that_overflows_int64_is_refused(tmp_path):
    p = tmp_path / "x.idx"
    p.write_bytes(_idx((65536,) * 4))  # 2**64 elements: int64 product wrapped to 0 before
    with pytest.raises(DataFileError, match="x.idx.*bytes of values"):
        read_idx(p)


def test_idx_with_255_dimensions_is_refused(tmp_path):
    p = tmp_path / "x.idx"
    p.write_bytes(_idx((1,) * 255))
    with pytest.raises(DataFileError, match="255 dimensions"):
        read_idx(p)


def test_idx_limit_counts_bytes(tmp_path):
    p = tmp_path / "x.idx"
    p.write_bytes(_idx((1 << 30,), code=0x0E))  # 2**30 float64 = 8 GiB; under 2**31 elements
    with pytest.raises(DataFileError, match="8589934592 bytes"):
        read_idx(p)


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_corrupt_gzip_names_the_file(tmp_path, damage):
    raw = gzip.compress(_idx((3,), payload=b"\x01\x02\x03") * 50)
    raw = raw[: len(raw) // 2] if damage == "truncate" else raw[:12] + b"\xff" * 20 + raw[32:]
    p = tmp_path / "labels.gz"
    p.write_bytes(raw)
    with pytest.raises(DataFileError, match="labels.gz"):
        read_idx(p)


def _write_mnist(folder, label: int):
    for stem, n, dims in (("train", 2, (2, 28, 28)), ("t10k", 2, (2, 28, 28))):
        (folder / f"{stem}-images-idx3-ubyte").write_bytes(
            _idx(dims, payload=bytes(2 * 28 * 28)))
        (folder / f"{stem}-labels-idx1-ubyte").write_bytes(_idx((n,), payload=bytes([1, label])))


def test_load_mnist_refuses_label_250(tmp_path):
    _write_mnist(tmp_path, 250)
    with pytest.raises(DataFileError, match="label 250"):
        load_mnist(str(tmp_path))


def test_load_mnist_accepts_digits(tmp_path):
    _write_mnist(tmp_path, 9)
    tx, ty, vx, vy = load_mnist(str(tmp_path))
    assert ty.tolist() == [1, 9] and tx.shape == (2, 1, 28, 28)
