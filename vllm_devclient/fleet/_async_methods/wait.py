# Generated from vllm_devclient/calls.py by scripts/generate.py; do not edit.
"""The wait methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ...client import AsyncDevClient
from ...models import CheckpointStatus
from ..results import FleetResult

__all__ = ["_AsyncWaitMethods"]

T = TypeVar("T")


class _AsyncWaitMethods:
    """The wait client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def wait_until_ready(
        self, *, deadline: float = 120.0, request_timeout: float | None = None, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /health until it answers 200; EngineDeadError at once when the engine is dead.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try (default: the client's timeout when set, else 1).
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.wait_until_ready,
            dict(deadline=deadline, request_timeout=request_timeout, interval=interval),
            shared_deadline=True,
        )

    async def wait_until_sleeping(
        self, *, deadline: float = 60.0, request_timeout: float | None = None, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_sleeping until true (a 200 from /sleep does not prove the engine sleeps).

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try (default: the client's timeout when set, else 5).
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.wait_until_sleeping,
            dict(deadline=deadline, request_timeout=request_timeout, interval=interval),
            shared_deadline=True,
        )

    async def wait_until_awake(
        self, *, deadline: float = 60.0, request_timeout: float | None = None, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_sleeping until false.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try (default: the client's timeout when set, else 5).
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.wait_until_awake,
            dict(deadline=deadline, request_timeout=request_timeout, interval=interval),
            shared_deadline=True,
        )

    async def wait_until_paused(
        self, *, deadline: float = 60.0, request_timeout: float | None = None, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_paused until true.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try (default: the client's timeout when set, else 5).
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.wait_until_paused,
            dict(deadline=deadline, request_timeout=request_timeout, interval=interval),
            shared_deadline=True,
        )

    async def wait_until_resumed(
        self, *, deadline: float = 60.0, request_timeout: float | None = None, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_paused until false.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try (default: the client's timeout when set, else 5).
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.wait_until_resumed,
            dict(deadline=deadline, request_timeout=request_timeout, interval=interval),
            shared_deadline=True,
        )

    async def wait_until_checkpoint_prepared(
        self, *, deadline: float = 60.0, request_timeout: float | None = None, interval: float = 0.05
    ) -> FleetResult[CheckpointStatus]:
        """Poll /checkpoint/status until prepared (its 503 is 'not yet'); CheckpointFailedError on failed.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try (default: the client's timeout when set, else 5).
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        The deadline is one moment for all targets.
        """
        return await self._each(
            AsyncDevClient.wait_until_checkpoint_prepared,
            dict(deadline=deadline, request_timeout=request_timeout, interval=interval),
            shared_deadline=True,
        )
