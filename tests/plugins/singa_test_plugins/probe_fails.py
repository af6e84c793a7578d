"""A plugin whose backend is installed but cannot run here (its probe raises)."""

from singa.backend import hookimpl

from .fakedev import spec


def _probe():
    raise RuntimeError("no fakegpu found: driver libfakegpu 0.0 missing")


@hookimpl
def singa_backends():
    return [spec("fakegpu", probe=_probe)]
