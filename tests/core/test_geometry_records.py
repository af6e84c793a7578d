"""Every field of the geometry records that backend kernels read carries its meaning.

Backends read ``Conv2dGeometry``/``Pool2dGeometry`` by their short field names (``pt``,
``dh``, ...); the record is where a reader learns what each one is, so an undocumented field
is a failure here.
"""

from __future__ import annotations

import inspect

import pytest
from singa.ops._nn_ops import Conv2dGeometry, Pool2dGeometry


def _field_comments(record) -> dict[str, str]:
    """``{field: text}`` from the ``#:`` comments beside or directly above each field."""
    lines = inspect.getsource(record).splitlines()
    found, pending = {}, []
    for line in lines[1:]:
        text = line.strip()
        if text.startswith("#:"):
            pending.append(text[2:].strip())
            continue
        name, colon, rest = text.partition(":")
        if colon and name.isidentifier() and name in record._fields:
            beside = rest.partition("#:")[2].strip()
            found[name] = " ".join(pending + ([beside] if beside else []))
        pending = []
    return found


@pytest.mark.parametrize("record", [Conv2dGeometry, Pool2dGeometry])
def test_every_field_is_documented(record):
    comments = _field_comments(record)
    missing = [f for f in record._fields if len(comments.get(f, "")) < 10]
    assert not missing, f"{record.__name__}: fields without a '#:' comment: {missing}"
