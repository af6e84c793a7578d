"""``python -m singa``: the command line (see singa._cli)."""

import sys

from ._cli import main

sys.exit(main())
