"""``python -m conformance --device NAME [--package PKG] [--report out.md]``
(``python -m torch_accinte.conformance`` from an installed backend)."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
