"""``singa.testing``: the backend conformance kit and test helpers.

- :mod:`singa.testing.plugin`: the pytest plugin (entry point ``pytest11``, loaded
  automatically when singa-core is installed): ``--singa-backend``, ``--singa-xfails``,
  ``--singa-examples``, ``--singa-randomize``, ``--singa-no-shrink``, ``--singa-large``, the
  fixtures ``singa_backend`` and ``singa_device``, and the conformance summary.
- :mod:`singa.testing.conformance`: the conformance suite. Check any installed backend with
  ``pytest --pyargs singa.testing.conformance --singa-backend mydev``.
- :mod:`singa.testing.cases`: the case helper ``g`` that op samplers draw from, and
  :func:`~singa.testing.cases.sample_cases` for drawing cases outside hypothesis.
- :mod:`singa.testing.checks`: tolerances, reference evaluation, comparisons, strided views
  and statistical checks, reusable in a backend's own tests.
- :mod:`singa.testing.special`: the special values (NaN, infinities, signed zeros, ties) of
  ``test_special`` and the semantics each op gives them.
- :mod:`singa.testing.report`: ``python -m singa.testing --backend NAME [--json PATH]``, a
  table of op x dtype -> native / host fallback / failed / not declared and a summary line.

Importing this package imports neither pytest nor hypothesis; the submodules do, and when
either is missing they say which extra to install (:data:`TESTING_EXTRA`).
"""

from __future__ import annotations

import importlib.util

__all__ = ["TESTING_EXTRA", "TESTING_MODULES", "missing_testing_modules", "testing_extra_error"]

#: The command that installs the kit's dependencies: singa-core's ``testing`` extra, from the
#: singa checkout (the package index's ``singa`` is an unrelated project)
TESTING_EXTRA = 'pip install "./packages/singa-core[testing]" in the singa checkout'
#: The modules the ``testing`` extra brings
TESTING_MODULES = ("pytest", "hypothesis")


def missing_testing_modules() -> list[str]:
    """The modules of the ``testing`` extra (pytest, hypothesis) that cannot be imported."""
    return [m for m in TESTING_MODULES if importlib.util.find_spec(m) is None]


def testing_extra_error(what: str, missing: list[str]) -> ModuleNotFoundError:
    """The error for ``what`` (a module or command) run without the ``testing`` extra."""
    names = " and ".join(missing)
    verb = "is" if len(missing) == 1 else "are"
    return ModuleNotFoundError(
        f"{what} needs {names}, which {verb} not installed here: install the testing extra "
        f"(pytest and hypothesis) with: {TESTING_EXTRA}", name=missing[0])
