"""``python -m singa info``: what is installed, what loaded, and whether each backend computes."""

from __future__ import annotations

import platform
import sys
import traceback

import numpy as np

from . import config
from ._plugins import registry
from ._spec import BACKEND_API_VERSION


def _version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def smoke_test(backend: str) -> tuple[bool, str]:
    """Run Add, Matmul and a host round trip on device 0 of ``backend``; (ok, detail)."""
    def run(dev):
        from . import _math as M
        from ._ctensor import CTensor

        a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
        x = CTensor._new((2, 2), dev, 0)
        x.copy_from_numpy(a)
        return a, M.add(x, x).to_numpy(), M.matmul(x, x).to_numpy()

    try:
        reg = registry()
        dev = reg.device(backend, 0)
        # the kernels are the plugin's code: through the registry's guard, so that one that
        # exits becomes a PluginError here (its exceptions pass through and are shown as-is)
        a, got_add, got_mm = reg.call(reg.backends[reg.resolve_name(backend)].provider,
                                      "smoke test kernels", run, (dev,),
                                      passthrough=(Exception,))
        if not np.allclose(got_add, a + a) or not np.allclose(got_mm, a @ a):
            return False, f"wrong results: Add gave {got_add.tolist()}, Matmul {got_mm.tolist()}"
        return True, f"{dev.name}: Add, Matmul and host copies match numpy"
    except Exception as exc:  # report, never crash the doctor
        last = traceback.extract_tb(exc.__traceback__)[-1]
        return False, f"{type(exc).__name__}: {exc} (at {last.filename}:{last.lineno})"


def conformance_counts(dev) -> str:
    """One line: op/dtype pairs run natively, through the host fallback, or not at all, from
    the device's kernel table (``python -m singa.testing`` runs the kit to find failures)."""
    from .testing.report import static_counts

    c = static_counts(dev)
    return (f"op/dtype pairs: {c.get('native', 0)} native, {c.get('host fallback', 0)} host "
            f"fallback, {c.get('not declared', 0)} not declared (failures: python -m "
            f"singa.testing --backend {dev.backend})")


def _cause(exc: BaseException) -> str:
    """The 'cause:' line of a DeviceUnavailableError, else the whole message."""
    for line in str(exc).splitlines():
        if line.strip().startswith("cause:"):
            return line.strip()[len("cause:"):].strip()
    return str(exc)


def _backend_lines(reg) -> list[str]:
    """The doctor's "Backends" section. Every call into a plugin goes through the
    registry's guard: a plugin that raises, exits or returns something else is a FAIL
    line here (and a FAILED plugin above), never the end of the doctor."""
    out = []
    w = out.append
    for name, entry in reg.backends.items():
        spec = entry.spec
        api = "ok" if spec.api_version == BACKEND_API_VERSION else f"v{spec.api_version} != "\
            f"v{BACKEND_API_VERSION}"
        try:
            count = reg.device_count(name)
            avail = f"{count} device(s)"
        except Exception as exc:  # noqa: BLE001  (reported on the backend's line)
            avail = f"unavailable: {_cause(exc)}"
            count = 0
        w(f"  {name:<8} from {entry.provider.dist or entry.provider.plugin} "
          f"{entry.provider.version or ''}; API {api}; {avail}")
        if spec.describe is not None and count:
            try:
                for line in reg.describe(name):
                    w(f"           {line}")
            except Exception as exc:  # noqa: BLE001
                w(f"           describe() failed: {exc}")
        if count:
            try:
                dev = reg.device(name, 0)
                w(f"           kernels: {len(dev.kernels)}; host fallback: "
                  f"{'on' if dev.host_fallback else 'off'}")
                w(f"           {conformance_counts(dev)}")
            except Exception as exc:  # noqa: BLE001  (smoke below says FAIL with the cause)
                w(f"           device 0: {type(exc).__name__}: {_cause(exc)}")
            ok, detail = smoke_test(name)
            w(f"           smoke: {'PASS' if ok else 'FAIL'} - {detail}")
        else:
            w("           smoke: FAIL - backend unavailable (see above)")
    return out


def report() -> str:
    out = []
    w = out.append
    w("SINGA environment")
    w(f"  python        {sys.version.split()[0]} ({platform.platform()})")
    w(f"  numpy         {np.__version__}")
    w(f"  singa-core    {_version('singa-core')}  (backend API v{BACKEND_API_VERSION})")
    w(f"  singa (meta)  {_version('singa')}")
    reg = registry()
    backends = _backend_lines(reg)  # first: the failures it finds are listed under Plugins
    w("")
    w("Plugins (entry-point group 'singa')")
    if not reg.plugins and not reg.failures and not reg.skipped:
        w("  none found: pip install . in the singa checkout (singa-core and the CPU backend)")
    for name, prov in reg.plugins.items():
        w(f"  {name:<10} {prov.dist or '?'} {prov.version or ''}")
    for name, why in reg.skipped.items():
        w(f"  {name:<10} SKIPPED: {why}")
    for f in reg.failures:
        w(f"  {f.provider.plugin:<10} FAILED: {f.summary()}")
    for name, provs in reg.conflicts.items():
        w(f"  {name:<10} CONFLICT: claimed by {' and '.join(str(p) for p in provs)}")
    w("")
    w("Backends")
    out.extend(backends)
    if not reg.backends:
        w("  none: pip install . in the singa checkout")
    w("")
    w("Environment variables")
    for var, typ, value, _doc in config.describe():
        w(f"  {var:<22} {typ:<5} {value}")
    return "\n".join(out)


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("info",):
        print("usage: python -m singa info", file=sys.stderr)
        return 2
    print(report())
    return 0
