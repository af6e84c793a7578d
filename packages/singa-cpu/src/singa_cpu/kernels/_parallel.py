"""Lazily compiled *parallel* numba kernels.

Like :func:`._jit.njit`, numba is imported on the first call only. Kernel modules write their
parallel loops with a module-level ``prange`` name bound to ``range`` (so the functions also
run as plain Python, e.g. under coverage); :func:`pjit` rebinds it to ``numba.prange`` just
before compiling, which is what makes numba split those loops across threads.
"""

from __future__ import annotations

import functools


def pjit(**options):
    """``numba.njit(parallel=True, cache=True, **options)`` applied on the first call."""

    def deco(fn):
        compiled = None

        @functools.wraps(fn)
        def call(*args):
            nonlocal compiled
            if compiled is None:
                import numba

                fn.__globals__["prange"] = numba.prange
                compiled = numba.njit(cache=True, parallel=True, **options)(fn)
            return compiled(*args)

        call.py_func = fn
        return call

    return deco
