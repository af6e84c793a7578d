"""Checkpoints in the safetensors format (Hugging Face's), for ``Model.save_states`` and
``load_states`` when the path ends in ``.safetensors``.

The format: an 8-byte little-endian header length ``n``, ``n`` bytes of JSON mapping each
tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets into the data
that follows), an optional ``"__metadata__"`` of string pairs, then the raw little-endian data.
SINGA's state types (model, aux, optimizer) travel in the metadata key
:data:`STATE_TYPES_KEY`; a file without it (one written by another framework) holds model
states only.

Reading checks the header against the file before anything is allocated: its length, every
dtype, shape and offset range, and the total against ``max_bytes`` (what the model can hold),
so a stranger's file costs at most what it could legitimately contain. The tensors are then
read by the ``safetensors`` package, an optional dependency (``pip install safetensors``).
"""

from __future__ import annotations

import json
import math
import os
import struct

from ._shapes import check_shape
from .errors import CheckpointError, ExtensionUnavailableError, ShapeError

__all__ = ["STATE_TYPES_KEY", "is_safetensors", "read_safetensors", "write_safetensors"]

STATE_TYPES_KEY = "singa_state_types"
#: safetensors dtype name -> bytes per element, for the dtypes numpy holds (no BF16, no FP8)
_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "I16": 2, "U16": 2, "F16": 2, "I32": 4, "U32": 4,
             "F32": 4, "I64": 8, "U64": 8, "F64": 8}
_INSTALL = ('pip install safetensors (from a singa checkout: pip install ".[examples]", '
            "which includes it)")


def is_safetensors(fpath) -> bool:
    """Whether ``fpath`` names a safetensors checkpoint (decided by its extension)."""
    return os.fspath(fpath).lower().endswith(".safetensors")


def _package(action: str):
    try:
        import safetensors
        import safetensors.numpy
    except ImportError as exc:
        raise ExtensionUnavailableError(
            f"{action} a .safetensors checkpoint needs the safetensors package, which is not "
            f"installed ({exc}); install it with {_INSTALL}, or use a .zip path") from None
    return safetensors


def write_safetensors(path: str, arrays: dict, state_types: dict) -> None:
    """Write ``arrays`` (name -> numpy array) to ``path``, ``state_types`` in the metadata.

    The caller writes to a temporary path and renames it (``Model.save_states``).
    """
    import numpy as np

    pkg = _package("writing")
    bad = {n: str(a.dtype) for n, a in arrays.items()
           if a.dtype.kind not in "biuf" or a.dtype.itemsize not in (1, 2, 4, 8)}
    if bad:
        raise CheckpointError(f"safetensors cannot hold the dtypes {bad}; save as .zip")
    pkg.numpy.save_file({n: np.ascontiguousarray(a) for n, a in arrays.items()}, path,
                        metadata={STATE_TYPES_KEY: json.dumps(state_types)})


def _header(fh, fpath, size: int, max_header: int) -> tuple[dict, int]:
    """The parsed JSON header and its length, refused unless it fits the file and bound."""
    if size < 8:
        raise CheckpointError(f"{fpath} is not a safetensors file: {size} bytes, shorter "
                              "than the 8-byte header length")
    (n,) = struct.unpack("<Q", fh.read(8))
    if n > min(max_header, size - 8):
        raise CheckpointError(
            f"{fpath}: the safetensors header claims {n} bytes, but the file holds "
            f"{size - 8} after the length and a header may take at most {max_header}; the "
            "file is damaged or not a safetensors file")
    raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise CheckpointError(f"{fpath}: the safetensors header is not valid JSON ({exc})") \
            from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{fpath}: the safetensors header must be a JSON object")
    return header, n


