"""``singa.sonnx``: ONNX export/import, provided by the singa-onnx package."""

try:
    from singa_onnx import *  # noqa: F403
    from singa_onnx import to_onnx  # noqa: F401  (the converter must exist)
except ImportError as exc:
    raise ImportError(
        "singa.sonnx needs the singa-onnx package with its converter, which is not available "
        f"here ({exc}). Install it with: pip install singa[onnx]. Note: singa-onnx 0.1.0 "
        "ships no converter yet."
    ) from exc
