"""Public surface for plugin authors and for inspecting discovery.

Plugin authors need :class:`BackendSpec`, :data:`hookimpl` and :data:`BACKEND_API_VERSION`
(see :mod:`singa.hookspecs` for the contract). :func:`registry` returns what discovery found.
"""

from ._plugins import (
    KNOWN_BACKENDS,
    BackendEntry,
    PluginFailure,
    PluginRegistry,
    Provider,
    SingaPluginWarning,
    registry,
    set_registry,
)
from ._spec import BACKEND_API_VERSION, BackendSpec, CommunicatorSpec
from .hookspecs import hookimpl

__all__ = [
    "BACKEND_API_VERSION",
    "KNOWN_BACKENDS",
    "BackendEntry",
    "BackendSpec",
    "CommunicatorSpec",
    "PluginFailure",
    "PluginRegistry",
    "Provider",
    "SingaPluginWarning",
    "hookimpl",
    "registry",
    "set_registry",
]
