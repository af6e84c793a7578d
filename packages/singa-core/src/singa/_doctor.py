"""``python -m singa info``: what is installed, what loaded, and whether each backend computes.

:func:`collect` gathers the facts into one dict (what ``info --json`` prints); :func:`render`
writes the same dict as the report people read, so the two never disagree.
"""

from __future__ import annotations

import os
import platform
import sys
import traceback
import warnings
from typing import Any

import numpy as np

from . import config
from ._plugins import KNOWN_BACKENDS, KNOWN_COMMUNICATORS, BackendEntry, PluginRegistry, registry
from ._spec import BACKEND_API_VERSION
from .errors import HostFallbackWarning

#: singa's own optional packages: what each adds, and the command that installs it
PACKAGES = {
    "singa-cpu": ("the CPU backend", KNOWN_BACKENDS["cpu"]),
    "singa-opencl": ("the OpenCL backend", KNOWN_BACKENDS["opencl"]),
    "singa-cuda": ("the CUDA backend", KNOWN_BACKENDS["cuda"]),
    "singa-dist": ("communicators for singa.dist and opt.DistOpt", KNOWN_COMMUNICATORS["mpi"]),
    "singa-onnx": ("singa.sonnx: ONNX export and import",
                   'pip install ".[onnx]" in the singa checkout'),
}


def _version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def smoke_test(backend: str) -> tuple[bool, str]:
    """Run Add, Matmul and a host round trip on device 0 of ``backend``; (ok, detail)."""
    def run(dev: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        from . import _math
        from ._ctensor import CTensor

        a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
        x = CTensor._new((2, 2), dev, 0)
        x.copy_from_numpy(a)
        return a, _math.add(x, x).to_numpy(), _math.matmul(x, x).to_numpy()

    try:
        reg = registry()
        dev = reg.device(backend, 0)
        before = dev.fallback_stats()
        # the kernels are the plugin's code: through the registry's guard, so that one that
        # exits becomes a PluginError here (its exceptions pass through and are shown as-is).
        # An op on the host fallback is said in the detail, not warned about on stderr.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", HostFallbackWarning)
            a, got_add, got_mm = reg.call(reg.backends[reg.resolve_name(backend)].provider,
                                          "smoke test kernels", run, (dev,),
                                          passthrough=(Exception,))
        if not np.allclose(got_add, a + a) or not np.allclose(got_mm, a @ a):
            return False, f"wrong results: Add gave {got_add.tolist()}, Matmul {got_mm.tolist()}"
        hosted = sorted(op for op, n in dev.fallback_stats().items() if n > before.get(op, 0))
        via = f" ({', '.join(hosted)} through the host fallback)" if hosted else ""
        return True, f"{dev.name}: Add, Matmul and host copies match numpy{via}"
    except Exception as exc:  # report, never crash the doctor
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return False, f"{type(exc).__name__}: {exc} (at {last.filename}:{last.lineno})"


def _cause(exc: BaseException) -> str:
    """The 'cause:' line of a DeviceUnavailableError, else the whole message."""
    for line in str(exc).splitlines():
        if line.strip().startswith("cause:"):
            return line.strip()[len("cause:"):].strip()
    return str(exc)


def _backend(reg: PluginRegistry, name: str, entry: BackendEntry) -> dict[str, Any]:
    """One backend's record. Every call into a plugin goes through the registry's guard: a
    plugin that raises, exits or returns something else is a failed field here (and a failed
    plugin in ``failures``), never the end of the doctor."""
    spec = entry.spec
    rec: dict[str, Any] = {
        "name": name, "distribution": entry.provider.dist or entry.provider.plugin,
        "version": entry.provider.version, "api_version": spec.api_version,
        "api_ok": spec.api_version == BACKEND_API_VERSION, "devices": 0,
        "unavailable": None, "describe": [], "describe_error": None, "kernels": None,
        "host_fallback": None, "op_dtype_pairs": None, "device_error": None,
        "smoke": {"passed": False, "detail": "backend unavailable (see above)"}}
    try:
        rec["devices"] = reg.device_count(name)
    except Exception as exc:  # noqa: BLE001  (reported on the backend's line)
        rec["unavailable"] = _cause(exc)
    if spec.describe is not None and rec["devices"]:
        try:
            rec["describe"] = reg.describe(name)
        except Exception as exc:  # noqa: BLE001
            rec["describe_error"] = str(exc)
    if rec["devices"]:
        try:
            dev = reg.device(name, 0)
            rec["kernels"], rec["host_fallback"] = len(dev.kernels), bool(dev.host_fallback)
            from .testing.report import static_counts

            counts = static_counts(dev)
            rec["op_dtype_pairs"] = {k: counts.get(k, 0)
                                     for k in ("native", "host fallback", "not declared")}
        except Exception as exc:  # noqa: BLE001  (smoke below says FAIL with the cause)
            rec["device_error"] = f"{type(exc).__name__}: {_cause(exc)}"
        ok, detail = smoke_test(name)
        rec["smoke"] = {"passed": ok, "detail": detail}
    return rec


def collect() -> dict[str, Any]:
    """Everything the doctor reports, as JSON-ready values (``None``: not installed/unset)."""
    reg = registry()
    backends = [_backend(reg, name, entry) for name, entry in reg.backends.items()]
    # after the backends: the failures their calls find are listed with the plugins'
    plugins_of: dict[str | None, list[str]] = {}
    for name, prov in reg.plugins.items():
        plugins_of.setdefault(prov.dist, []).append(name)
    communicators_of: dict[str | None, list[str]] = {}
    for name, entry in reg.communicators.items():
        communicators_of.setdefault(entry.provider.dist, []).append(name)
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "singa_core": _version("singa-core"),
        "backend_api": BACKEND_API_VERSION,
        "singa_meta": _version("singa"),
        "packages": [{"distribution": dist, "version": _version(dist), "adds": adds,
                      "plugins": plugins_of.get(dist, []),
                      "communicators": communicators_of.get(dist, []), "install": hint}
                     for dist, (adds, hint) in PACKAGES.items()],
        "plugins": [{"name": name, "distribution": prov.dist, "version": prov.version}
                    for name, prov in reg.plugins.items()],
        "skipped": dict(reg.skipped),
        "failures": [{"plugin": f.provider.plugin, "distribution": f.provider.dist,
                      "version": f.provider.version, "stage": f.stage,
                      "error": f"{type(f.error).__name__}: {f.error}", "summary": f.summary()}
                     for f in reg.failures],
        "conflicts": {name: [str(p) for p in provs] for name, provs in reg.conflicts.items()},
        "backends": backends,
        "communicators": [{"name": name, "distribution": e.provider.dist,
                           "version": e.provider.version}
                          for name, e in reg.communicators.items()],
        "env": [{"name": v.name, "type": v.type_name, "value": os.environ.get(v.name),
                 "doc": v.doc} for v in config.ENV_VARS.values()],
    }


