"""CIFAR-10 parsing (binary and python batches written here) and the restricted unpickler."""

from __future__ import annotations

import os
import pickle
import struct

import numpy as np
import pytest
from singa import data

N_PER = 3  # records per batch file


def _batches(seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        out[name] = (rng.integers(0, 256, (N_PER, 3, 32, 32), dtype=np.uint8),
                     rng.integers(0, 10, N_PER).astype(np.uint8))
    return out


def _write_bin(folder, batches):
    folder.mkdir(parents=True, exist_ok=True)
    for name, (x, y) in batches.items():
        with open(folder / f"{name}.bin", "wb") as fh:
            for img, label in zip(x, y):
                # record: label byte, then the red, green and blue planes, rows in order
                fh.write(bytes([label]) + img[0].tobytes() + img[1].tobytes()
                         + img[2].tobytes())


def _write_py(folder, batches, protocol=2):
    folder.mkdir(parents=True, exist_ok=True)
    for name, (x, y) in batches.items():
        batch = {b"batch_label": name.encode(), b"labels": [int(v) for v in y],
                 b"data": x.reshape(len(x), -1), b"filenames": [b"a.png"] * len(x)}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=protocol))


def _expected(batches):
    train = [batches[f"data_batch_{i}"] for i in range(1, 6)]
    tx = np.concatenate([b[0] for b in train]).astype(np.float32) / 255
    ty = np.concatenate([b[1] for b in train])
    vx, vy = batches["test_batch"]
    return tx, ty, vx.astype(np.float32) / 255, vy


def _check(got, batches, normalize):
    tx, ty, vx, vy = _expected(batches)
    if normalize:
        mean = np.array([0.4914, 0.4822, 0.4465]).reshape(1, 3, 1, 1)
        std = np.array([0.2470, 0.2435, 0.2616]).reshape(1, 3, 1, 1)
        tx, vx = (tx - mean) / std, (vx - mean) / std
    assert got[0].shape == (5 * N_PER, 3, 32, 32) and got[2].shape == (N_PER, 3, 32, 32)
    assert got[0].dtype == got[2].dtype == np.float32
    assert got[1].dtype == got[3].dtype == np.int32
    np.testing.assert_allclose(got[0], tx, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], vx, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], ty)
    np.testing.assert_array_equal(got[3], vy)


@pytest.mark.parametrize("sub", ["", "cifar-10-batches-bin"])
@pytest.mark.parametrize("normalize", [False, True])
def test_binary_batches(tmp_path, sub, normalize):
    batches = _batches()
    _write_bin(tmp_path / sub if sub else tmp_path, batches)
    _check(data.load_cifar10(str(tmp_path), normalize=normalize), batches, normalize)


def test_binary_batch_pixel_layout(tmp_path):
    # one record whose planes are constant 10 (R), 20 (G), 30 (B) and a marked corner
    img = np.stack([np.full((32, 32), v, np.uint8) for v in (10, 20, 30)])
    img[1, 0, 31] = 99  # green, first row, last column
    rec = bytes([7]) + img.tobytes()
    (tmp_path / "one.bin").write_bytes(rec)
    x, y = data.read_cifar_bin(tmp_path / "one.bin")
    assert y.tolist() == [7] and x.shape == (1, 3, 32, 32)
    assert x[0, 0].max() == 10 and x[0, 2].min() == 30 and x[0, 1, 0, 31] == 99


def test_binary_batch_errors(tmp_path):
    (tmp_path / "bad.bin").write_bytes(b"\0" * 3000)
    with pytest.raises(ValueError, match="3073-byte record"):
        data.read_cifar_bin(tmp_path / "bad.bin")
    (tmp_path / "c100.bin").write_bytes(bytes([42]) + b"\0" * 3072)
    with pytest.raises(ValueError, match="CIFAR-100"):
        data.read_cifar_bin(tmp_path / "c100.bin")


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_python_batches_through_the_restricted_unpickler(tmp_path, protocol):
    batches = _batches(1)
    _write_py(tmp_path / "cifar-10-batches-py", batches, protocol)
    _check(data.load_cifar10(str(tmp_path), normalize=False), batches, False)


