"""A second well-behaved plugin: backend ``other`` (1 device)."""

from singa.backend import hookimpl

from .fakedev import spec

BACKEND = spec("other", count=1)


@hookimpl
def singa_backends():
    return [BACKEND]
