"""Issue 15 items 4 and 13: hostile and damaged checkpoints.

A small checkpoint that inflates to a gigabyte is refused while streaming, bounded by what
the model can hold (not by a 16 GiB constant); CRC failures, non-dict attribute entries and
directory paths raise CheckpointError with the problem and the fix; temporary files left by
killed saves are cleaned up by the next save.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest
from _shared_models import tiny
from singa import model, tensor
from singa.errors import CheckpointError


def _bomb(path, json_bytes: int):
    """A checkpoint whose states_attr.json inflates to ``json_bytes`` (deflate ~1000:1)."""
    m = tiny()
    m.save_states(str(path))
    with zipfile.ZipFile(path) as zf:
        npz = zf.read("tensor_dict.npz")
        attrs = json.loads(zf.read("states_attr.json"))
    body = json.dumps(attrs)
    pad = json_bytes - len(body)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("tensor_dict.npz", npz, compress_type=zipfile.ZIP_STORED)
        with zf.open("states_attr.json", "w", force_zip64=True) as fh:
            fh.write(body[:-1].encode())
            chunk = b" " * (1 << 20)
            for _ in range(pad // len(chunk)):
                fh.write(chunk)
            fh.write(b"}")
    return m


def test_json_zip_bomb_is_refused_without_inflating(tmp_path):
    path = tmp_path / "bomb.zip"
    _bomb(path, 64 << 20)
    assert os.path.getsize(path) < 1 << 20
    m = tiny()
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError, match="zip-bomb|zip bomb"):
        m.load_states(str(path))
    assert time.perf_counter() - t0 < 2


BOMB_UNDER_LIMIT = r"""
import resource, sys
sys.path[:0] = [{tests!r}, {shared!r}]
from _shared_models import tiny
from test_reliability_checkpoint import _bomb
from singa.errors import CheckpointError
_bomb({path!r}, 1 << 30)
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # 2 GiB address space
try:
    tiny().load_states({path!r})
except CheckpointError as e:
    print("REFUSED", e)
"""


def test_gigabyte_bomb_under_a_memory_limit(tmp_path):
    """The issue's case: 1 GiB of JSON; before the fix a bare MemoryError under a limit."""
    path = str(tmp_path / "big.zip")
    here = os.path.dirname(__file__)
    code = BOMB_UNDER_LIMIT.format(tests=here, shared=os.path.dirname(here), path=path)
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=600)
    assert "REFUSED" in proc.stdout, proc.stderr[-2000:]


def test_npy_header_claiming_more_than_its_member_is_refused(tmp_path):
    m = tiny()
    path = tmp_path / "ck.zip"
    m.save_states(str(path))
    with zipfile.ZipFile(path) as zf:
        attrs = zf.read("states_attr.json")
    name = next(iter(json.loads(attrs)))
    header = np.lib.format.header_data_from_array_1_0(np.zeros((1,), np.float32))
    header["shape"] = (1 << 28,)
    import io

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr(name + ".npy", buf.getvalue() + b"\0" * 4)
        for other in json.loads(attrs):
            if other != name:
                z.writestr(other + ".npy", buf.getvalue() + b"\0" * 4)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", inner.getvalue())
        zf.writestr("states_attr.json", attrs)
    with pytest.raises(CheckpointError, match="claims shape"):
        m.load_states(str(path))


def test_crc_failure_is_a_checkpoint_error(tmp_path):
    m = tiny()
    path = tmp_path / "ck.zip"
    m.save_states(str(path))
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("tensor_dict.npz")
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    raw[at] ^= 0xFF  # one byte of array data inside the stored npz
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match="damaged"):
        m.load_states(str(path))


@pytest.mark.parametrize("entry", [[1, 2], "x", 3, None, {"state_type": "weights"}])
def test_attrs_with_non_dict_values(tmp_path, entry):
    m = tiny()
    path = tmp_path / "ck.zip"
    m.save_states(str(path))
    with zipfile.ZipFile(path) as zf:
        npz = zf.read("tensor_dict.npz")
        attrs = json.loads(zf.read("states_attr.json"))
    attrs = {k: entry for k in attrs}
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tensor_dict.npz", npz)
        zf.writestr("states_attr.json", json.dumps(attrs))
    with pytest.raises(CheckpointError, match="state_type"):
        m.load_states(str(path))


def test_directory_path_says_directory(tmp_path):
    with pytest.raises(CheckpointError, match="is a directory"):
        tiny().load_states(str(tmp_path))


def test_stale_temp_files_are_removed_by_the_next_save(tmp_path):
    stale = tmp_path / ".singa-ckpt-dead.tmp"
    live = tmp_path / ".singa-ckpt-live.tmp"
    stale.write_bytes(b"partial")
    live.write_bytes(b"partial")
    old = time.time() - 2 * model._STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    tiny().save_states(str(tmp_path / "ck.zip"))
    assert not stale.exists()
    assert live.exists()  # may belong to a save in progress


def test_round_trip_still_works(tmp_path):
    m = tiny()
    path = str(tmp_path / "ck.zip")
    aux = {"step": tensor.from_numpy(np.array([7], np.int32))}
    m.save_states(path, aux)
    m2 = tiny()
    got = m2.load_states(path)
    for k, v in m.get_states().items():
        np.testing.assert_array_equal(tensor.to_numpy(m2.get_states()[k]), tensor.to_numpy(v))
    assert tensor.to_numpy(got["step"]).tolist() == [7]


