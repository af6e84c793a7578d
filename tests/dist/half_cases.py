"""float32 inputs where a float16 conversion's rounding decides, shared by the compiled
(``test_half``) and the numpy-fallback (``test_half_fallback``) conversion tests.

A module of its own because ``test_half`` skips as a whole without numba, and the fallback
tests must run exactly then.
"""

from __future__ import annotations

import numpy as np


def boundaries() -> list[np.ndarray]:
    """Every float16 value, the midpoints between neighbours (where rounding decides) and the
    float32 values one ulp either side of the midpoints: four float32 arrays of 65536."""
    h = np.arange(65536, dtype=np.uint16).view(np.float16)
    lo = h.astype(np.float32)
    with np.errstate(all="ignore"):
        nxt = np.nextafter(h, np.float16(np.inf)).astype(np.float32)
        mid = ((lo.astype(np.float64) + nxt.astype(np.float64)) / 2).astype(np.float32)
    bits = mid.view(np.uint32)
    return [lo, mid, (bits + np.uint32(1)).view(np.float32),
            (bits - np.uint32(1)).view(np.float32)]