def _py2_pickle(images: np.ndarray, labels) -> bytes:
    """A protocol-2 pickle as Python 2's cPickle wrote CIFAR: str (not unicode) keys and
    array data, numpy.core.multiarray._reconstruct. Written opcode by opcode."""
    def s(text: bytes):  # SHORT_BINSTRING or BINSTRING (Python 2 str)
        if len(text) < 256:
            return b"U" + bytes([len(text)]) + text
        return b"T" + struct.pack("<I", len(text)) + text

    def i(v):  # BININT1 / BININT
        return b"K" + bytes([v]) if 0 <= v < 256 else b"J" + struct.pack("<i", v)

    dtype = (b"cnumpy\ndtype\n" + s(b"u1") + i(0) + i(1) + b"\x87R"
             + b"(" + i(3) + s(b"|") + b"NNN" + i(-1) + i(-1) + i(0) + b"tb")
    arr = (b"cnumpy.core.multiarray\n_reconstruct\n" + b"cnumpy\nndarray\n" + i(0) + b"\x85"
           + s(b"b") + b"\x87R"
           + b"(" + i(1) + i(images.shape[0]) + i(images.shape[1]) + b"\x86" + dtype
           + b"\x89" + s(images.tobytes()) + b"tb")
    lab = b"]" + b"(" + b"".join(i(int(v)) for v in labels) + b"e"
    body = b"}" + b"(" + s(b"data") + arr + s(b"labels") + lab + b"u"
    return b"\x80\x02" + body + b"."


def test_python2_cifar_pickle(tmp_path):
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (N_PER, 3072), dtype=np.uint8)
    y = [3, 1, 4]
    raw = _py2_pickle(x, y)
    assert pickle.loads(raw, encoding="bytes")[b"labels"] == y  # the stream is valid pickle
    got = data.restricted_load(raw)
    assert set(got) == {b"data", b"labels"}
    np.testing.assert_array_equal(got[b"data"], x)
    assert got[b"labels"] == y
    (tmp_path / "b").write_bytes(raw)
    gx, gy = data.read_cifar_pickle(tmp_path / "b")
    np.testing.assert_array_equal(gx, x.reshape(-1, 3, 32, 32))
    assert gy.tolist() == y


class _Evil:
    marker = None

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_malicious_pickle_is_refused_before_running(tmp_path):
    marker = tmp_path / "pwned"
    _Evil.marker = marker
    payload = pickle.dumps({b"data": _Evil(), b"labels": [1]}, protocol=2)
    with pytest.raises(data.UnsafePickleError) as info:
        data.restricted_load(payload)
    msg = str(info.value)
    assert "system" in msg and "refusing" in msg and "numpy arrays" in msg
    assert isinstance(info.value, pickle.UnpicklingError)
    assert not marker.exists()
    # the same through the CIFAR loader, with the file name in the message
    folder = tmp_path / "cifar-10-batches-py"
    _write_py(folder, _batches())
    (folder / "data_batch_3").write_bytes(payload)
    with pytest.raises(data.UnsafePickleError, match="data_batch_3"):
        data.load_cifar10(str(tmp_path))
    assert not marker.exists()


@pytest.mark.parametrize("obj", [
    np.array([1, "a"], dtype=object),  # object arrays carry arbitrary pickles
    np.zeros(2, dtype=[("a", "f4")]),  # structured dtypes
    np.float64(3.0),  # numpy scalars are not arrays
    {"f": len},  # builtins
    [pickle.PickleError()],  # any other class
])
def test_everything_but_plain_arrays_is_refused(obj):
    with pytest.raises(data.UnsafePickleError):
        data.restricted_load(pickle.dumps(obj, protocol=2))


@pytest.mark.parametrize("protocol", range(0, pickle.HIGHEST_PROTOCOL + 1))
def test_legit_arrays_round_trip(protocol):
    rng = np.random.default_rng(3)
    obj = {"u8": rng.integers(0, 256, (4, 5), dtype=np.uint8),
           "f32be": rng.random((2, 3)).astype(">f4"),
           "fortran": np.asfortranarray(rng.random((3, 4))),
           "bool": np.array([True, False]),
           "nested": [b"bytes", ("tuple", 1, 2.5, None), {"k": np.arange(3, dtype=np.int16)}]}
    got = data.restricted_load(pickle.dumps(obj, protocol=protocol))
    for k in ("u8", "f32be", "fortran", "bool"):
        assert got[k].dtype == obj[k].dtype
        np.testing.assert_array_equal(got[k], obj[k])
    assert got["nested"][0] == b"bytes" and got["nested"][1] == ("tuple", 1, 2.5, None)
    np.testing.assert_array_equal(got["nested"][2]["k"], np.arange(3))


def test_missing_cifar_says_where_to_put_what(tmp_path):
    with pytest.raises(data.DatasetNotFoundError) as info:
        data.load_cifar10(str(tmp_path))
    msg = str(info.value)
    assert str(tmp_path) in msg and "data_batch_1.bin" in msg and "test_batch" in msg
    assert "cifar-10-batches-bin" in msg and "--data-dir" in msg
