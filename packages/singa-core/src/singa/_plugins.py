"""Plugin discovery: entry points -> pluggy -> plain dicts of backend records.

Discovery runs once, lazily, on the first device query. Each entry point is loaded and called in
isolation; failures are recorded per plugin and surfaced when the user asks for that plugin's
device (or by ``python -m singa info``). See :mod:`singa.hookspecs` for the contract.
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import config
from ._spec import BACKEND_API_VERSION, BackendSpec, CommunicatorSpec
from .errors import DeviceUnavailableError, PluginConflictError, PluginError

#: Where each well-known backend comes from, for "not installed" messages.
KNOWN_BACKENDS = {
    "cpu": 'pip install . in the singa checkout (singa-core and the CPU backend)',
    "cuda": 'pip install ".[cuda13]" in the singa checkout (".[cuda12]" for a CUDA 12 driver)',
    "opencl": 'pip install ".[opencl]" in the singa checkout',
}
KNOWN_COMMUNICATORS = {
    "mpi": 'pip install ".[dist]" in the singa checkout',
    "nccl": 'pip install ".[cuda13]" in the singa checkout (".[cuda12]" for a CUDA 12 driver)',
    "socket": 'pip install ".[dist]" in the singa checkout',
}



#: What a plugin's code (import, hooks, probes) may raise that the loader records instead of
#: dying: every exception, plus SystemExit (a plugin calling sys.exit() at import must not end
#: the user's program) and GeneratorExit. KeyboardInterrupt still propagates.
PLUGIN_FAULTS = (Exception, SystemExit, GeneratorExit)

class SingaPluginWarning(UserWarning):
    """A plugin was skipped (API version mismatch) or misbehaved without being fatal."""


@dataclass
class Provider:
    """Which plugin and distribution a record came from."""

    plugin: str
    dist: str | None
    version: str | None

    def __str__(self) -> str:
        if self.dist:
            return f"plugin {self.plugin!r} from distribution {self.dist} {self.version}"
        return f"plugin {self.plugin!r}"


@dataclass
class BackendEntry:
    spec: BackendSpec
    provider: Provider


@dataclass
class CommunicatorEntry:
    spec: CommunicatorSpec
    provider: Provider


@dataclass
class PluginFailure:
    """A plugin that could not be used, and why."""

    provider: Provider
    stage: str  # "import", "register", "hook", "validate"
    error: BaseException
    traceback: str = ""

    def summary(self) -> str:
        return f"{self.provider} failed at {self.stage}: {type(self.error).__name__}: {self.error}"


@dataclass
class PluginRegistry:
    """The result of discovery: backends, communicators, failures, skips and conflicts.

    ``entry_points`` returns the entry points to consider (default: the installed ones in the
    ``singa`` group); tests pass their own to get a fresh, isolated registry.
    """

    entry_points: Callable[[], Iterable[Any]] | None = None
    backends: dict[str, BackendEntry] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    communicators: dict[str, CommunicatorEntry] = field(default_factory=dict)
    failures: list[PluginFailure] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    conflicts: dict[str, list[Provider]] = field(default_factory=dict)
    plugins: dict[str, Provider] = field(default_factory=dict)
    loaded: bool = False
    _devices: dict[tuple[str, int], Any] = field(default_factory=dict)
    _probe_errors: dict[str, BaseException | None] = field(default_factory=dict)
    _lock: Any = field(default_factory=threading.RLock)

    # ------------------------------------------------------------------ loading
    def load(self) -> PluginRegistry:
        """Discover and register plugins (once)."""
        if self.loaded:
            return self
        with self._lock:
            if not self.loaded:
                self._load()
                self.loaded = True
        return self

    def _trace(self, msg: str) -> None:
        if config.get("SINGA_TRACE_PLUGINS"):
            print(f"[singa plugins] {msg}", file=sys.stderr)

    def _load(self) -> None:
        import pluggy

        from . import hookspecs

        strict = config.get("SINGA_STRICT_PLUGINS")
        allow = config.get("SINGA_PLUGINS")
        block = config.get("SINGA_DISABLE_PLUGINS")
        pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        pm.add_hookspecs(hookspecs)
        eps = list(self.entry_points() if self.entry_points else _installed_entry_points())
        seen: dict[tuple[str, str], bool] = {}
        for ep in eps:
            key = (ep.name, ep.value)
            if key in seen:  # the same entry point reachable twice (editable + wheel)
                continue
            seen[key] = True
            provider = _provider_of(ep)
            if allow is not None and ep.name not in allow:
                self.skipped[ep.name] = "not listed in SINGA_PLUGINS"
                self._trace(f"skip {provider}: not in SINGA_PLUGINS")
                continue
            if ep.name in block:
                self.skipped[ep.name] = "listed in SINGA_DISABLE_PLUGINS"
                self._trace(f"skip {provider}: in SINGA_DISABLE_PLUGINS")
                continue
            self._trace(f"load {provider}: {ep.value}")
            try:
                module = ep.load()
            except PLUGIN_FAULTS as exc:
                self._fail(provider, "import", exc, strict)
                continue
            try:
                if pm.is_registered(module):
                    self._trace(f"{provider}: module already registered, no-op")
                    continue
                if pm.get_plugin(ep.name) is not None:
                    raise PluginConflictError(
                        f"two plugins use the entry-point name {ep.name!r}: "
                        f"{self.plugins.get(ep.name)} and {provider}"
                    )
                pm.register(module, name=ep.name)
            except PLUGIN_FAULTS as exc:
                self._fail(provider, "register", exc, strict)
                continue
            self.plugins[ep.name] = provider
            for impl in pm.hook.singa_backends.get_hookimpls():
                if impl.plugin is module:
                    self._collect(provider, impl.function, BackendSpec, self._add_backend, strict)
            for impl in pm.hook.singa_communicators.get_hookimpls():
                if impl.plugin is module:
                    self._collect(
                        provider, impl.function, CommunicatorSpec, self._add_communicator, strict
                    )
        try:
            pm.check_pending()
        except PLUGIN_FAULTS as exc:  # a plugin implements a hook that does not exist
            self._fail(Provider("<pending>", None, None), "validate", exc, strict)

    def _fail(self, provider: Provider, stage: str, exc: BaseException, strict: bool) -> None:
        import traceback

        failure = PluginFailure(provider, stage, exc, traceback.format_exc())
        self.failures.append(failure)
        self._trace(failure.summary())
        if strict:
            raise PluginError(
                f"{failure.summary()} (SINGA_STRICT_PLUGINS=1 re-raises; unset it to skip the "
                "plugin and keep the other backends)"
            ) from exc

    def _collect(self, provider, hook, record_type, add, strict) -> None:
        try:
            records = hook()
            records = list(records) if records is not None else []
        except PLUGIN_FAULTS as exc:
            self._fail(provider, "hook", exc, strict)
            return
        for rec in records:
            try:
                if not isinstance(rec, record_type):
                    raise TypeError(
                        f"{hook.__name__} must return {record_type.__name__} records, "
                        f"got {type(rec).__name__}"
                    )
                rec.validate()
            except PLUGIN_FAULTS as exc:
                self._fail(provider, "validate", exc, strict)
                continue
            if rec.api_version != BACKEND_API_VERSION:
                reason = (
                    f"{record_type.__name__} {rec.name!r} from {provider} targets backend API "
                    f"v{rec.api_version}, but this singa-core speaks v{BACKEND_API_VERSION}; "
                    f"install matching versions (e.g. pip install -U singa-core "
                    f"{provider.dist or provider.plugin}) so both agree"
                )
                self.skipped[rec.name] = reason
                warnings.warn(reason, SingaPluginWarning, stacklevel=2)
                continue
            add(rec, provider, strict)

    def _add_backend(self, spec: BackendSpec, provider: Provider, strict: bool) -> None:
        old = self.backends.get(spec.name)
        if old is not None:
            if old.spec == spec:
                return  # the same record registered twice
            self._conflict(spec.name, old.provider, provider, strict)
            return
        if spec.name in self.conflicts:
            self.conflicts[spec.name].append(provider)
            return
        self.backends[spec.name] = BackendEntry(spec, provider)
        for alias in spec.aliases:
            self.aliases.setdefault(alias, spec.name)
        self._trace(f"{provider}: backend {spec.name!r}")

    def _add_communicator(self, spec: CommunicatorSpec, provider: Provider, strict: bool) -> None:
        old = self.communicators.get(spec.name)
        if old is not None:
            if old.spec == spec:
                return
            self._conflict("communicator:" + spec.name, old.provider, provider, strict)
            return
        self.communicators[spec.name] = CommunicatorEntry(spec, provider)

    def _conflict(self, name: str, first: Provider, second: Provider, strict: bool) -> None:
        self.conflicts[name] = [first, second]
        self.backends.pop(name, None)
        msg = self._conflict_message(name)
        if strict:
            raise PluginConflictError(msg)
        warnings.warn(msg, SingaPluginWarning, stacklevel=3)

    def _conflict_message(self, name: str) -> str:
        who = " and ".join(str(p) for p in self.conflicts[name])
        return (
            f"backend {name!r} is claimed by two distributions: {who}. Uninstall one of them "
            f"(pip uninstall ...) or disable one with SINGA_DISABLE_PLUGINS=<plugin name>"
        )

    # ------------------------------------------------------------------ lookup
    def resolve_name(self, name: str) -> str:
        self.load()
        return self.aliases.get(name, name) if name not in self.backends else name

    def backend(self, name: str) -> BackendEntry:
        """Return the usable backend ``name`` or raise one clear DeviceUnavailableError."""
        self.load()
        name = self.resolve_name(name)
        if name in self.conflicts:
            raise PluginConflictError(self._conflict_message(name))
        entry = self.backends.get(name)
        if entry is None:
            raise DeviceUnavailableError(self._missing_message(name, None))
        cause = self._probe(name)
        if cause is not None:
            raise DeviceUnavailableError(self._missing_message(name, cause))
        return entry

    def _probe(self, name: str) -> BaseException | None:
        """Run backend ``name``'s probe once; the exception it raised, or None."""
        if name not in self._probe_errors:
            try:
                self.backends[name].spec.probe()
                self._probe_errors[name] = None
            except PLUGIN_FAULTS as exc:
                self._probe_errors[name] = exc
        return self._probe_errors[name]

    def available_backends(self) -> list[str]:
        """Names of backends whose probe passes."""
        self.load()
        names = []
        for name in self.backends:
            try:
                self.backend(name)
                names.append(name)
            except PLUGIN_FAULTS:
                pass
        return names

    def _missing_message(self, name: str, cause: BaseException | None) -> str:
        usable = []
        for other in self.backends:
            if other == name or other in self.conflicts:
                continue
            if self._probe(other) is None:
                usable.append(other)
        avail = ", ".join(sorted(usable))
        lines = [f"device backend {name!r} was requested but cannot be used."]
        if cause is not None:
            prov = self.backends[name].provider
            lines.append(f"  cause: {prov} is installed but its probe failed: "
                         f"{type(cause).__name__}: {cause}")
        else:
            failed = [f for f in self.failures if f.provider.plugin == name]
            if failed:
                for f in failed:
                    lines.append(f"  cause: {f.summary()}")
            elif self.failures and name not in self.skipped:
                # a plugin's entry-point name need not be its backend name
                lines.append(f"  cause: no loaded plugin provides backend {name!r}; these "
                             "plugins failed to load and may be the one:")
                for f in self.failures:
                    lines.append(f"    - {f.summary()}")
            elif name in self.skipped:
                lines.append(f"  cause: {self.skipped[name]}")
            else:
                lines.append(f"  cause: no installed plugin provides backend {name!r}.")
        lines.append(f"  available backends: {avail or 'none'}")
        entry = self.backends.get(name)
        if cause is not None:
            lines.append("  fix: the backend is installed; resolve the cause above (driver, "
                         "hardware or a newer backend release)")
        else:
            hint = (entry.spec.install_hint if entry and entry.spec.install_hint else None) \
                or KNOWN_BACKENDS.get(name)
            if hint:
                lines.append(f"  fix: {hint}")
        lines.append("  diagnose: python -m singa info")
        return "\n".join(lines)

    def device(self, name: str, index: int = 0):
        """Return the singleton device ``name:index``, creating it on first use."""
        key = (self.resolve_name(name), index)
        dev = self._devices.get(key)
        if dev is not None:
            return dev
        with self._lock:
            dev = self._devices.get(key)
            if dev is not None:
                return dev
            entry = self.backend(name)
            count = entry.spec.device_count()
            if not 0 <= index < max(count, 0):
                raise DeviceUnavailableError(
                    f"device {key[0]}:{index} was requested but backend {key[0]!r} has "
                    f"{count} device(s) (valid indices: 0..{count - 1}). "
                    "List devices with singa.device.list_devices() or python -m singa info."
                )
            dev = entry.spec.create_device(index)
            dev._attach(entry.spec, entry.spec.kernels(dev))
            self._devices[key] = dev
            return dev

    def communicator(self, name: str) -> CommunicatorEntry:
        self.load()
        entry = self.communicators.get(name)
        if entry is None:
            hint = KNOWN_COMMUNICATORS.get(name, "install a plugin that provides it")
            avail = ", ".join(sorted(self.communicators)) or "none"
            raise DeviceUnavailableError(
                f"communicator {name!r} was requested but no installed plugin provides it. "
                f"available communicators: {avail}. fix: {hint}"
            )
        try:
            entry.spec.probe()
        except PLUGIN_FAULTS as exc:
            raise DeviceUnavailableError(
                f"communicator {name!r} ({entry.provider}) cannot run here: "
                f"{type(exc).__name__}: {exc}. fix: {entry.spec.install_hint}"
            ) from exc
        return entry


