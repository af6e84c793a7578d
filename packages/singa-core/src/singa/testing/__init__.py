"""``singa.testing``: the backend conformance kit and test helpers.

Loaded automatically as a pytest plugin (entry point ``pytest11``) when singa-core is
installed; it adds ``--singa-backend NAME`` and the fixtures ``singa_backend`` and
``singa_device``.
"""
