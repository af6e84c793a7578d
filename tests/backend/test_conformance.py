"""The conformance kit (singa.testing.conformance) for the backend chosen by --singa-backend.

    pytest tests/backend --singa-backend cpu
    pytest tests/backend --singa-backend opencl --singa-xfails PATH

Without --singa-xfails, tests/backend/conftest.py uses packages/singa-<backend>/
conformance-xfails.txt when it exists.
"""

from singa.testing.conformance import (  # noqa: F401  (pytest collects the imported tests)
    pytest_generate_tests,
    test_forward,
    test_fused,
    test_inplace,
    test_kernel_table,
    test_large,
    test_layouts,
    test_random_seed,
    test_random_stats,
    test_special,
)
