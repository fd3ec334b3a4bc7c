# Generated from vllm_devclient/routes/cache.py and calls.py by scripts/generate.py; do not edit.
"""The cache methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...client import AsyncDevClient
from ...models import BarrierResult, KVCacheReleaseResult, ResetPrefixCacheResult
from ..results import FleetResult

if TYPE_CHECKING:
    from ...reset_check import VerifiedReset

__all__ = ["_AsyncCacheMethods"]

T = TypeVar("T")


class _AsyncCacheMethods:
    """The cache client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def reset_prefix_cache(
        self,
        *,
        reset_running_requests: bool = False,
        reset_external: bool = False,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[ResetPrefixCacheResult]:
        """POST /reset_prefix_cache once; `.success` False while blocks are held (see the barrier).

        Args:
            reset_running_requests: preempt running requests first, so their blocks can be freed.
            reset_external: also reset the connector's tier (e.g. the CPU offload cache).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.reset_prefix_cache,
            dict(reset_running_requests=reset_running_requests, reset_external=reset_external, **options),
        )

    async def reset_mm_cache(self, **options: Unpack[RequestOptions]) -> FleetResult[None]:
        """POST /reset_mm_cache: drop the multimodal cache.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.reset_mm_cache, dict(**options))

    async def reset_encoder_cache(self, **options: Unpack[RequestOptions]) -> FleetResult[None]:
        """POST /reset_encoder_cache: drop the encoder cache.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.reset_encoder_cache, dict(**options))

    async def release_kv_cache_memory(
        self, *, reset_connector: bool | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[KVCacheReleaseResult]:
        """POST /release_kv_cache_memory: free the KV cache's GPU memory (never resent).

        Args:
            reset_connector: false keeps the KV connector's tier (CPU offload); None: the server's default
                (reset).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.release_kv_cache_memory, dict(reset_connector=reset_connector, **options)
        )

    async def reset_prefix_cache_until_success(
        self,
        *,
        deadline: float = 60.0,
        request_timeout: float | None = None,
        reset_external: bool = False,
        reset_running_requests: bool = False,
        step_engine: bool = True,
        interval: float = 0.02,
        max_interval: float = 1.0,
        on_attempt: Callable[[int, object], None] | None = None,
    ) -> FleetResult[BarrierResult]:
        """The offload barrier: reset the prefix cache until it succeeds, stepping the engine between tries.

        Args:
            deadline: seconds for the whole barrier.
            request_timeout: seconds for each try (default: the client's timeout when set, else 10).
            reset_external: also reset the connector's tier (default False: keep the CPU tier).
            reset_running_requests: preempt running requests so their blocks can be freed.
            step_engine: send a 1-token completion between tries, so finished blocks are released.
            interval: first pause between tries (doubling up to max_interval).
            max_interval: longest pause between tries.
            on_attempt: called after each try with (attempt number, its answer or error).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.reset_prefix_cache_until_success,
            dict(
                deadline=deadline,
                request_timeout=request_timeout,
                reset_external=reset_external,
                reset_running_requests=reset_running_requests,
                step_engine=step_engine,
                interval=interval,
                max_interval=max_interval,
                on_attempt=on_attempt,
            ),
            shared_deadline=True,
        )

    async def reset_prefix_cache_verified(
        self,
        probe: str | Sequence[int],
        *,
        reset_external: bool = False,
        reset_running_requests: bool = False,
        deadline: float = 30.0,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[VerifiedReset]:
        """Reset the prefix cache, then prove that every tier asked to clear serves nothing (opt-in).

        Args:
            probe: a prompt of more than one KV-cache block (text or token ids); the check caches it.
            reset_external: also reset, and check, the connector's tier.
            reset_running_requests: preempt running requests so their blocks can be freed.
            deadline: seconds for the check's waits: refused resets retried, /metrics counting the probe.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.reset_prefix_cache_verified,
            dict(
                probe=probe,
                reset_external=reset_external,
                reset_running_requests=reset_running_requests,
                deadline=deadline,
                **options,
            ),
            shared_deadline=True,
        )
