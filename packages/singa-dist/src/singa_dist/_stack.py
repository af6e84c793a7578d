"""The CUDA stack (12 or 13) of this environment's cupy, and the install commands that match
it, for singa-dist's messages.

cupy ships one wheel per CUDA major (``cupy-cuda12x``, ``cupy-cuda13x``) and NCCL one per major
too (``nvidia-nccl-cu12``, ``nvidia-nccl-cu13``); the two must match. Reading the installed
distributions costs about a millisecond and imports nothing, so plugin hooks can use it.
"""

from __future__ import annotations

import importlib.metadata as md

#: The cupy wheel of each CUDA major this package has extras for.
CUPY_WHEELS = {"12": "cupy-cuda12x", "13": "cupy-cuda13x"}


def _installed(dist: str) -> bool:
    try:
        md.distribution(dist)
    except md.PackageNotFoundError:
        return False
    return True


def cuda_major(load_cupy: bool = True) -> str | None:
    """``"12"`` or ``"13"``: the CUDA major of the installed cupy wheel. When no single wheel
    says (a source build of cupy, or two wheels), and ``load_cupy``, the major of the CUDA
    runtime cupy loads (``cupy.cuda.runtime.runtimeGetVersion()``, which needs no GPU).
    None when neither tells."""
    found = [major for major, wheel in CUPY_WHEELS.items() if _installed(wheel)]
    if len(found) == 1:
        return found[0]
    if not load_cupy:
        return None
    try:
        import cupy

        major = str(cupy.cuda.runtime.runtimeGetVersion() // 1000)
    except Exception:  # no cupy, or no CUDA runtime to load: nothing tells
        return None
    return major if major in CUPY_WHEELS else None


def nccl_fix(major: str | None) -> str:
    """The command that installs the NCCL library for CUDA ``major`` (both when unknown)."""
    if major in CUPY_WHEELS:
        return f"pip install nvidia-nccl-cu{major}"
    return ("pip install nvidia-nccl-cu12 (with cupy-cuda12x) or nvidia-nccl-cu13 (with "
            "cupy-cuda13x)")


def install_hint(major: str | None) -> str:
    """The command that installs the NCCL communicator's stack for CUDA ``major`` in a singa
    checkout: the meta-package's extra of that major (singa-cuda and singa-dist's NCCL; CUDA
    13's, what current drivers run, when unknown). Never ``singa[...]``: the package index's
    ``singa`` is an unrelated project."""
    known = major in CUPY_WHEELS
    m = major if major is not None and known else "13"
    hint = (f'pip install ".[cuda{m}]" in the singa checkout (singa-cuda and singa-dist with '
            f"{CUPY_WHEELS[m]}, nvidia-nccl-cu{m}), and a CUDA GPU")
    return hint if known else hint + '; ".[cuda12]" for a CUDA 12 driver'
