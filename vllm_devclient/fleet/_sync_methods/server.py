# Generated from vllm_devclient/routes/server.py by scripts/generate.py; do not edit.
"""The server methods of Fleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...models import KVEventSource, LoadInfo, ModelList, ServerInfo, TokenizerInfo, VersionInfo
from ..results import FleetResult

if TYPE_CHECKING:
    from ...metrics import MetricsSnapshot
    from ..async_fleet import AsyncFleet

__all__ = ["_ServerMethods"]

T = TypeVar("T")


class _ServerMethods:
    """The server client methods on every target of the Fleet."""

    if TYPE_CHECKING:
        _fleet: AsyncFleet

        def _run(self, coro: Coroutine[Any, Any, T]) -> T: ...

    def health(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /health: True when the engine is alive; EngineDeadError (503) when it is dead.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.health(**options))

    def version(self, **options: Unpack[RequestOptions]) -> FleetResult[VersionInfo]:
        """GET /version: the vLLM version, and (`.frontend`) which frontend serves it.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.version(**options))

    def models(self, **options: Unpack[RequestOptions]) -> FleetResult[ModelList]:
        """GET /v1/models: the served models (needs the api_key when the server has one).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.models(**options))

    def metrics_text(self, **options: Unpack[RequestOptions]) -> FleetResult[str]:
        """GET /metrics: the Prometheus (Python) or OpenMetrics (Rust) text.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.metrics_text(**options))

    def metrics(self, **options: Unpack[RequestOptions]) -> FleetResult[MetricsSnapshot]:
        """GET /metrics as a typed snapshot: prefix-cache and KV-offload counters (the "metrics" extra).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.metrics(**options))

    def load(self, **options: Unpack[RequestOptions]) -> FleetResult[LoadInfo]:
        """GET /load: how many requests are in flight on the server's GPU routes.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.load(**options))

    def tokenizer_info(self, **options: Unpack[RequestOptions]) -> FleetResult[TokenizerInfo]:
        """GET /tokenizer_info: the tokenizer's configuration (Python, --enable-tokenizer-info-endpoint).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.tokenizer_info(**options))

    def server_info(
        self, config_format: Literal["text", "json"] = "json", **options: Unpack[RequestOptions]
    ) -> FleetResult[ServerInfo]:
        """GET /server_info: the server's configuration and environment.

        Args:
            config_format: "json" for a dict, "text" for the config's text form.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.server_info(config_format=config_format, **options))

    def kv_event_sources(self, **options: Unpack[RequestOptions]) -> FleetResult[dict[int, KVEventSource]]:
        """GET /kv_event_sources: where each data-parallel rank publishes KV-cache events.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.kv_event_sources(**options))

    def get_world_size(
        self, *, include_dp: bool = True, **options: Unpack[RequestOptions]
    ) -> FleetResult[int]:
        """GET /get_world_size: the number of workers.

        Args:
            include_dp: count data-parallel ranks too (TP x PP x DP); else TP x PP.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.get_world_size(include_dp=include_dp, **options))
