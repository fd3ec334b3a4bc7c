"""Fleet and AsyncFleet: one client call sent to many servers at once, with an outcome for every target.

The fan-out is written once, in `AsyncFleet` (asyncio, a semaphore bounding how many targets are in flight,
one shared connection pool). `Fleet` is the synchronous face of the same object: it drives an `AsyncFleet`
on a private event-loop thread, so both behave identically.

Every client method is a real method of both fleets, with the client's own signature and docstring
(derived from the client's typed methods, one table for both fleets: `methods.py`), plus
`call("method_name", ...)` for any client method by name and `map(fn)` for anything else.
Results are a `FleetResult`: target URL -> `TargetOutcome`.
"""

from ..constants import DEFAULT_MAX_CONCURRENCY
from .async_fleet import AsyncFleet
from .async_flows import AsyncFleetWeightUpdate
from .fan_out import CLIENT_METHODS
from .results import FleetError, FleetResult, OnResult, TargetOutcome
from .sync_fleet import Fleet, FleetWeightUpdate

__all__ = [
    "CLIENT_METHODS",
    "DEFAULT_MAX_CONCURRENCY",
    "AsyncFleet",
    "AsyncFleetWeightUpdate",
    "Fleet",
    "FleetError",
    "FleetResult",
    "FleetWeightUpdate",
    "OnResult",
    "TargetOutcome",
]
