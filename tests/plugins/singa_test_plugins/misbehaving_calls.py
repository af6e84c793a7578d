"""Plugins that load cleanly but misbehave when singa later calls into them.

One class per defect, selected by attribute name (``misbehaving_calls:ExitInCreateDevice``):
each registers backend ``evil`` (or communicator ``evilcomm``) whose callable named in the
class name exits the process, raises, or returns the wrong type. The loader must turn each
into a PluginError naming the plugin and the call, and keep everything else working.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from singa.backend import BACKEND_API_VERSION, BackendSpec, CommunicatorSpec, hookimpl

from .fakedev import KERNELS, FakeDevice, spec


def _exit(*args, **kwargs):
    sys.exit(3)


def _raise(*args, **kwargs):
    raise RuntimeError("simulated plugin bug")


def _backend(**fields):
    """A hook-holding class whose ``singa_backends`` returns backend ``evil`` (one FakeDevice,
    the fake kernels) with ``fields`` replaced."""
    record = {"name": "evil", "api_version": BACKEND_API_VERSION,
              "create_device": lambda index: FakeDevice("evil", index),
              "kernels": lambda device: KERNELS, "device_count": lambda: 1, **fields}

    class Plugin:
        @staticmethod
        @hookimpl
        def singa_backends():
            return [BackendSpec(**record)]

    return Plugin


def _communicator(**fields):
    fields.setdefault("create", lambda **kw: None)

    class Plugin:
        @staticmethod
        @hookimpl
        def singa_communicators():
            return [CommunicatorSpec(name="evilcomm", api_version=BACKEND_API_VERSION,
                                     **fields)]

    return Plugin


class _ExitingAttach(FakeDevice):
    def _attach(self, spec, kernel_table):
        sys.exit(3)


@dataclass(frozen=True, eq=True)
class _ExitingSpec(BackendSpec):
    def validate(self) -> None:
        sys.exit(3)


# ---- backend calls: (class, the call named in the PluginError)
ExitInCreateDevice = _backend(create_device=_exit)
RaiseInCreateDevice = _backend(create_device=_raise)
WrongTypeFromCreateDevice = _backend(create_device=lambda index: object())
ExitInDeviceCount = _backend(device_count=_exit)
WrongTypeFromDeviceCount = _backend(device_count=lambda: "1")
BoolFromDeviceCount = _backend(device_count=lambda: True)
ExitInKernels = _backend(kernels=_exit)
WrongTypeFromKernels = _backend(kernels=lambda dev: ["Add"])
UncallableKernel = _backend(kernels=lambda dev: {"Add": "not a function"})
ExitInAttach = _backend(create_device=lambda index: _ExitingAttach("evil", index))
ExitInProbe = _backend(probe=_exit)
WrongTypeFromProbe = _backend(probe=lambda: False)
ExitInDescribe = _backend(describe=_exit)
WrongTypeFromDescribe = _backend(describe=lambda: "one line, not a list")

# ---- communicator calls
ExitInCommunicatorCreate = _communicator(create=_exit)
RaiseInCommunicatorCreate = _communicator(create=_raise)
WrongTypeFromCommunicatorCreate = _communicator(create=lambda **kw: ("not", "a communicator"))
ExitInCommunicatorProbe = _communicator(probe=_exit)
WrongTypeFromCommunicatorProbe = _communicator(probe=lambda: "ok")


# ---- load-time calls
class ExitInHook:
    @staticmethod
    @hookimpl
    def singa_backends():
        sys.exit(3)


class ExitWhileIteratingHook:
    """The hook returns a generator: the plugin's code runs while the loader iterates it."""

    @staticmethod
    @hookimpl
    def singa_backends():
        yield spec("evil", count=1)
        sys.exit(3)


class ExitInValidate:
    @staticmethod
    @hookimpl
    def singa_backends():
        good = spec("evil", count=1)
        return [_ExitingSpec(**{f: getattr(good, f) for f in good.__dataclass_fields__})]
