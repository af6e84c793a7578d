"""A plugin from another distribution that also claims backend ``fake``."""

from singa.backend import hookimpl

from .fakedev import spec

BACKEND = spec("fake", count=1)


@hookimpl
def singa_backends():
    return [BACKEND]
