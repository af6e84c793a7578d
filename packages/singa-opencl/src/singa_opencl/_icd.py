"""Making OpenCL runtimes that pip installed visible to the ICD loader.

pyopencl's wheel bundles the ocl-icd loader. It finds runtimes through the ``.icd`` files
(one library path each) in ``/etc/OpenCL/vendors``, or in the directory that
``OCL_ICD_VENDORS`` or ``OPENCL_VENDOR_PATH`` names instead, plus those in pyopencl's own
``.libs`` (where ``pocl-binary-distribution`` puts pocl). Intel's CPU runtime from PyPI
(``intel-opencl-rt``) installs ``libintelocl.so`` into ``{prefix}/lib`` and an ``.icd`` into
``{prefix}/etc/OpenCL/vendors`` that holds conda's placeholder prefix instead of a real path;
no loader reads that directory, and the path in it does not exist.

So, before the first platform query (the loader reads its variables then, once per process),
:func:`expose_pip_runtimes` looks for such runtimes in this environment. When it finds one and
the user has set neither variable, it writes a vendors directory holding the system's ``.icd``
entries plus one per pip-installed runtime, and points ``OCL_ICD_VENDORS`` at it. The directory
is named by a hash of its content, so it is written once (atomically) and shared by processes
and by child processes, which inherit the variable.
"""

from __future__ import annotations

import hashlib
import os
import site
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_VENDORS = Path("/etc/OpenCL/vendors")
#: The prefix conda writes into packages and replaces at install time; pip does not replace it.
CONDA_PLACEHOLDER = "/opt/anaconda1anaconda2anaconda3"
#: Known pip-installed runtimes: library relative to an installation prefix -> the name of the
#: OpenCL platform it provides (how the doctor tells which devices came from pip).
KNOWN_RUNTIMES = {"lib/libintelocl.so": "Intel(R) OpenCL"}
USER_VARIABLES = ("OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH")
ENTRY_PREFIX = "singa-pip-"
DIR_PREFIX = "opencl-vendors-"


@dataclass
class IcdStatus:
    """What :func:`expose_pip_runtimes` found and did, for the doctor and error messages."""

    libraries: list[str] = field(default_factory=list)  # pip-installed runtimes found
    vendors_dir: str | None = None  # the directory OCL_ICD_VENDORS now names, if we set it
    user_variable: str | None = None  # "NAME=value" of a user setting we left alone
    error: str | None = None  # why the directory could not be written

    def provides(self, platform_name: str) -> bool:
        """Whether a platform of this name comes from a pip-installed runtime we exposed."""
        if not self.vendors_dir:
            return False
        names = {KNOWN_RUNTIMES.get(rel) for lib in self.libraries for rel in KNOWN_RUNTIMES
                 if lib.endswith("/" + rel)}
        return platform_name.strip() in names

    def note(self) -> str | None:
        """One clause for the doctor's device lines, or None when there is nothing to say."""
        if not self.libraries:
            return f"looking for pip-installed runtimes failed: {self.error}" if self.error \
                else None
        libs = ", ".join(self.libraries)
        if self.vendors_dir:
            return f"from pip ({libs}); singa-opencl set OCL_ICD_VENDORS={self.vendors_dir}"
        if self.user_variable:
            return (f"pip-installed runtime {libs} not added: {self.user_variable} is set by "
                    "the user")
        return f"pip-installed runtime {libs} not added: {self.error}"


_status: IcdStatus | None = None


def status() -> IcdStatus | None:
    """The result of the call to :func:`expose_pip_runtimes` in this process, if any."""
    return _status


def expose_pip_runtimes(environ=os.environ) -> IcdStatus:
    """Point ``OCL_ICD_VENDORS`` at system + pip-installed runtimes, unless the user set it.

    Call before the first OpenCL platform query; later calls return the first result. Never
    raises: a failure is recorded in the returned status and the loader keeps its defaults.
    """
    global _status
    if _status is None:
        try:
            _status = expose(environ)
        except Exception as exc:  # never let discovery break the backend's probe
            _status = IcdStatus(error=f"{type(exc).__name__}: {exc}")
    return _status


