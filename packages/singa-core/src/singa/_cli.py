"""``python -m singa``: the command line (``info``, ``--version``, ``--help``).

With no command it prints its help and exits 0, as ``pip`` does: someone who types
``python -m singa`` asks what it can do, and nothing failed.
"""

from __future__ import annotations

import argparse
import json
import sys


def _info(args: argparse.Namespace) -> int:
    from . import _doctor

    data = _doctor.collect()
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print(_doctor.render(data))
    return 0


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m singa``."""
    p = argparse.ArgumentParser(
        prog="python -m singa",
        description="SINGA's command line: report the installation and check each backend.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="check a backend against every op's numpy reference (needs the testing "
        "extra):\n  python -m singa.testing --backend NAME")
    from . import __version__  # from the package metadata (singa/__init__.py)

    p.add_argument("--version", action="version", version=f"singa-core {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    info = sub.add_parser(
        "info", help="what is installed, what loaded, the devices, a smoke test per backend",
        description="What is installed, what loaded, the devices, a PASS/FAIL smoke test per "
        "backend with the reason for each FAIL, and SINGA's environment variables.")
    info.add_argument("--json", action="store_true",
                      help="print the same report as one JSON object")
    info.set_defaults(run=_info)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``python -m singa`` with ``argv`` (default: the process's arguments)."""
    p = parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        p.print_help()
        return 0
    return args.run(args)
