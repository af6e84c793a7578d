"""Lazy numba compilation: numba is imported on the first call of a jitted kernel, so that
plugin discovery and ``import singa_cpu`` stay cheap.

Kernels share compiled code through helpers (:func:`helper`): a helper is a plain Python
function until a kernel that names it as a module global is compiled; then the kernel is
compiled from a twin of itself (:func:`compilable`) whose globals bind each helper to its numba
dispatcher, so numba compiles the helper into the kernel. The kernel's disk cache must then
change when a helper does, which numba does not see (it checks the kernel's own source file
only): the twin's qualified name, which names the cache file, carries a digest of the
helpers' code. A helper written once for several element types names its type-specific
pieces as globals, rebound per type by :meth:`Helper.bind`.
"""

from __future__ import annotations

import functools
import hashlib
import types


class Helper:
    """A function that compiled kernels call, compiled (``numba.njit(**options)``) only as
    part of the first kernel compilation that needs it. Called from Python it runs as plain
    Python, like the kernels' ``py_func``."""

    def __init__(self, fn, options: dict):
        self.py_func = fn
        self.options = options
        self._dispatcher = None
        functools.update_wrapper(self, fn)

    def __call__(self, *args):
        return self.py_func(*args)

    def dispatcher(self):
        """The numba dispatcher, created on first use (numba types and compiles it when a
        kernel calling it is compiled)."""
        if self._dispatcher is None:
            import numba

            self._dispatcher = numba.njit(**self.options)(compilable(self.py_func))
        return self._dispatcher

    def bind(self, suffix: str, **names) -> Helper:
        """This helper's code with the module globals ``names`` rebound, as another helper
        named ``suffix`` more: one body written once and compiled per binding (float32's and
        float64's activations, say). Its digest covers the bound helpers as any others. The
        other globals are the module's as they are when ``bind`` is called, so bind after the
        names the body reads are defined."""
        fn = self.py_func
        twin = types.FunctionType(fn.__code__, {**fn.__globals__, **names},
                                  fn.__name__ + suffix, fn.__defaults__, fn.__closure__)
        twin.__qualname__ = fn.__qualname__ + suffix
        twin.__kwdefaults__ = fn.__kwdefaults__
        twin.__module__ = fn.__module__
        twin.__doc__ = fn.__doc__
        return Helper(twin, self.options)

    @functools.cached_property
    def digest(self) -> str:
        """A hash of what the compiled helper depends on: its code, options, the constants
        it reads from its module and the digests of the helpers it calls."""
        h = hashlib.sha256(repr(sorted(self.options.items())).encode())
        _hash_code(h, self.py_func.__code__)
        for name in sorted(_global_names(self.py_func.__code__)):
            value = self.py_func.__globals__.get(name)
            if isinstance(value, Helper):
                h.update(f"{name}={value.digest}".encode())
            elif isinstance(value, (bool, int, float, str, tuple)):
                h.update(f"{name}={value!r}".encode())
        return h.hexdigest()


def helper(**options):
    """Decorator: ``fn`` as a :class:`Helper` compiled with ``numba.njit(**options)`` into
    the :func:`njit` and ``pjit`` kernels that call it (``inline="always"`` for scalar math in
    vectorised loops: numba then inlines its IR before LLVM sees the loop). A kernel must name
    the helper as a global of its module (``from ._expf import exp_neg_parts32``), not as an
    attribute."""
    return lambda fn: Helper(fn, options)


def _global_names(code) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _hash_code(h, code) -> None:
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(h, const)
        else:
            h.update(repr(const).encode())


def compilable(fn, suffix: str = ""):
    """``fn`` as numba should compile it: itself when it calls no helper and ``suffix`` is
    empty, else a twin named ``fn.__qualname__ + suffix`` (plus the helpers' digest) whose
    globals bind the helpers it calls to their dispatchers. The name is what keys numba's disk
    cache file; ``suffix`` separates compilations of one function with other target options
    (see ``_parallel._parallel_twin``)."""
    helpers = {name: value for name in _global_names(fn.__code__)
               if isinstance(value := fn.__globals__.get(name), Helper)}
    if not helpers and not suffix:
        return fn
    glb = fn.__globals__
    if helpers:
        glb = {**glb, **{name: h.dispatcher() for name, h in helpers.items()}}
        digest = hashlib.sha256("".join(f"{name}={helpers[name].digest};"
                                        for name in sorted(helpers)).encode()).hexdigest()
        suffix += "__h" + digest[:16]
    twin = types.FunctionType(fn.__code__, glb, fn.__name__ + suffix, fn.__defaults__,
                              fn.__closure__)
    twin.__qualname__ = fn.__qualname__ + suffix
    twin.__kwdefaults__ = fn.__kwdefaults__
    twin.__module__ = fn.__module__
    return twin


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
    arrays call directly (see ``bind`` in docs/plugin-authoring.md). Helpers the kernel calls
    are compiled into it (see :func:`helper`)."""

    def deco(fn):
        compiled = None

        def serial():
            nonlocal compiled
            if compiled is None:
                import numba

                compiled = numba.njit(cache=True, **options)(compilable(fn))
            return compiled

        @functools.wraps(fn)
        def call(*args):
            return (compiled if compiled is not None else serial())(*args)

        call.py_func = fn
        call.serial = serial
        return call

    return deco
