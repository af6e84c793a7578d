"""Locating dataset files and reporting missing ones (this environment never downloads)."""

from __future__ import annotations

import os

from ..errors import SingaError

__all__ = ["DatasetNotFoundError", "find_file"]


class DatasetNotFoundError(SingaError, FileNotFoundError):
    """A dataset's files are not where the loader was told to look.

    The message lists the files it looked for, the folder, where to get them and how to point
    the loader at another folder. Nothing is ever downloaded.
    """


def find_file(folder: str, names) -> str | None:
    """The first of ``names`` that exists as a regular file in ``folder``, else None."""
    for name in names:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            return path
    return None
