"""``python -m singa info``: the environment report (see singa._doctor)."""

import sys

from ._doctor import main

sys.exit(main())
