"""The computational graph behind ``Device.exec`` (kept name; the code is in :mod:`singa.graph`).

``from singa.scheduler import Graph`` keeps working; :mod:`singa.graph` holds the pipeline of
stages (recording, ordering, fusion, rematerialisation, memory planning, replay, profiling)
and the extension point for backends.
"""

from __future__ import annotations

from .graph import BlockType, Graph, Node

__all__ = ["Graph", "Node", "BlockType"]