def expose(environ, roots: list[Path] | None = None, vendors: Path = SYSTEM_VENDORS,
           cache_roots: list[Path] | None = None) -> IcdStatus:
    """The work of :func:`expose_pip_runtimes`, with every location a parameter (for tests).

    ``roots``: installation prefixes to search (default: :func:`prefixes`); ``vendors``: the
    loader's default vendors directory, whose entries are kept; ``cache_roots``: where to write
    the directory (default: see :func:`write_vendors_dir`).
    """
    st = IcdStatus(libraries=pip_runtime_libraries(roots))
    if not st.libraries:
        return st
    if _is_ours(environ.get("OCL_ICD_VENDORS"), st.libraries):
        st.vendors_dir = environ["OCL_ICD_VENDORS"]  # inherited from a parent process
        return st
    for var in USER_VARIABLES:
        if environ.get(var):
            st.user_variable = f"{var}={environ[var]}"
            return st
    entries = system_entries(vendors)
    for n, lib in enumerate(st.libraries):
        entries[f"{ENTRY_PREFIX}{n}-{Path(lib).stem}.icd"] = lib + "\n"
    try:
        st.vendors_dir = str(write_vendors_dir(entries, cache_roots))
    except OSError as exc:
        st.error = f"cannot write a vendors directory ({exc})"
        return st
    environ["OCL_ICD_VENDORS"] = st.vendors_dir
    return st


def _is_ours(value: str | None, libraries: list[str]) -> bool:
    """Whether ``value`` names a directory this module wrote with entries for ``libraries``."""
    if not value or not Path(value).name.startswith(DIR_PREFIX) or not Path(value).is_dir():
        return False
    listed = {_read_entry(icd) for icd in Path(value).glob(ENTRY_PREFIX + "*.icd")}
    return set(libraries) <= listed


def prefixes() -> list[Path]:
    """Installation prefixes of this interpreter's environment (pip's ``--user`` one too)."""
    out = [Path(sys.prefix)]
    user = getattr(site, "USER_BASE", None)
    if user and Path(user) not in out:
        out.append(Path(user))
    return out


def pip_runtime_libraries(roots: list[Path] | None = None) -> list[str]:
    """Absolute paths of OpenCL runtimes pip installed under ``roots`` (default: prefixes()).

    A runtime is found through its ``.icd`` in ``{prefix}/etc/OpenCL/vendors`` whose path
    starts with conda's placeholder (resolved against the prefix), or by a known library name.
    """
    found: list[str] = []

    def add(path: Path) -> None:
        if path.is_file() and str(path) not in found:
            found.append(str(path))

    for root in prefixes() if roots is None else roots:
        icd_dir = root / "etc" / "OpenCL" / "vendors"
        for icd in sorted(icd_dir.glob("*.icd")) if icd_dir.is_dir() else []:
            target = _read_entry(icd)
            if target.startswith(CONDA_PLACEHOLDER + "/"):
                add(root / target[len(CONDA_PLACEHOLDER) + 1:])
        for rel in KNOWN_RUNTIMES:
            add(root / rel)
    return found


def system_entries(vendors: Path = SYSTEM_VENDORS) -> dict[str, str]:
    """``{file name: content}`` of the ``.icd`` files the loader would read by default."""
    entries = {}
    for icd in sorted(vendors.glob("*.icd")) if vendors.is_dir() else []:
        try:
            entries[icd.name] = icd.read_text(encoding="utf-8", errors="replace")
        except OSError:  # an unreadable entry is unreadable for the loader too
            continue
    return entries


def _read_entry(icd: Path) -> str:
    try:
        return icd.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""


def cache_root() -> Path:
    """The per-user cache directory of singa (``$XDG_CACHE_HOME/singa``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "singa"


def write_vendors_dir(entries: dict[str, str], roots: list[Path] | None = None) -> Path:
    """A directory holding exactly ``entries``, named by their hash; created atomically.

    Tried under each of ``roots`` (default: the per-user cache, then a private directory in
    the system's temp dir); raises OSError when none is writable.
    """
    blob = "".join(f"{name}\0{text}\0" for name, text in sorted(entries.items()))
    name = DIR_PREFIX + hashlib.sha256(blob.encode()).hexdigest()[:16]
    if roots is None:
        roots = [cache_root(), _private_tmp()]
    errors = []
    for root in roots:
        try:
            return _write_once(root, name, entries)
        except OSError as exc:
            errors.append(f"{root}: {exc}")
    raise OSError("; ".join(errors))


def _private_tmp() -> Path:
    return Path(tempfile.gettempdir()) / f"singa-{os.getuid()}"


def _write_once(root: Path, name: str, entries: dict[str, str]) -> Path:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = root.lstat()
    # The loader dlopens whatever the entries name: never use a directory another user owns
    # or can write to (the temp fallback lives in a world-writable parent).
    if root.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o002:
        raise OSError(f"{root} is not a private directory of this user")
    final = root / name
    if final.is_dir():
        return final
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        for fname, text in entries.items():
            (tmp / fname).write_text(text, encoding="utf-8")
        os.rename(tmp, final)  # atomic; fails if another process got there first
    except OSError:
        for f in tmp.iterdir():
            f.unlink()
        tmp.rmdir()
        if not final.is_dir():
            raise
    return final
