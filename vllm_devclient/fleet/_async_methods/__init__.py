# Generated from vllm_devclient/routes/, calls.py and records.py by scripts/generate.py; do not edit.
"""The methods of AsyncFleet that fan a client method out to every target, a mixin per topic."""

from .cache import _AsyncCacheMethods
from .engine import _AsyncEngineMethods
from .lora import _AsyncLoraMethods
from .pause import _AsyncPauseMethods
from .server import _AsyncServerMethods
from .sleep import _AsyncSleepMethods
from .wait import _AsyncWaitMethods
from .weights import _AsyncWeightsMethods

__all__ = ["_AsyncFleetMethods"]


class _AsyncFleetMethods(
    _AsyncServerMethods,
    _AsyncCacheMethods,
    _AsyncSleepMethods,
    _AsyncPauseMethods,
    _AsyncWaitMethods,
    _AsyncWeightsMethods,
    _AsyncLoraMethods,
    _AsyncEngineMethods,
):
    """Every client method on every target of the AsyncFleet (generated from the records)."""
