"""Plugin discovery: entry points -> pluggy -> plain dicts of backend records.

Discovery runs once, lazily, on the first device query. Each entry point is loaded and called in
isolation; failures are recorded per plugin and surfaced when the user asks for that plugin's
device (or by ``python -m singa info``). See :mod:`singa.hookspecs` for the contract.
"""

from __future__ import annotations

import operator
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import _logging, config
from ._spec import BACKEND_API_VERSION, BackendSpec, CommunicatorSpec
from .errors import DeviceUnavailableError, PluginConflictError, PluginError, SingaError

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



#: What a plugin's code (import, hooks, probes, factories) may raise that the loader turns into
#: a PluginError instead of dying: every exception, plus SystemExit (a plugin calling
#: sys.exit() must not end the user's program) and GeneratorExit. KeyboardInterrupt still
#: propagates. :meth:`PluginRegistry.call` is the one place that catches them.
PLUGIN_FAULTS = (Exception, SystemExit, GeneratorExit)

#: load steps and created devices at DEBUG, plugins that failed to load at WARNING
log = _logging.get_logger("plugins")

#: The class every ``create_device`` must return an instance of. ``singa._device`` sits above
#: this module in the stack, so it registers its ``Device`` here when it is imported (no
#: object can be a Device before that module is loaded).
_DEVICE_BASE: list[type] = []


def expect_device_class(cls: type) -> None:
    """Make ``cls`` the type that :meth:`PluginRegistry.device` requires of a new device."""
    _DEVICE_BASE[:] = [cls]