def _entry(fpath, name, e, data_len: int):
    """``(shape, nbytes, begin)`` of one header entry, each field checked."""
    if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
        raise CheckpointError(f"{fpath}: safetensors entry {name!r} must hold exactly dtype, "
                              f"shape and data_offsets, got {e!r:.200}")
    dtype = e["dtype"]
    if dtype not in _ITEMSIZE:
        raise CheckpointError(f"{fpath}: tensor {name!r} has dtype {dtype!r}, which SINGA "
                              f"cannot hold (supported: {sorted(_ITEMSIZE)}); convert it "
                              "(e.g. BF16 to F32) before loading")
    try:
        if not isinstance(e["shape"], list):
            raise TypeError(f"tensor {name!r}: its shape {e['shape']!r:.100} is not a list")
        shape = check_shape(e["shape"], f"tensor {name!r}: its safetensors shape")
    except (ShapeError, TypeError) as exc:
        raise CheckpointError(f"{fpath}: {exc}") from None
    offs = e["data_offsets"]
    if (not isinstance(offs, list) or len(offs) != 2
            or not all(type(o) is int for o in offs) or not 0 <= offs[0] <= offs[1] <= data_len):
        raise CheckpointError(f"{fpath}: tensor {name!r} has data_offsets {offs!r:.100}; "
                              f"they must be [begin, end] with 0 <= begin <= end <= "
                              f"{data_len} (the data's size)")
    nbytes = math.prod(shape) * _ITEMSIZE[dtype]
    if offs[1] - offs[0] != nbytes:
        raise CheckpointError(f"{fpath}: tensor {name!r} of shape {shape} ({dtype}) needs "
                              f"{nbytes} bytes but its data_offsets span {offs[1] - offs[0]}")
    return shape, nbytes, offs[0]


def read_safetensors(fpath, max_bytes: int, max_header: int):
    """``(arrays by name, attributes by name)`` as :func:`singa.model.read_checkpoint`
    returns them, from a safetensors file; every bound is checked before reading data."""
    size = os.path.getsize(fpath)
    with open(fpath, "rb") as fh:
        header, n = _header(fh, fpath, size, max_header)
    data_len = size - 8 - n
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise CheckpointError(f"{fpath}: safetensors __metadata__ must map strings to strings")
    spans, total = [], 0
    entries = {}
    for name, e in header.items():
        shape, nbytes, begin = _entry(fpath, name, e, data_len)
        total += nbytes
        if total > max_bytes:
            raise CheckpointError(f"{fpath}: the tensors add up to more than {max_bytes} bytes, "
                                  "more than this model can hold; refusing an implausibly "
                                  "large file")
        entries[name] = (shape, e["dtype"])
        spans.append((begin, begin + nbytes, name))
    spans.sort()
    for (_, end, a), (begin, _, b) in zip(spans, spans[1:]):
        if begin < end:
            raise CheckpointError(f"{fpath}: tensors {a!r} and {b!r} overlap in the data")
    try:
        types = json.loads(meta.get(STATE_TYPES_KEY, "{}"))
    except ValueError as exc:
        raise CheckpointError(f"{fpath}: metadata {STATE_TYPES_KEY} is not JSON ({exc})") \
            from None
    if not isinstance(types, dict) or set(types) - set(entries):
        raise CheckpointError(f"{fpath}: metadata {STATE_TYPES_KEY} must map the file's "
                              "tensor names to state types")
    pkg = _package("reading")
    arrays = {}
    try:
        with pkg.safe_open(os.fspath(fpath), framework="numpy") as f:
            for name in entries:
                arrays[name] = f.get_tensor(name)
    except Exception as exc:  # the package's own checks (SafetensorError is not exported)
        raise CheckpointError(f"{fpath} is not a valid safetensors file ({exc})") from None
    # a tensor without a recorded type (any file another framework wrote) is a model state
    attrs = {name: {"state_type": types.get(name, 0), "shape": list(shape),
                    "dtype": str(arrays[name].dtype)}
             for name, (shape, _) in entries.items()}
    return arrays, attrs
