"""The one registry of SINGA's environment variables.

Every variable SINGA reads is declared here once, with its type, default and meaning, and read
through :func:`get` so that parsing and error messages are uniform: a value a variable does
not accept raises :class:`~singa.errors.ConfigError` naming the variable, the value and the
values it accepts. ``python -m singa info`` prints the table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

__all__ = ["EnvVar", "ENV_VARS", "get", "describe"]


# Each parser raises ValueError("expected <the values it accepts>") on a value it refuses;
# get() turns that into a ConfigError that names the variable and the value too.


def _parse_bool(raw: str) -> bool:
    low = raw.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("", "0", "false", "no", "off"):
        return False
    raise ValueError("expected 1, true, yes or on (enable), or 0, false, no or off (disable)")


def _parse_list(raw: str) -> frozenset[str]:
    return frozenset(p.strip() for p in raw.split(",") if p.strip())


def _parse_str(raw: str) -> str:
    return raw.strip()


def _parse_int(raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ValueError("expected a whole number (e.g. 0 or 512)") from None


@dataclass(frozen=True)
class EnvVar:
    """One environment variable: its name, parser, default and documentation."""

    name: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    type_name: str


ENV_VARS: dict[str, EnvVar] = {}


def _declare(name: str, parse: Callable[[str], Any], default: Any, doc: str, type_name: str):
    ENV_VARS[name] = EnvVar(name, parse, default, doc, type_name)


_declare(
    "SINGA_DEVICE", _parse_str, "",
    "Device string used by get_default_device() and layers that are given no device, "
    "e.g. 'cpu', 'opencl:0', 'cuda:1'. Empty means 'cpu'.", "str",
)
_declare(
    "SINGA_PLUGINS", _parse_list, None,
    "Comma-separated allowlist of plugin entry-point names to load (group 'singa'). "
    "Unset loads every installed plugin.", "list",
)
_declare(
    "SINGA_DISABLE_PLUGINS", _parse_list, frozenset(),
    "Comma-separated blocklist of plugin entry-point names never to load.", "list",
)
_declare(
    "SINGA_STRICT_PLUGINS", _parse_bool, False,
    "1: a plugin that fails to import, returns bad records or conflicts raises at load time "
    "instead of being recorded and reported later, and a plugin call that fails (a probe that "
    "exits, a device_count that raises) raises its PluginError even where singa would skip "
    "the backend (list_devices). For plugin developers and CI.", "bool",
)
_declare(
    "SINGA_TRACE_PLUGINS", _parse_bool, False,
    "1: print each plugin load step (entry point, distribution, records) to stderr: the "
    "'singa.plugins' logger at DEBUG, shown as SINGA_LOG_LEVEL shows records.", "bool",
)

#: logging's level numbers, so that reading the variable needs no import of logging
_LOG_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


def _parse_log_level(raw: str) -> int | None:
    name = raw.strip().upper()
    if not name:
        return None
    if name not in _LOG_LEVELS:
        raise ValueError(f"expected one of {', '.join(_LOG_LEVELS)} (any case)")
    return _LOG_LEVELS[name]


_declare(
    "SINGA_LOG_LEVEL", _parse_log_level, None,
    "DEBUG, INFO, WARNING or ERROR: show the 'singa' logger's records (plugin loading, "
    "devices created) at that level and above on stderr. Unset: singa logs nothing unless the "
    "application configures logging (logging.basicConfig, or a handler on the 'singa' "
    "logger). Warnings for users stay Python warnings.", "str",
)
_declare(
    "SINGA_OPENCL_DEVICE", _parse_str, "",
    "OpenCL device chosen by create_opencl_device(): 'P:D' (platform P, device D) or a "
    "substring of the platform or device name. Empty picks the first GPU, else the first device "
    "that can compile kernels.",
    "str",
)

_declare(
    "SINGA_CUDA_INIT_SIZE", _parse_int, 0,
    "MiB of device memory each CUDA GPU reserves when it is created and carves buffers from "
    "before calling cudaMalloc (SINGA's MemPoolConf init_size). 0 reserves nothing.", "int",
)

_declare(
    "SINGA_CUDA_TF32", _parse_bool, True,
    "1 (default, as PyTorch's torch.backends.cudnn.allow_tf32): a new CUDA GPU starts with "
    "float32_precision 'high': cuDNN may run float32 convolutions on TF32 tensor cores "
    "(about 1e-3 relative error). 0: 'highest', full float32 convolutions. Matmul and GEMM "
    "are always full float32 (cuBLAS without TF32, PyTorch's default for matmul). Change one "
    "device with dev.float32_precision = 'highest' or 'high'.", "bool",
)


_declare(
    "SINGA_CUDA_GRAPHS", _parse_bool, False,
    "1: a CUDA GPU's graph-mode replay is captured once as CUDA graphs (after two ordinary "
    "replays) and launched as one graph per run of kernels, instead of issuing every kernel "
    "from Python; bitwise the same results. Plans with random ops or host nodes (collectives) "
    "are not captured; a capture the driver refuses falls back with a warning. 0 (default): "
    "kernel by kernel. Read when a graph is analysed (docs/cuda.md, 'CUDA graphs').", "bool",
)


def _parse_bn_engine(raw: str) -> str:
    value = raw.strip().lower() or "auto"
    if value not in ("auto", "graph", "shared"):
        raise ValueError("expected 'auto', 'graph' or 'shared'")
    return value


_declare(
    "SINGA_CUDA_BATCHNORM", _parse_bn_engine, "auto",
    "Which code trains batch norm on a CUDA GPU: 'auto' (default: cuDNN's NCHW kernels, "
    "else cuDNN's channels-last graph with layout copies, else the shared array code), "
    "'graph' (skip the NCHW kernels) or 'shared'. For diagnosis and benchmarks.", "str",
)

def _parse_recompute(raw: str) -> str:
    low = raw.strip().lower()
    if low == "auto":
        return "auto"
    try:
        return "always" if _parse_bool(raw) else "never"
    except ValueError:
        raise ValueError("expected auto, 1 (always) or 0 (never)") from None


_declare(
    "SINGA_GRAPH_RECOMPUTE", _parse_recompute, "auto",
    "Rematerialisation in graph mode: free long-lived intermediates that cheap, deterministic "
    "ops (elementwise, batch norm) can recompute bitwise identically from blocks kept anyway, "
    "and recompute them before their next use. 'auto' (default): only while the planned "
    "arena of intermediates is above the device's budget (Device.graph_memory_budget: 0 on "
    "the CPU and OpenCL backends, so always there; half the free memory on a CUDA GPU, so "
    "only when memory runs short there), dropping the fewest blocks that bring it under. "
    "1: always lower the planned peak as far as recomputes can. 0: never recompute. Read "
    "when a graph is analysed.", "str",
)


_declare(
    "SINGA_GRAPH_FUSE", _parse_bool, True,
    "1 (default): graph mode runs an op and the one op that reads its output as one fused "
    "kernel where the device has one (singa.ops.FUSIONS: a convolution and its ReLU, a "
    "pooling gradient and the ReLU gradient before it); the intermediate is never written. "
    "0: every op runs as recorded. Read when a graph is analysed.", "bool",
)


def _parse_seconds(raw: str) -> float:
    expected = "expected a number of seconds >= 0 (0: no limit)"
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(expected) from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(expected)
    return value


_declare(
    "SINGA_DIST_TIMEOUT", _parse_seconds, 600.0,
    "Seconds a rank waits for the others at a collective's (or put/get's) agreement check "
    "before the job ends with a message naming the call (the MPI communicator; default 600, "
    "PyTorch's NCCL default; 0 waits forever). A rank in another collective, a put/get, or "
    "stopped would otherwise hang the job. Raise it when ranks legitimately work that long "
    "between collectives.", "float",
)


_declare(
    "SINGA_DIST_NO_ABORT_HOOK", _parse_bool, False,
    "1: the MPI communicator of a job of several ranks installs no sys.excepthook and "
    "threading.excepthook handlers that abort every rank when one fails, and starts no "
    "watcher process that ends the job when a rank dies (for debugging one rank; a failure "
    "may then leave the other ranks waiting). Read when a communicator is created.", "bool",
)


_declare(
    "SINGA_COMMUNICATOR", _parse_str, "",
    "Communicator backend used by singa.dist.get_communicator() and opt.DistOpt when none is "
    "named: 'mpi' (mpi4py, any device, host staging) or 'nccl' (CUDA tensors). Empty means "
    "'mpi' (or 'nccl' when DistOpt is given an nccl_id).", "str",
)


def get(name: str) -> Any:
    """Return the parsed value of the registered variable ``name`` (its default when unset).

    Raises
    ------
    ConfigError
        The variable is set to a value it does not accept; the message names the variable,
        the value and the values it accepts.
    """
    var = ENV_VARS[name]
    raw = os.environ.get(name)
    if raw is None:
        return var.default
    try:
        return var.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"environment variable {name}={raw!r} is invalid: {exc}. Set "
                          f"{name} to an expected value, or unset it for the default") from None


def describe() -> list[tuple[str, str, str, str]]:
    """Rows of (name, type, current value, doc) for the doctor."""
    rows = []
    for var in ENV_VARS.values():
        rows.append((var.name, var.type_name, os.environ.get(var.name, "<unset>"), var.doc))
    return rows
