# Generated from vllm_devclient/routes/server.py by scripts/generate.py; do not edit.
"""The server methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...client import AsyncDevClient
from ...models import KVEventSource, LoadInfo, ModelList, ServerInfo, TokenizerInfo, VersionInfo
from ..results import FleetResult

if TYPE_CHECKING:
    from ...metrics import MetricsSnapshot

__all__ = ["_AsyncServerMethods"]

T = TypeVar("T")


class _AsyncServerMethods:
    """The server client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def health(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /health: True when the engine is alive; EngineDeadError (503) when it is dead.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.health, dict(**options))

    async def version(self, **options: Unpack[RequestOptions]) -> FleetResult[VersionInfo]:
        """GET /version: the vLLM version, and (`.frontend`) which frontend serves it.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.version, dict(**options))

    async def models(self, **options: Unpack[RequestOptions]) -> FleetResult[ModelList]:
        """GET /v1/models: the served models (needs the api_key when the server has one).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.models, dict(**options))

    async def metrics_text(self, **options: Unpack[RequestOptions]) -> FleetResult[str]:
        """GET /metrics: the Prometheus (Python) or OpenMetrics (Rust) text.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.metrics_text, dict(**options))

    async def metrics(self, **options: Unpack[RequestOptions]) -> FleetResult[MetricsSnapshot]:
        """GET /metrics as a typed snapshot: prefix-cache and KV-offload counters (the "metrics" extra).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.metrics, dict(**options))

    async def load(self, **options: Unpack[RequestOptions]) -> FleetResult[LoadInfo]:
        """GET /load: how many requests are in flight on the server's GPU routes.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.load, dict(**options))

    async def tokenizer_info(self, **options: Unpack[RequestOptions]) -> FleetResult[TokenizerInfo]:
        """GET /tokenizer_info: the tokenizer's configuration (Python, --enable-tokenizer-info-endpoint).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.tokenizer_info, dict(**options))

    async def server_info(
        self, config_format: Literal["text", "json"] = "json", **options: Unpack[RequestOptions]
    ) -> FleetResult[ServerInfo]:
        """GET /server_info: the server's configuration and environment.

        Args:
            config_format: "json" for a dict, "text" for the config's text form.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.server_info, dict(config_format=config_format, **options))

    async def kv_event_sources(
        self, **options: Unpack[RequestOptions]
    ) -> FleetResult[dict[int, KVEventSource]]:
        """GET /kv_event_sources: where each data-parallel rank publishes KV-cache events.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.kv_event_sources, dict(**options))

    async def get_world_size(
        self, *, include_dp: bool = True, **options: Unpack[RequestOptions]
    ) -> FleetResult[int]:
        """GET /get_world_size: the number of workers.

        Args:
            include_dp: count data-parallel ranks too (TP x PP x DP); else TP x PP.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.get_world_size, dict(include_dp=include_dp, **options))
