"""Deprecated: the managed ``vllm serve`` moved to :mod:`vllm_devclient.offload_check.server`."""

import warnings

# The old names, for one more release.
from vllm_devclient.offload_check.server import *  # noqa: F403
from vllm_devclient.offload_check.server import __all__ as __all__

warnings.warn(
    "vllm_devclient.server moved to vllm_devclient.offload_check.server; "
    "the old name goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
