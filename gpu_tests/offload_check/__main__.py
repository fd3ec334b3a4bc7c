"""``python -m gpu_tests.offload_check``: the check's own command (``cli.py``)."""

import sys

from .cli import main

sys.exit(main())
