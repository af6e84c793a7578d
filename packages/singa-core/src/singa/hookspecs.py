"""The contract between SINGA and its plugins: every hook a plugin may implement.

A plugin is a module named by an entry point in the group ``"singa"``::

    # pyproject.toml of a plugin distribution
    [project.entry-points.singa]
    mybackend = "singa_mybackend.plugin"

The module implements hooks from this file, marked with :data:`hookimpl`; a plugin imports the
marker, the records and everything else it needs from :mod:`singa.backend`, never from this
module. SINGA imports the module, registers it with a pluggy ``PluginManager`` and has pluggy
call its hooks once, on the first device query (never at ``import singa``), and stores the
returned records in plain dicts; no hook is ever called per operation. Each plugin is called
in isolation: pluggy calls one plugin's implementations at a time (a subset hook caller
without the other plugins), and the hooks and every callable of a record that singa calls later
(``probe``, ``device_count``, ``create_device``, ``kernels``, ``describe``, a communicator's
``probe`` and ``create``) run through one guard (``PluginRegistry.call``). If one raises, calls
``sys.exit()`` or returns the wrong type, the failure becomes a ``PluginError`` naming the
plugin and the call, recorded and reported by ``python -m singa info``, and every other
plugin keeps working.

The built-in backends (``singa-cpu``, ``singa-opencl``, ``singa-cuda``) register through these
same hooks.
"""

from __future__ import annotations

from collections.abc import Iterable

import pluggy

from ._spec import BACKEND_API_VERSION, BackendSpec, CommunicatorSpec

__all__ = [
    "PROJECT_NAME",
    "BACKEND_API_VERSION",
    "hookspec",
    "hookimpl",
    "singa_backends",
    "singa_communicators",
]

#: The pluggy project name and entry-point group.
PROJECT_NAME = "singa"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Decorator for hook implementations in plugin modules.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def singa_backends() -> Iterable[BackendSpec]:
    """Return the hardware backends this plugin provides.

    :returns: an iterable of :class:`singa.backend.BackendSpec` records (an empty one when the
        plugin has no backend). Each record names the backend (``"cpu"``, ``"opencl"``), the
        :data:`BACKEND_API_VERSION` it was written against, an availability ``probe``, a
        ``device_count`` function, a ``create_device(index)`` factory, and a ``kernels(device)``
        function returning that device's kernel table ``{op_name: kernel}`` (a callable or a
        :class:`singa.backend.Kernel` record).

    Ordering: plugins are called in entry-point order; the order of records is irrelevant.
    Returning a record equal to one already registered is a no-op; a record with the same
    ``name`` from a different distribution is a conflict, reported naming both distributions.
    A record whose ``api_version`` differs from :data:`BACKEND_API_VERSION` is skipped with a
    warning that names the upgrade to install.

    Only build the records here: import heavy libraries (numba, pyopencl, cupy) inside the
    record's callables, so that listing plugins stays cheap.

    Example::

        from singa.backend import BACKEND_API_VERSION, BackendSpec, Kernel, hookimpl

        @hookimpl
        def singa_backends():
            return [BackendSpec(
                name="mydev", api_version=BACKEND_API_VERSION,
                create_device=lambda index: MyDevice(index),
                kernels=lambda device: {"Add": my_add, "Copy": my_copy,
                                        "Sum": Kernel(my_sum, contiguous_inputs=True)},
                device_count=lambda: 1,
                install_hint="pip install singa-mydev",
                host_fallback=True)]
    """
    # pluggy never runs a hookspec's body; this one returns what a plugin with no backend
    # returns, so the declared return type holds for a type checker
    return ()


@hookspec
def singa_communicators() -> Iterable[CommunicatorSpec]:
    """Return the communicator backends (MPI, NCCL, sockets, ...) this plugin provides.

    :returns: an iterable of :class:`singa.backend.CommunicatorSpec` records, each naming a
        communicator (``"mpi"``), an availability ``probe`` and a ``create(**options)`` factory
        returning a :class:`singa.dist.Communicator`.

    Ordering and conflicts follow :func:`singa_backends`: equal records are a no-op, the same
    name from two distributions is a conflict naming both.

    Example::

        @hookimpl
        def singa_communicators():
            return [CommunicatorSpec(name="mpi", api_version=BACKEND_API_VERSION,
                                     create=lambda **kw: MpiCommunicator(**kw),
                                     install_hint='pip install ".[dist]"')]
    """
    # never run by pluggy (see singa_backends): the empty result of a plugin with none
    return ()
