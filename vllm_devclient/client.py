"""DevClient and AsyncDevClient: the typed clients (the sync one generated and derived from the async one)."""

from ._async.client import AsyncDevClient, AsyncWeightUpdate
from ._async.raw_responses import AsyncRawResponses
from ._base_client import NOT_GIVEN, NotGiven, RawResponse, RequestOptions, TimeoutArg
from ._sync.client import DevClient, WeightUpdate
from ._sync.raw_responses import RawResponses
from .constants import DEFAULT_TIMEOUT

__all__ = [
    "DEFAULT_TIMEOUT",
    "NOT_GIVEN",
    "AsyncDevClient",
    "AsyncRawResponses",
    "AsyncWeightUpdate",
    "DevClient",
    "NotGiven",
    "RawResponse",
    "RawResponses",
    "RequestOptions",
    "TimeoutArg",
    "WeightUpdate",
]