def _backend_lines(b: dict[str, Any]) -> list[str]:
    api = "ok" if b["api_ok"] else f"v{b['api_version']} != v{BACKEND_API_VERSION}"
    avail = f"unavailable: {b['unavailable']}" if b["unavailable"] is not None \
        else f"{b['devices']} device(s)"
    out = [f"  {b['name']:<8} from {b['distribution']} {b['version'] or ''}; API {api}; "
           f"{avail}"]
    out += [f"           {line}" for line in b["describe"]]
    if b["describe_error"] is not None:
        out.append(f"           describe() failed: {b['describe_error']}")
    if not b["devices"]:
        out.append("           smoke: FAIL - backend unavailable (see above)")
        return out
    if b["device_error"] is not None:
        out.append(f"           device 0: {b['device_error']}")
    else:
        c = b["op_dtype_pairs"]
        out.append(f"           kernels: {b['kernels']}; host fallback: "
                   f"{'on' if b['host_fallback'] else 'off'}")
        out.append(f"           op/dtype pairs: {c['native']} native, {c['host fallback']} host "
                   f"fallback, {c['not declared']} not declared (failures: python -m "
                   f"singa.testing --backend {b['name']})")
    smoke = b["smoke"]
    out.append(f"           smoke: {'PASS' if smoke['passed'] else 'FAIL'} - {smoke['detail']}")
    return out


def render(data: dict[str, Any]) -> str:
    """The report people read, from :func:`collect`'s dict."""
    out: list[str] = []
    w = out.append
    w("SINGA environment")
    w(f"  python        {data['python']} ({data['platform']})")
    w(f"  numpy         {data['numpy']}")
    w(f"  singa-core    {data['singa_core'] or 'not installed'}  "
      f"(backend API v{data['backend_api']})")
    w(f"  singa (meta)  {data['singa_meta'] or 'not installed'}")
    w("")
    w("Packages (singa's own; every plugin, third-party ones too, is listed under Plugins)")
    for p in data["packages"]:
        if p["version"] is None:
            w(f"  {p['distribution']:<13} {'not installed':<14} {p['adds']}; install: "
              f"{p['install']}")
            continue
        what = [p["adds"]] + [f"plugin {n!r}" for n in p["plugins"]]
        if p["communicators"]:
            what.append(f"communicators {', '.join(p['communicators'])}")
        w(f"  {p['distribution']:<13} {p['version']:<14} {'; '.join(what)}")
    w("")
    w("Plugins (entry-point group 'singa')")
    if not (data["plugins"] or data["failures"] or data["skipped"]):
        w("  none found: pip install . in the singa checkout (singa-core and the CPU backend)")
    for p in data["plugins"]:
        w(f"  {p['name']:<10} {p['distribution'] or '?'} {p['version'] or ''}")
    for name, why in data["skipped"].items():
        w(f"  {name:<10} SKIPPED: {why}")
    for f in data["failures"]:
        w(f"  {f['plugin']:<10} FAILED: {f['summary']}")
    for name, provs in data["conflicts"].items():
        w(f"  {name:<10} CONFLICT: claimed by {' and '.join(provs)}")
    w("")
    w("Backends")
    for b in data["backends"]:
        out.extend(_backend_lines(b))
    if not data["backends"]:
        w("  none: pip install . in the singa checkout")
    w("")
    w("Environment variables")
    for v in data["env"]:
        value = "<unset>" if v["value"] is None else v["value"]
        w(f"  {v['name']:<22} {v['type']:<5} {value}")
    return "\n".join(out)


def report() -> str:
    """The doctor's report, as ``python -m singa info`` prints it."""
    return render(collect())
