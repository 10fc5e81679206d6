"""``python -m torch_accinte.testing``: the runner of ``make upstream-tests``."""

import sys

from torch_accinte.testing.runner import main

sys.exit(main())
