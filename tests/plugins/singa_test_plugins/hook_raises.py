"""A plugin whose singa_backends hook raises."""

from singa.backend import hookimpl


@hookimpl
def singa_backends():
    raise RuntimeError("simulated hook failure: driver query crashed")
