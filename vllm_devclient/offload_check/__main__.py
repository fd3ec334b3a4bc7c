"""``python -m vllm_devclient.offload_check``."""

import sys

from .cli import main

sys.exit(main())