def _installed_entry_points():
    import importlib.metadata as md

    return md.entry_points(group="singa")


def _provider_of(ep) -> Provider:
    dist = getattr(ep, "dist", None)
    if dist is not None:
        return Provider(ep.name, dist.metadata["Name"], dist.version)
    return Provider(ep.name, None, None)


_REGISTRY: PluginRegistry | None = None
_REGISTRY_LOCK = threading.Lock()


def registry() -> PluginRegistry:
    """The process-wide registry (loaded on first use)."""
    global _REGISTRY
    reg = _REGISTRY
    if reg is None:
        with _REGISTRY_LOCK:
            if _REGISTRY is None:
                _REGISTRY = PluginRegistry()
            reg = _REGISTRY
    return reg.load()


#: Called with no arguments after :func:`set_registry` swaps the registry. Layers above this
#: one that cache what the registry made (the default device) register here, so the loader
#: never imports them (the stack's import order runs one way: see docs/architecture.md).
_ON_REGISTRY_CHANGE: list[Callable[[], None]] = []


def on_registry_change(callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever :func:`set_registry` installs another registry."""
    if callback not in _ON_REGISTRY_CHANGE:
        _ON_REGISTRY_CHANGE.append(callback)


def set_registry(reg: PluginRegistry | None) -> PluginRegistry | None:
    """Install ``reg`` as the process-wide registry (None: rediscover); returns the old one."""
    global _REGISTRY
    old, _REGISTRY = _REGISTRY, reg
    for callback in list(_ON_REGISTRY_CHANGE):
        callback()
    return old
