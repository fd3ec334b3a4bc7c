"""Typed sync and async client for vLLM's development-mode endpoints, on the Python and the Rust frontend.

Optional parts load on first use (`vllm_devclient.kv_events`, `.metrics`, `.fleet`, `.gsm8k`,
`.testing`). Of the HTTP packages only h11 is needed: httpx, httpx2 and aiohttp load when a client is given
or asked for one (`http_client=`, `transport=`), and aiohttp when an async client is made where it is
installed.
"""

from typing import TYPE_CHECKING, Any

from ._version import __version__
from .client import NOT_GIVEN, AsyncDevClient, DevClient, RawResponse, RequestOptions
from .constants import DEFAULT_MAX_CONNECTIONS
from .endpoints import PauseMode
from .errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    BarrierTimeoutError,
    BarrierUnreachableError,
    BarrierUnsupportedError,
    BodyCutOffError,
    BodyLimitExceededError,
    BodyTooLargeError,
    CheckpointFailedError,
    ClientClosedError,
    ConflictError,
    DevClientError,
    DevModeDisabledError,
    EngineCallError,
    EngineDeadError,
    InternalServerError,
    InvalidParameterError,
    MethodNotAllowedError,
    MissingExtraError,
    NotFoundError,
    PermissionDeniedError,
    ReleaseTooOldError,
    ResponseValidationError,
    RouteNotServedError,
    ServerUnhealthyError,
    ServiceUnavailableError,
    TLSError,
    WaitTimeoutError,
    WaitUnreachableError,
    WorldSizeMismatchError,
)
from .models import (
    AbortRequestsResult,
    BarrierResult,
    CheckpointStatus,
    Completion,
    CompletionChoice,
    CompletionUsage,
    FaultToleranceAccepted,
    KVCacheReleaseResult,
    KVEventSource,
    LoadInfo,
    MessageResult,
    ModelCard,
    ModelList,
    PromptTokensDetails,
    ResetPrefixCacheResult,
    ServerInfo,
    SleepResult,
    StatusResult,
    TokenizerInfo,
    VersionInfo,
    WakeUpResult,
    WeightCheckResult,
    WeightInfo,
    WeightVersionResult,
)
from .reset_check import ResetNotVerifiableError, ResetNotVerifiedError, TierNotClearedError, VerifiedReset
from .responses import HTTPResponse
from .timeouts import Timeout

if TYPE_CHECKING:
    from .fleet import AsyncFleet, Fleet, FleetError, FleetResult, TargetOutcome
    from .weight_sync import WeightSync

# The fleet (and vLLM's weight-sync view over it) is loaded on first use, like the other optional parts.
_LAZY = {name: "fleet" for name in ("AsyncFleet", "Fleet", "FleetError", "FleetResult", "TargetOutcome")}
_LAZY["WeightSync"] = "weight_sync"


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "NOT_GIVEN",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AbortRequestsResult",
    "AsyncDevClient",
    "AsyncFleet",
    "AuthenticationError",
    "BadRequestError",
    "BarrierResult",
    "BarrierTimeoutError",
    "BarrierUnreachableError",
    "BarrierUnsupportedError",
    "BodyCutOffError",
    "BodyLimitExceededError",
    "BodyTooLargeError",
    "CheckpointFailedError",
    "CheckpointStatus",
    "ClientClosedError",
    "Completion",
    "CompletionChoice",
    "CompletionUsage",
    "ConflictError",
    "DevClient",
    "DevClientError",
    "DevModeDisabledError",
    "EngineCallError",
    "EngineDeadError",
    "FaultToleranceAccepted",
    "Fleet",
    "FleetError",
    "FleetResult",
    "HTTPResponse",
    "InternalServerError",
    "InvalidParameterError",
    "KVCacheReleaseResult",
    "KVEventSource",
    "LoadInfo",
    "MessageResult",
    "MethodNotAllowedError",
    "MissingExtraError",
    "ModelCard",
    "ModelList",
    "NotFoundError",
    "PauseMode",
    "PermissionDeniedError",
    "PromptTokensDetails",
    "RawResponse",
    "ReleaseTooOldError",
    "RequestOptions",
    "ResetNotVerifiableError",
    "ResetNotVerifiedError",
    "ResetPrefixCacheResult",
    "ResponseValidationError",
    "RouteNotServedError",
    "ServerInfo",
    "ServerUnhealthyError",
    "ServiceUnavailableError",
    "SleepResult",
    "StatusResult",
    "TLSError",
    "TargetOutcome",
    "TierNotClearedError",
    "Timeout",
    "TokenizerInfo",
    "VerifiedReset",
    "VersionInfo",
    "WaitTimeoutError",
    "WaitUnreachableError",
    "WakeUpResult",
    "WeightCheckResult",
    "WeightInfo",
    "WeightSync",
    "WeightVersionResult",
    "WorldSizeMismatchError",
    "__version__",
]
