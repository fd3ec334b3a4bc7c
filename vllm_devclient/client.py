"""DevClient and AsyncDevClient: the typed clients (the sync one is generated from the async one)."""

from ._async.client import AsyncDevClient, AsyncRawResponses, AsyncWeightUpdate
from ._base_client import NOT_GIVEN, NotGiven, RawResponse, RequestOptions, TimeoutArg
from ._sync.client import DevClient, RawResponses, WeightUpdate
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
