"""The structs passed by value to the ``.cu`` kernels (``PoolGeom``, ``PhiloxKey`` of
``cu/common.cuh``) are built by the launchers as size-one numpy arrays of a structured dtype,
the form cupy's kernel guide documents for custom types: cupy passes the array's bytes and the
driver copies ``sizeof(param)`` of them. So the dtype must have the C layout: every field's
offset and the struct's size are checked here with ``static_assert`` as NVRTC compiles the
header for sm_70/80/90 (the device's view) and as g++ compiles it for the host build the
conformance kit runs."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from singa_cuda import cu_kernels
from singa_cuda._nvrtc import NvrtcCompileError, checked_archs, compile_source, headers

C_TYPES = {np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int"}


def layout_checks(structs: dict) -> str:
    """CUDA C that compiles only if each ``{struct name: dtype}`` has the header's struct
    layout. NVRTC has no constant ``offsetof``, so the check goes through what fixes the
    offsets of a struct without padding: its size equals the sum of its fields' sizes, each
    field has the dtype's size, and positional aggregate initialisation puts value k in the
    dtype's field k (declaration order). The dtype's offsets must then be the prefix sums of
    its field sizes (checked in Python)."""
    lines = ['#include "common.cuh"']
    for name, dt in structs.items():
        sizes = [dt.fields[f][0].itemsize for f in dt.names]
        offsets = [dt.fields[f][1] for f in dt.names]
        assert offsets == [sum(sizes[:k]) for k in range(len(sizes))], f"{name}: padded dtype"
        assert dt.itemsize == sum(sizes), f"{name}: trailing padding in the dtype"
        probe = f"probe_{name}"
        values = ", ".join(str(k) for k in range(len(dt.names)))
        lines.append(f"constexpr {name} {probe}{{{values}}};")
        lines.append(f'static_assert(sizeof({name}) == {dt.itemsize}, "sizeof({name})");')
        for k, (field, size) in enumerate(zip(dt.names, sizes)):
            lines.append(f"static_assert({probe}.{field} == {k}, "
                         f'"{name}.{field} is not field {k}");')
            lines.append(f"static_assert(sizeof({probe}.{field}) == {size}, "
                         f'"{name}.{field} is not {size} bytes");')
    lines.append('extern "C" __global__ void layout_checked() {}')
    return "\n".join(lines) + "\n"


def test_launchers_build_size_one_structured_arrays():
    geom = cu_kernels.pool_geom((2, 3, 7, 9), dict(kernel=(3, 2), stride=(2, 2),
                                                   pads=(1, 0, 1, 0), mode="avg"))
    key = cu_kernels.philox_key((1, 2, 3, 4))
    for arr, dt in ((geom, cu_kernels.POOL_GEOM), (key, cu_kernels.PHILOX_KEY)):
        # cupy passes a numpy.ndarray by value only when it has exactly one element
        assert isinstance(arr, np.ndarray) and arr.shape == (1,) and arr.dtype == dt
        assert arr.flags.c_contiguous
    assert tuple(key[0]) == (1, 2, 3, 4)
    assert (geom["n"][0], geom["c"][0], geom["h"][0], geom["w"][0]) == (2, 3, 7, 9)
    assert (geom["kh"][0], geom["kw"][0], geom["sh"][0], geom["pt"][0]) == (3, 2, 2, 1)
    assert geom["is_max"][0] == 0 and geom["count_include_pad"][0] in (0, 1)
    # the struct's bytes are the fields in declaration order, native int32/uint32
    assert key.tobytes() == np.array([1, 2, 3, 4], np.uint32).tobytes()


@pytest.mark.parametrize("arch", checked_archs(), ids=lambda a: f"sm_{a}")
def test_dtypes_match_the_structs_as_nvrtc_compiles_them(arch):
    compile_source(layout_checks(cu_kernels.STRUCTS), "layout.cu", arch, sass=False,
                   include=headers())


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host build")
def test_dtypes_match_the_structs_as_gxx_compiles_them(tmp_path):
    from hostcu import SHIM

    for name, text in headers().items():
        (tmp_path / name).write_text(text)
    src = tmp_path / "layout.cpp"
    src.write_text(layout_checks(cu_kernels.STRUCTS))
    proc = subprocess.run(
        ["g++", "-x", "c++", "-std=c++17", "-fsyntax-only", f"-I{SHIM}", f"-I{tmp_path}",
         "-include", str(SHIM / "cuda_host_prelude.h"), str(src)],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_a_wrong_layout_fails_the_check():
    # the check can fail: fields swapped, or a 64-bit field where the struct has an int
    swapped = np.dtype([("k1", np.uint32), ("k0", np.uint32), ("call0", np.uint32),
                        ("call1", np.uint32)], align=True)
    wide = np.dtype([(f, np.int64 if f == "n" else np.int32)
                     for f in cu_kernels.POOL_GEOM.names])  # packed: 68 bytes
    for bad in ({"PhiloxKey": swapped}, {"PoolGeom": wide}):
        with pytest.raises(NvrtcCompileError, match="is not field|sizeof|bytes"):
            compile_source(layout_checks(bad), "layout.cu", 80, sass=False, include=headers())


def test_host_launch_passes_the_struct_bytes():
    from hostcu import struct_value

    geom = cu_kernels.pool_geom((1, 1, 4, 4), dict(kernel=(2, 2), stride=(2, 2), mode="max"))
    s = struct_value(geom)
    assert bytes(s) == geom.tobytes()
    assert (s.n, s.h, s.w, s.kh, s.ho, s.wo, s.is_max) == (1, 4, 4, 2, 2, 2, 1)
