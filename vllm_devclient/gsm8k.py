"""Deprecated: GSM8K moved to :mod:`vllm_devclient.offload_check.gsm8k` (this alias stays one release)."""

import warnings

# The old names, for one more release.
from vllm_devclient.offload_check.gsm8k import *  # noqa: F403
from vllm_devclient.offload_check.gsm8k import __all__ as __all__

warnings.warn(
    "vllm_devclient.gsm8k moved to vllm_devclient.offload_check.gsm8k; the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
