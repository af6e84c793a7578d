"""A plugin implementing a hook that singa.hookspecs does not declare (a typo)."""

from singa.backend import hookimpl

from .fakedev import spec


@hookimpl
def singa_backend():  # missing "s": pluggy's check_pending reports it
    return [spec("typo")]
