"""Repository-wide test configuration: hypothesis profiles.

``singa-dev`` (loaded by default) disables hypothesis' per-example deadline: on the shared
2-core machine a first numba compilation or a busy neighbour easily exceeds 200 ms, and a
deadline failure there says nothing about correctness. Pick another profile with
``--hypothesis-profile``:

``singa-ci``
    the same examples on every run (``derandomize``), for reproducible CI logs.
``singa-thorough``
    10x the examples, for a nightly or pre-release run.

The conformance kit sets its own example count (``--singa-examples``) and seeds; these
profiles govern the other hypothesis tests.
"""

from __future__ import annotations

try:
    from hypothesis import settings
except ModuleNotFoundError as exc:  # say which extra brings it, not only that it is missing
    from singa.testing import testing_extra_error

    raise testing_extra_error("singa's test suite", [exc.name]) from None

settings.register_profile("singa-dev", deadline=None, print_blob=True)
settings.register_profile("singa-ci", deadline=None, print_blob=True, derandomize=True)
settings.register_profile("singa-thorough", deadline=None, print_blob=True, max_examples=1000)
settings.load_profile("singa-dev")
