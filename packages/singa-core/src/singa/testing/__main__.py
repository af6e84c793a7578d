"""``python -m singa.testing --backend NAME [--json PATH]``: the conformance report
(see :mod:`singa.testing.report`)."""

import sys

from .report import main

sys.exit(main())