def _brief(value: Any) -> str:
    """``value`` for a message: its type and a short repr."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _returns_none(value: Any) -> str | None:
    return None if value is None else "a probe returns None when it can run, else raises"


def _returns_count(value: Any) -> str | None:
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        try:
            if operator.index(value) >= 0:  # an int or a numpy integer
                return None
        except TypeError:
            pass
    return "device_count() must return a non-negative int"


def _returns_device(value: Any) -> str | None:
    if any(isinstance(value, base) for base in _DEVICE_BASE):
        return None
    return "create_device(index) must return a singa.backend.Device"


def _returns_kernel_table(value: Any) -> str | None:
    if not isinstance(value, Mapping):
        return "kernels(device) must return a mapping {op_name: kernel}"
    for key, fn in value.items():
        if not isinstance(key, str) or not callable(fn):
            return (f"kernels(device) must map op names to callables; entry {key!r} maps to "
                    f"{_brief(fn)}")
    return None


def _returns_lines(value: Any) -> str | None:
    if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
        return None
    return "describe() must return a list of str, one line per device"

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
    """A registered backend: its record and the plugin that provided it.

    Attributes
    ----------
    spec : BackendSpec
        The record a plugin's ``singa_backends`` hook returned.
    provider : Provider
        The plugin and distribution it came from (named in messages and conflicts).
    """

    spec: BackendSpec
    provider: Provider


@dataclass
class CommunicatorEntry:
    """A registered communicator: its record and the plugin that provided it.

    Attributes
    ----------
    spec : CommunicatorSpec
        The record a plugin's ``singa_communicators`` hook returned.
    provider : Provider
        The plugin and distribution it came from.
    """

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
        """One line for logs and ``python -m singa info``.

        Returns
        -------
        str
            The provider, the stage and the error's type and message.
        """
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

    # ------------------------------------------------------------------ the guard
    def call(self, provider: Provider, what: str, fn: Callable, args: tuple = (),
             kwargs: Mapping[str, Any] | None = None, *,
             returns: Callable[[Any], str | None] | None = None,
             passthrough: tuple[type[BaseException], ...] = (SingaError,)) -> Any:
        """``fn(*args, **kwargs)``, where ``fn`` is plugin code: the one place that calls into a
        plugin (import, hooks, probes, device_count, create_device, kernels, describe,
        communicator probe and create).

        Exceptions of the types in ``passthrough`` propagate unchanged (a singa error already
        names its problem; a probe's exception is how it says "cannot run here"). Anything
        else the call raises (any exception, SystemExit, GeneratorExit) and a result that
        ``returns`` refuses (it returns what was expected, or None to accept) become a
        :class:`~singa.errors.PluginError` naming the plugin and ``what``, recorded in
        :attr:`failures` (stage ``what``) so that ``python -m singa info`` reports it. The
        process, the other backends and the doctor keep working. KeyboardInterrupt
        propagates.
        """
        try:
            result = fn(*args, **(kwargs or {}))
            problem = returns(result) if returns is not None else None
        except passthrough:
            raise
        except PLUGIN_FAULTS as exc:
            raise self._fault(provider, what, exc) from exc
        if problem is not None:
            said = f"returned {_brief(result)}; {problem}"
            raise self._fault(provider, what, TypeError(said), said)
        return result

    def _fault(self, provider: Provider, what: str, exc: BaseException,
               said: str | None = None) -> PluginError:
        """Record ``exc`` as ``provider``'s failure at ``what``; the PluginError to raise
        (``said``: what the call did, when it raised nothing)."""
        import traceback

        trace = traceback.format_exc() if exc.__traceback__ is not None else ""
        failure = PluginFailure(provider, what, exc, trace)
        if not any(f.provider.plugin == provider.plugin and f.stage == what
                   for f in self.failures):
            self.failures.append(failure)
        log.debug(failure.summary())  # raised to the caller as a PluginError
        if said is None and isinstance(exc, SystemExit):
            said = f"called sys.exit({exc.code!r})"
        elif said is None:
            said = f"raised {type(exc).__name__}: {exc}"
        err = PluginError(
            f"{provider}: {what} {said}. singa stopped it there: the process and the other "
            f"backends keep working. If the plugin is at fault, report it to its authors or "
            f"disable it with SINGA_DISABLE_PLUGINS={provider.plugin}")
        err.plugin, err.call = provider.plugin, what
        return err

    def _strict(self) -> bool:
        return bool(config.get("SINGA_STRICT_PLUGINS"))

    # ------------------------------------------------------------------ loading
    def load(self) -> PluginRegistry:
        """Discover and register plugins (once)."""
        if self.loaded:
            return self
        with self._lock:
            if not self.loaded:
                _logging.configure()  # SINGA_LOG_LEVEL / SINGA_TRACE_PLUGINS as they are now
                self._load()
                self.loaded = True
                log.debug("plugins: %s; backends: %s; communicators: %s; failed: %d",
                          ", ".join(self.plugins) or "none", ", ".join(self.backends) or "none",
                          ", ".join(self.communicators) or "none", len(self.failures))
        return self

    def _trace(self, msg: str) -> None:
        log.debug(msg)

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
                module = self.call(provider, "import", ep.load, passthrough=())
            except PluginError as err:
                self._fail(provider, "import", err.__cause__ or err, strict)
                continue
            if pm.is_registered(module):
                self._trace(f"{provider}: module already registered, no-op")
                continue
            try:
                if pm.get_plugin(ep.name) is not None:
                    raise PluginConflictError(
                        f"two plugins use the entry-point name {ep.name!r}: "
                        f"{self.plugins.get(ep.name)} and {provider}"
                    )
                self.call(provider, "register", pm.register, (module,), {"name": ep.name},
                          passthrough=())
            except PluginError as err:
                self._fail(provider, "register", err.__cause__ or err, strict)
                continue
            self.plugins[ep.name] = provider
            # pluggy calls the hooks, one plugin at a time: a caller that leaves out every
            # other registered plugin, so one plugin's exception stops only its own records
            others = [p for p in pm.get_plugins() if p is not module]
            for hook_name, record_type, add in (
                    ("singa_backends", BackendSpec, self._add_backend),
                    ("singa_communicators", CommunicatorSpec, self._add_communicator)):
                caller = pm.subset_hook_caller(hook_name, remove_plugins=others)
                self._collect(provider, hook_name, caller, record_type, add, strict)
        pending = Provider("<pending>", None, None)
        try:  # a plugin implements a hook that does not exist
            self.call(pending, "validate", pm.check_pending, passthrough=())
        except PluginError as err:
            self._fail(pending, "validate", err.__cause__ or err, strict)

    def _fail(self, provider: Provider, stage: str, exc: BaseException, strict: bool) -> None:
        """Record a load-time failure (the guard may have recorded it already); re-raise it in
        strict mode."""
        import traceback

        failure = PluginFailure(provider, stage, exc, traceback.format_exc())
        self.failures[:] = [f for f in self.failures
                            if not (f.provider.plugin == provider.plugin and f.stage == stage)]
        self.failures.append(failure)
        log.warning("%s (the other plugins load; python -m singa info shows it)",
                    failure.summary())
        if strict:
            raise PluginError(
                f"{failure.summary()} (SINGA_STRICT_PLUGINS=1 re-raises; unset it to skip the "
                "plugin and keep the other backends)"
            ) from exc

    def _collect(self, provider: Provider, hook_name: str,
                 caller: Callable[[], Iterable[Iterable[Any] | None]],
                 record_type: type[BackendSpec] | type[CommunicatorSpec],
                 add: Callable[[Any, Provider, bool], None], strict: bool) -> None:
        """Records of ``provider`` from pluggy's ``caller`` of hook ``hook_name`` (the
        plugin's implementations only), each validated and handed to ``add``."""
        def gather() -> list[Any]:  # a hook may return a generator: iterating it runs plugin code
            return [rec for out in caller() for rec in (out if out is not None else ())]

        try:
            records: list[Any] = self.call(provider, "hook", gather, passthrough=())
        except PluginError as err:
            self._fail(provider, "hook", err.__cause__ or err, strict)
            return
        for rec in records:
            if not isinstance(rec, record_type):
                self._fail(provider, "validate", TypeError(
                    f"{hook_name} must return {record_type.__name__} records, "
                    f"got {type(rec).__name__}"), strict)
                continue
            try:
                self.call(provider, "validate", rec.validate, passthrough=())
            except PluginError as err:
                self._fail(provider, "validate", err.__cause__ or err, strict)
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
        """The backend name that ``name`` stands for (loading the plugins first).

        Parameters
        ----------
        name : str
            A backend name or one of a backend's ``aliases``.

        Returns
        -------
        str
            ``name`` itself when a backend has that name or no alias matches, else the name of
            the backend that declares ``name`` as an alias.
        """
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
        if isinstance(cause, PluginError):  # the probe exited or returned something
            raise PluginError(self._missing_message(name, cause)) from cause
        if cause is not None:
            raise DeviceUnavailableError(self._missing_message(name, cause))
        return entry

    def _probe(self, name: str) -> BaseException | None:
        """Run backend ``name``'s probe once; the exception it raised, or None.

        An exception is the probe's way to say "cannot run here"; a probe that exits or
        returns something else is a fault of the plugin (a PluginError as the cause, raised in
        strict mode)."""
        if name not in self._probe_errors:
            entry = self.backends[name]
            try:
                self.call(entry.provider, "probe", entry.spec.probe, returns=_returns_none,
                          passthrough=(Exception,))
                self._probe_errors[name] = None
            except PluginError as exc:
                self._probe_errors[name] = exc
                if self._strict():
                    raise
            except Exception as exc:  # noqa: BLE001  (the probe's answer, kept as the cause)
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
            except SingaError:
                if self._strict() and name in self._faulty():
                    raise
        return names

    def _faulty(self) -> set[str]:
        """Backends whose plugin failed a call (not merely unavailable here)."""
        bad = {f.provider.plugin for f in self.failures}
        return {n for n, e in self.backends.items() if e.provider.plugin in bad}

    def device_count(self, name: str) -> int:
        """Devices of backend ``name`` (``spec.device_count()`` through the guard)."""
        entry = self.backend(name)
        return int(self.call(entry.provider, "device_count", entry.spec.device_count,
                             returns=_returns_count))

    def describe(self, name: str) -> list[str]:
        """The doctor's lines of backend ``name`` (``spec.describe()`` through the guard)."""
        entry = self.backend(name)
        if entry.spec.describe is None:
            return []
        return list(self.call(entry.provider, "describe", entry.spec.describe,
                              returns=_returns_lines))

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

    def device(self, name: str, index: int = 0) -> Any:
        """Return the singleton device ``name:index``, creating it on first use.

        Typed ``Any``: the Device class lives in a layer above this one (see
        :func:`expect_device_class`), which this module does not import.
        """
        key = (self.resolve_name(name), index)
        dev = self._devices.get(key)
        if dev is not None:
            return dev
        with self._lock:
            dev = self._devices.get(key)
            if dev is not None:
                return dev
            entry = self.backend(name)
            count = self.device_count(name)
            if not 0 <= index < count:
                raise DeviceUnavailableError(
                    f"device {key[0]}:{index} was requested but backend {key[0]!r} has "
                    f"{count} device(s) (valid indices: 0..{count - 1}). "
                    "List devices with singa.device.list_devices() or python -m singa info."
                )
            prov, spec = entry.provider, entry.spec
            dev = self.call(prov, f"create_device({index})", spec.create_device, (index,),
                            returns=_returns_device)
            table = self.call(prov, "kernels(device)", spec.kernels, (dev,),
                              returns=_returns_kernel_table)
            self.call(prov, "Device._attach", dev._attach, (spec, table))
            self._devices[key] = dev
            log.debug("created device %s:%d (%s) with %d kernels, from %s", key[0], index,
                      type(dev).__name__, len(table), prov)
            return dev

    def communicator(self, name: str) -> CommunicatorEntry:
        """The usable communicator ``name``, its probe run through the guard.

        Parameters
        ----------
        name : str
            The communicator's name (``"mpi"``, ``"nccl"``, ``"socket"``).

        Returns
        -------
        CommunicatorEntry
            Its record and provider.

        Raises
        ------
        DeviceUnavailableError
            No plugin provides it, or its probe says it cannot run here.
        PluginError
            Its probe exited or returned something other than None.
        """
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
            self.call(entry.provider, "communicator probe", entry.spec.probe,
                      returns=_returns_none, passthrough=(Exception,))
        except PluginError:
            raise  # the probe exited or returned something: the plugin's fault
        except Exception as exc:  # noqa: BLE001  (the probe's answer: cannot run here)
            raise DeviceUnavailableError(
                f"communicator {name!r} ({entry.provider}) cannot run here: "
                f"{type(exc).__name__}: {exc}. fix: {entry.spec.install_hint}"
            ) from exc
        return entry

    def create_communicator(self, name: str, options: Mapping[str, Any],
                            returns: Callable[[Any], str | None]) -> Any:
        """``create(**options)`` of communicator ``name`` through the guard (``returns``
        checks the result: ``singa.dist`` passes "is a Communicator")."""
        entry = self.communicator(name)
        return self.call(entry.provider, "communicator create", entry.spec.create,
                         kwargs=options, returns=returns)


def _installed_entry_points() -> Iterable[Any]:
    import importlib.metadata as md

    return md.entry_points(group="singa")


def _provider_of(ep: Any) -> Provider:
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
