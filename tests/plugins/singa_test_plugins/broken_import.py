"""A plugin whose module fails to import (a missing native library)."""

raise ImportError("simulated: libbroken.so.3: cannot open shared object file")
