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

Importing this package imports neither pytest nor hypothesis; the submodules do.
"""
