"""A griffe extension (mkdocs.yml) that adds the members griffe's static analysis cannot see.

``singa.tensor`` and ``singa.autograd`` build part of their public API at import time from the
elementwise op records (``singa.ops._elementwise``): ``autograd.sigmoid``, ``autograd.Sigmoid``,
``tensor.sigmoid``, ... A static read of their sources finds none of those, and griffe's
``force_inspection`` would import every submodule of the package (``singa.__main__`` among
them, which parses ``sys.argv`` and exits). This extension imports only the modules it is given
and inspects them, and for each public name (the rule of
``tests/core/test_public_api_snapshot.py``: no leading underscore, not a module, defined in
singa; plus the names listed as ``extra``) it adds the inspected member where the static tree
lacks it and marks the name public, so re-exported classes (``autograd.Elu``) are rendered too;
a class of the module whose docstring is completed at run time (an Operator class that
declares its ``singa.autograd`` function adds its constructor's parameters) gets the runtime
text; and a class's methods made at import time (``Tensor.add_column`` from a table,
``CTensor.GetFloatValue`` from a factory), which the static tree lacks or holds as attributes,
are added from the inspected class.

The modules are imported from the handler's ``paths``, so the build needs singa's own
dependencies (numpy, pluggy) installed.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

import griffe

_logger = griffe.logger


def _public(name: str, value: Any, extra: set[str]) -> bool:
    if name in extra:
        return True
    if name.startswith("_") or inspect.ismodule(value):
        return False
    module = getattr(value, "__module__", None)
    return module is None or not isinstance(module, str) or module.startswith("singa")


def _prune(cls: griffe.Class) -> None:
    """Drop the members of an inspected class that have no docstring of their own: class
    attributes (inspection gives them their value's type docstring, e.g. ``bool``'s), the
    _math functions held as hooks and the generated methods, which the class docstring
    describes."""
    for name, member in list(cls.members.items()):
        if member.is_alias or member.is_attribute or not member.docstring:
            cls.del_member(name)


class RuntimeMembers(griffe.Extension):
    """Completes the static tree of each module in ``modules`` with its runtime public names.

    Parameters
    ----------
    modules : list of str
        Dotted module paths, in order: a module whose members are re-exported elsewhere
        (``singa.autograd._elementwise``) comes before the module that re-exports them.
    extra : dict of str to list of str, optional
        Per module, underscored names that are public nevertheless (``autograd._and``).
    """

    def __init__(self, modules: list[str], extra: dict[str, list[str]] | None = None) -> None:
        super().__init__()
        self.modules = list(modules)
        self.extra = {path: set(names) for path, names in (extra or {}).items()}

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader,
                   **kwargs: Any) -> None:
        """Add the runtime members of the configured modules that live in ``pkg``."""
        for path in self.modules:
            if path.split(".")[0] != pkg.name:
                continue
            self._complete(pkg, path, loader)

    def _complete(self, pkg: griffe.Module, path: str, loader: griffe.GriffeLoader) -> None:
        static = pkg if path == pkg.path else pkg.get_member(path.split(".", 1)[1])
        paths = [str(p) for p in loader.finder.search_paths]
        sys.path[:0] = paths
        try:
            runtime = importlib.import_module(path)
        except ImportError as error:
            raise griffe.ExtensionError(
                f"griffe_singa: cannot import {path} to document its generated members "
                f"({error}); the docs build needs singa's dependencies (numpy, pluggy)") from error
        finally:
            del sys.path[:len(paths)]
        inspected = self._inspect(path, paths, loader)
        extra = self.extra.get(path, set())
        added = 0
        for name, value in vars(runtime).items():
            if not _public(name, value, extra):
                continue
            if name not in static.members:
                if name not in inspected.members:
                    continue
                member = inspected.members[name]
                if not member.is_alias and member.is_class:
                    _prune(member)
                static.set_member(name, member)
                added += 1
            else:
                self._runtime_docstring(static.members[name], value, path, loader)
                if inspect.isclass(value):
                    self._made_methods(static.members[name], value, paths, loader)
            static.members[name].public = True
        _logger.debug("griffe_singa: %s: %d runtime members added", path, added)

    def _inspect(self, path: str, paths: list[str], loader: griffe.GriffeLoader) -> griffe.Module:
        """The inspected module ``path`` (once per build)."""
        cache = self.__dict__.setdefault("_inspected", {})
        if path not in cache:
            cache[path] = griffe.inspect(path, import_paths=paths,
                                         docstring_parser=loader.docstring_parser,
                                         docstring_options=loader.docstring_options)
        return cache[path]

    def _made_methods(self, member, cls: type, paths: list[str],
                      loader: griffe.GriffeLoader) -> None:
        """Add to the static class the public methods with a docstring that ``cls`` has at
        run time and the static tree lacks or holds as an attribute (``name = factory(...)``
        in the class body); each keeps the attribute's place in the source order."""
        try:
            target = member.final_target if member.is_alias else member
        except griffe.AliasResolutionError:
            return
        if not target.is_class or not getattr(cls, "__module__", "").startswith("singa"):
            return
        made = [name for name, value in vars(cls).items()
                if not name.startswith("_") and inspect.isfunction(value) and value.__doc__
                and (name not in target.members or target.members[name].is_attribute)]
        if not made:
            return
        inspected = self._inspect(cls.__module__, paths, loader).get_member(cls.__qualname__)
        for name in made:
            method = inspected.members[name]
            if name in target.members:
                method.lineno = target.members[name].lineno
                method.endlineno = target.members[name].endlineno
            target.set_member(name, method)
        _logger.debug("griffe_singa: %s: %d methods made at import time", target.path,
                      len(made))

    @staticmethod
    def _runtime_docstring(member, value: Any, path: str, loader: griffe.GriffeLoader) -> None:
        """A class of ``path`` whose docstring is completed at run time (an Operator class
        with its function's declaration adds its constructor's parameters): the runtime
        text replaces the static one."""
        if member.is_alias or not member.is_class or getattr(value, "__module__", None) != path:
            return
        text = inspect.cleandoc(value.__doc__ or "")
        if member.docstring is None or member.docstring.value == text:
            return
        member.docstring = griffe.Docstring(text, lineno=member.docstring.lineno,
                                            endlineno=member.docstring.endlineno, parent=member,
                                            parser=loader.docstring_parser,
                                            parser_options=loader.docstring_options)
