"""What a kernel's failure becomes: the one translation of an exception raised inside backend
code while it runs an op (eager :meth:`singa.Device.exec`, graph replay, profiled replay).

Kernels are plugin code: a backend's kernel that raises a raw numpy, numba or driver error, or
calls ``sys.exit``, must not reach the user as that library's traceback or end the process.
The translation costs nothing until something is raised (a ``try`` around the call): errors
of :mod:`singa.errors` pass unchanged (they already name their problem), ``KeyboardInterrupt``
passes, ``MemoryError`` becomes :class:`~singa.errors.OutOfMemoryError`, ``SystemExit`` a
:class:`~singa.errors.PluginError`, anything else a :class:`~singa.errors.KernelError` naming
the op, the device and the backend's package, with the original exception chained for its
traceback.
"""

from __future__ import annotations

from .errors import KernelError, OutOfMemoryError, PluginError, SingaError

__all__ = ["FAULTS", "kernel_failure"]

#: What a kernel may raise that is translated (KeyboardInterrupt is not: it stops the run).
FAULTS = (Exception, SystemExit, GeneratorExit)


def _package_of(device) -> str:
    module = type(device).__module__ or ""
    return module.split(".", 1)[0] or "?"


def kernel_failure(exc: BaseException, op_name: str, device) -> SingaError:
    """The singa error to raise (``from exc``) for ``exc`` raised while ``device`` ran the
    kernel of ``op_name``; ``exc`` itself if it is already a singa error."""
    if isinstance(exc, SingaError):
        return exc
    where = f"{op_name or 'an operation'} on {getattr(device, 'name', '?')}"
    backend, package = getattr(device, "backend", "?"), _package_of(device)
    if isinstance(exc, SystemExit):
        return PluginError(
            f"{where}: the {backend!r} backend's kernel (package {package}) called "
            f"sys.exit({exc.code!r}); singa stopped it from ending the process. The device "
            "cannot be trusted after this: report it to the backend's authors")
    if isinstance(exc, MemoryError):
        return OutOfMemoryError(
            f"{where}: the kernel ran out of host memory ({exc or 'MemoryError'}); use a "
            "smaller batch or free tensors you no longer need")
    return KernelError(
        f"{where}: the {backend!r} backend's kernel (package {package}) failed with "
        f"{type(exc).__name__}: {exc}. This is a bug in the backend or an input it does not "
        "check; report it with this message (the original traceback is chained below)")
