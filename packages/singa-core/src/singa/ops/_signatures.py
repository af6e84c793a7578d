"""Declared parameters, and functions compiled with exactly those parameters.

A record that declares a constructor or a function (the rearrangements,
:mod:`singa.ops._rearrangements`; the autograd functions, :mod:`singa.autograd._functions`)
lists its parameters as :class:`Param` (name, type and meaning as the docstring gives them,
default), and :func:`compile_def` writes the function out with that exact signature, as
:mod:`dataclasses` writes ``__init__``.
"""

from __future__ import annotations

import linecache
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Param", "REQUIRED", "compile_def", "param_entries", "wrap"]

#: The default of a parameter that has none.
REQUIRED: Any = object()


@dataclass(frozen=True)
class Param:
    """One parameter of a constructor or function: its name, its default (:data:`REQUIRED`:
    none), and its type and meaning as the docstring's Parameters section gives them."""

    name: str
    kind: str
    doc: str
    default: Any = REQUIRED


def param_entries(params, none: str = ", optional") -> str:
    """The entries of a NumPy-style Parameters section, one per :class:`Param`: a line
    ``name : kind``, with ``, default <repr>`` after it when it has a default (``none`` for a
    default of None), then its meaning, wrapped and indented by four spaces. The autograd
    functions, the Operator classes and the rearrangements render theirs with it.

    Examples
    --------
    >>> print(param_entries([Param("axis", "int", "The axis.", 0)]), end="")
    axis : int, default 0
        The axis.
    """
    return "".join(
        f"{p.name} : {p.kind}"
        + ("" if p.default is REQUIRED else none if p.default is None else
           f", default {p.default!r}")
        + f"\n{wrap(p.doc, '    ')}\n" for p in params)


def compile_def(name: str, lead: tuple[str, ...], params: tuple[Param, ...], body: str,
                env: dict, module: str, qualname: str | None = None) -> Callable:
    """``def name(*lead, <params>): <body>``, compiled in ``module``'s name with ``env`` as its
    globals, named ``qualname`` (default: ``name``).

    Written out and compiled, as :mod:`dataclasses` writes ``__init__``: the function has the
    exact signature SINGA's has (keyword calls, ``help()``, the public-API snapshot), and a
    call binds no ``*args`` on the way to the Operator. A parameter named ``*xs`` is a
    variadic one.
    """
    defaults = {f"_default_{p.name}": p.default for p in params if p.default is not REQUIRED}
    names = [p.name if p.default is REQUIRED else f"{p.name}=_default_{p.name}"
             for p in params]
    lines = "\n".join(f"    {line}" for line in body.splitlines())
    source = f"def {name}({', '.join([*lead, *names])}):\n{lines}\n"
    # a file name of its own, its text in linecache: tracebacks and inspect.getsource show it
    qualname = qualname or name
    filename = f"<singa generated {module}.{qualname}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    # the text is made of the records' parameter names only, never of a caller's values
    exec(compile(source, filename, "exec"), {**env, **defaults, "__name__": module}, namespace)
    function = namespace[name]
    function.__qualname__ = qualname
    return function


def wrap(text: str, indent: str = "") -> str:
    """``text`` filled to the docstrings' width (92 columns), each line indented."""
    if len(indent) + len(text) <= 92 and text.strip() == text and text.isprintable():
        return indent + text  # what fill gives for one short line, without its ~50 us
    return textwrap.fill(text, 92, initial_indent=indent, subsequent_indent=indent)
