# Generated from vllm_devclient/routes/sleep.py and routes/checkpoint.py by scripts/generate.py; do not edit.
"""The sleep methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...client import AsyncDevClient
from ...models import CheckpointStatus, SleepResult, WakeUpResult
from ..results import FleetResult

__all__ = ["_AsyncSleepMethods"]

T = TypeVar("T")


class _AsyncSleepMethods:
    """The sleep client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def sleep(
        self,
        level: int = 1,
        *,
        mode: Literal["abort", "wait", "keep"] = "abort",
        reset_connector: bool | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[SleepResult]:
        """POST /sleep: put the engine to sleep (level 2 has no HTTP timeout by default).

        Args:
            level: 0 pauses, 1 offloads the weights, 2 discards them.
            mode: what happens to requests in flight: abort (they end now, finish reason abort), wait (the
                call returns once they have finished) or keep (they are frozen, and go on at resume).
            reset_connector: false keeps the KV connector's tier (CPU offload); None: the server's default
                (reset).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(
            AsyncDevClient.sleep, dict(level=level, mode=mode, reset_connector=reset_connector, **options)
        )

    async def wake_up(
        self, tags: Sequence[str] | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[WakeUpResult]:
        """POST /wake_up; `.awake` is False on a partial wake (no HTTP timeout by default).

        Args:
            tags: what to wake (e.g. ["weights"], then ["kv_cache"]); None: everything.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.wake_up, dict(tags=tags, **options))

    async def is_sleeping(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /is_sleeping.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.is_sleeping, dict(**options))

    async def checkpoint_prepare(
        self, mode: Literal["abort", "wait", "keep"] = "wait", **options: Unpack[RequestOptions]
    ) -> FleetResult[CheckpointStatus]:
        """POST /checkpoint/prepare: drain, then release the KV cache (poll checkpoint_status).

        Args:
            mode: how the drain treats requests in flight: wait (they finish first), abort or keep.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.checkpoint_prepare, dict(mode=mode, **options))

    async def checkpoint_status(self, **options: Unpack[RequestOptions]) -> FleetResult[CheckpointStatus]:
        """GET /checkpoint/status: `.prepared` once safe to capture (its 503 means not yet).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.checkpoint_status, dict(**options))

    async def checkpoint_restore(self, **options: Unpack[RequestOptions]) -> FleetResult[CheckpointStatus]:
        """POST /checkpoint/restore: bring back what preparing released, and serve (no HTTP timeout).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.checkpoint_restore, dict(**options))
