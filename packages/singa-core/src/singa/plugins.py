"""Deprecated: every name of this module is part of :mod:`singa.backend`, the one surface for
plugin authors; import it from there.

The names keep working: each access emits a DeprecationWarning that names the
``singa.backend`` spelling, as the versioning policy in ``docs/plugin-authoring.md`` promises
(at least two minor releases and six months, removed only with a ``BACKEND_API_VERSION`` bump).
"""

from __future__ import annotations

import warnings
from typing import Any

from . import _plugins, _spec, hookspecs

#: Each deprecated name and the private module that defines it (``singa.backend`` re-exports
#: the same objects; importing it here would be an upward import, see docs/architecture.md).
_MOVED = {
    "BACKEND_API_VERSION": _spec,
    "BackendSpec": _spec,
    "CommunicatorSpec": _spec,
    "KNOWN_BACKENDS": _plugins,
    "BackendEntry": _plugins,
    "PluginFailure": _plugins,
    "PluginRegistry": _plugins,
    "Provider": _plugins,
    "SingaPluginWarning": _plugins,
    "registry": _plugins,
    "set_registry": _plugins,
    "hookimpl": hookspecs,
}

__all__: list[str] = []  # nothing new should import from here


def __getattr__(name: str) -> Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module 'singa.plugins' has no attribute {name!r}; the plugin "
                             "author surface is singa.backend")
    warnings.warn(
        f"singa.plugins.{name} is deprecated: import it from singa.backend "
        f"(from singa.backend import {name})", DeprecationWarning, stacklevel=2)
    return getattr(home, name)


def __dir__() -> list[str]:
    return sorted(_MOVED)
