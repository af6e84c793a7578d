"""A plugin built against another backend API version."""

from singa.backend import BACKEND_API_VERSION, hookimpl

from .fakedev import spec


@hookimpl
def singa_backends():
    return [spec("olddev", api_version=BACKEND_API_VERSION + 1)]
