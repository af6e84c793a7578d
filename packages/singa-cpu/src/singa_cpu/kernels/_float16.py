"""float16 support for kernels that compute in float32 (numba and BLAS have no half GEMM)."""

from __future__ import annotations

import functools

import numpy as np


def via_float32(kernel):
    """Wrap ``kernel(ins, outs, attrs)`` so float16 arrays are computed in float32.

    float16 inputs are converted to float32 copies, the kernel writes float32 temporaries,
    which are rounded into the float16 outputs afterwards. Other dtypes pass straight through.
    Outputs aliasing inputs (in-place updates) stay correct: every input is read from its copy
    before the outputs are written.
    """

    @functools.wraps(kernel)
    def wrapped(ins, outs, attrs):
        if not any(a.dtype == np.float16 for a in outs):
            return kernel(ins, outs, attrs)
        ins32 = [a.astype(np.float32) if a.dtype == np.float16 else a for a in ins]
        outs32 = [np.empty(o.shape, np.float32) if o.dtype == np.float16 else o for o in outs]
        kernel(ins32, outs32, attrs)
        for o, t in zip(outs, outs32):
            if o is not t:
                np.copyto(o, t, casting="same_kind")

    return wrapped
