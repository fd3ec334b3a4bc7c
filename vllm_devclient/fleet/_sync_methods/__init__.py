# Generated from vllm_devclient/routes/, calls.py and records.py by scripts/generate.py; do not edit.
"""The methods of Fleet that fan a client method out to every target, a mixin per topic."""

from .cache import _CacheMethods
from .engine import _EngineMethods
from .lora import _LoraMethods
from .pause import _PauseMethods
from .server import _ServerMethods
from .sleep import _SleepMethods
from .wait import _WaitMethods
from .weights import _WeightsMethods

__all__ = ["_FleetMethods"]


class _FleetMethods(
    _ServerMethods,
    _CacheMethods,
    _SleepMethods,
    _PauseMethods,
    _WaitMethods,
    _WeightsMethods,
    _LoraMethods,
    _EngineMethods,
):
    """Every client method on every target of the Fleet (generated from the records)."""
