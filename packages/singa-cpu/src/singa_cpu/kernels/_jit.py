"""Lazy numba compilation: numba is imported on the first call of a jitted kernel, so that
plugin discovery and ``import singa_cpu`` stay cheap."""

from __future__ import annotations

import functools


def vectorize_float(fn):
    """A float32/float64 numpy ufunc compiled from scalar ``fn`` on first use."""
    compiled = None

    @functools.wraps(fn)
    def call(*args, **kw):
        nonlocal compiled
        if compiled is None:
            import numba

            compiled = numba.vectorize(["float32(float32)", "float64(float64)"],
                                       cache=True)(fn)
        return compiled(*args, **kw)

    return call


def njit(**options):
    """``numba.njit(**options)`` applied on first call; ``fn.serial()`` returns the
    compiled numba dispatcher itself (compiling it if needed), which kernels bound to their
    arrays call directly (see ``bind`` in docs/plugin-authoring.md)."""

    def deco(fn):
        compiled = None

        def serial():
            nonlocal compiled
            if compiled is None:
                import numba

                compiled = numba.njit(cache=True, **options)(fn)
            return compiled

        @functools.wraps(fn)
        def call(*args):
            return (compiled if compiled is not None else serial())(*args)

        call.py_func = fn
        call.serial = serial
        return call

    return deco
