"""Plugins returning invalid records: one module per defect, selected by attribute name.

``bad_records:WrongType`` etc. are classes whose ``singa_backends`` hook returns the defect,
so one entry point names exactly one broken plugin object.
"""

from singa.backend import hookimpl

from .fakedev import spec


class WrongType:
    """Returns a dict instead of a BackendSpec."""

    @staticmethod
    @hookimpl
    def singa_backends():
        return [{"name": "dictdev", "api_version": 1}]


class InvalidName:
    """Returns a backend named with capitals and a dash."""

    @staticmethod
    @hookimpl
    def singa_backends():
        return [spec("My-Dev")]


class NotCallable:
    """Returns a backend whose create_device is a string."""

    @staticmethod
    @hookimpl
    def singa_backends():
        s = spec("uncallable")
        object.__setattr__(s, "create_device", "not a function")
        return [s]


class Duplicate:
    """Returns the same record twice (an editable install seen twice does this)."""

    SPEC = spec("dupdev", count=1)

    @staticmethod
    @hookimpl
    def singa_backends():
        return [Duplicate.SPEC, Duplicate.SPEC]


class GoodAndBad:
    """One valid record next to one invalid record: the valid one must still register."""

    @staticmethod
    @hookimpl
    def singa_backends():
        return [spec("survivor", count=1), spec("Bad Name")]
