"""``singa.sonnx``: ONNX export/import, provided by the singa-onnx package.

Every name (``to_onnx``, ``prepare``, ``SingaBackend``, ``SingaRep``, ``SONNXModel`` ...) is
looked up in ``singa_onnx`` on first use, so ``import singa.sonnx`` works without it and the
first use says how to install it.
"""

from __future__ import annotations

from .errors import ExtensionUnavailableError, SingaONNXError

# resolved lazily by __getattr__ (the names live in singa_onnx)
_LAZY = ("to_onnx", "prepare", "run_node", "supports_device", "SingaBackend", "SingaRep",
         "SingaFrontend", "SONNXModel", "save", "load")
__all__ = ["SingaONNXError", *_LAZY]  # noqa: PLE0604


def _impl():
    try:
        import singa_onnx
    except ImportError as exc:
        raise ExtensionUnavailableError(
            f"singa.sonnx needs the singa-onnx package, which is not installed here ({exc}). "
            'Install it with: pip install ".[onnx]" in the singa checkout') from exc
    return singa_onnx


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    impl = _impl()
    try:
        return getattr(impl, name)
    except AttributeError:
        raise AttributeError(f"module 'singa.sonnx' has no attribute {name!r}") from None


def __dir__():
    return sorted(set(_LAZY) | set(globals()))
