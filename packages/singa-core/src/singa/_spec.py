"""Typed records that plugins return from hooks."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Version of the backend interface (Device, Allocator, kernel calling convention, op table
#: names). A backend built for another version is skipped with a warning.
BACKEND_API_VERSION = 1

_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def _no_probe() -> None:
    return None


def _one() -> int:
    return 1


@dataclass(frozen=True, eq=True)
class BackendSpec:
    """A hardware backend, as returned by the ``singa_backends`` hook.

    Attributes
    ----------
    name:
        Lower-case device-string prefix (``"cpu"``, ``"opencl"``, ``"cuda"``).
    api_version:
        The :data:`BACKEND_API_VERSION` the backend was written against.
    create_device:
        ``create_device(index) -> Device``; called once per index (devices are singletons).
    kernels:
        ``kernels(device) -> {op_name: kernel}``; the table for one device. A kernel is called
        as ``kernel(ins, outs, attrs)`` with lists of native arrays (see ``singa.ops``).
    probe:
        Raises an exception explaining why the backend cannot run here (no driver, no
        hardware); returns ``None`` when it can.
    device_count:
        Number of devices of this backend on this machine.
    aliases:
        Other device-string prefixes accepted for this backend (e.g. ``"gpu"``).
    install_hint:
        The command that installs this backend
        (``'pip install ".[cuda13]" in the singa checkout'``).
    host_fallback:
        Opt in to running ops without a kernel on the host through the op's numpy reference
        (copy in, compute, copy back); warns once per op and is counted in the device stats.
    describe:
        Optional ``describe() -> list[str]``: one line per visible device for the doctor.
    """

    name: str
    api_version: int
    create_device: Callable[[int], Any]
    kernels: Callable[[Any], Mapping[str, Callable]]
    probe: Callable[[], None] = _no_probe
    device_count: Callable[[], int] = _one
    aliases: tuple[str, ...] = ()
    install_hint: str = ""
    host_fallback: bool = False
    describe: Callable[[], list[str]] | None = None

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first invalid field."""
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(f"BackendSpec.name must match {_NAME_RE.pattern}, got {self.name!r}")
        if type(self.api_version) is not int:
            raise ValueError(f"BackendSpec.api_version must be an int, got {self.api_version!r}")
        for fname in ("create_device", "kernels", "probe", "device_count"):
            if not callable(getattr(self, fname)):
                raise ValueError(f"BackendSpec.{fname} of backend {self.name!r} is not callable")
        if not isinstance(self.aliases, tuple) or not all(
            isinstance(a, str) and _NAME_RE.match(a) for a in self.aliases
        ):
            raise ValueError(f"BackendSpec.aliases must be a tuple of names, got {self.aliases!r}")


@dataclass(frozen=True, eq=True)
class CommunicatorSpec:
    """A communicator backend, as returned by the ``singa_communicators`` hook."""

    name: str
    api_version: int
    create: Callable[..., Any]
    probe: Callable[[], None] = _no_probe
    install_hint: str = ""
    options: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first invalid field (the name's form, an
        ``api_version`` that is not an int, a ``create`` or ``probe`` that is not callable)."""
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise ValueError(
                f"CommunicatorSpec.name must match {_NAME_RE.pattern}, got {self.name!r}"
            )
        if type(self.api_version) is not int:
            raise ValueError(f"CommunicatorSpec.api_version must be an int: {self.api_version!r}")
        if not callable(self.create) or not callable(self.probe):
            raise ValueError(f"CommunicatorSpec {self.name!r}: create and probe must be callable")
