"""SINGA's ONNX package (reachable as ``singa.sonnx``).

This release ships no exporter or importer yet (the work is not scheduled in this repository's
issues); importing ``singa.sonnx`` raises an ImportError that says so.
"""
