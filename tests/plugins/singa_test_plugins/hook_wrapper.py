"""Two implementations of ``singa_backends`` in one plugin, one of them a pluggy wrapper that
adds a record to what the inner one returned: only pluggy's hook calling gives both."""

from singa.backend import hookimpl

from .fakedev import spec


@hookimpl
def singa_backends():
    return [spec("inner")]


@hookimpl(wrapper=True, specname="singa_backends")
def add_outer():
    results = yield  # one list of records per inner implementation
    return [*results, [spec("outer")]]
