"""A well-behaved plugin: backend ``fake`` (2 devices, alias ``fk``), communicator ``fakecomm``."""

from singa.backend import BACKEND_API_VERSION, CommunicatorSpec, hookimpl

from .fakedev import spec

BACKEND = spec("fake", aliases=("fk",))
COMMUNICATOR = CommunicatorSpec(
    name="fakecomm", api_version=BACKEND_API_VERSION, create=lambda **kw: ("fakecomm", kw)
)


@hookimpl
def singa_backends():
    return [BACKEND]


@hookimpl
def singa_communicators():
    return [COMMUNICATOR]
