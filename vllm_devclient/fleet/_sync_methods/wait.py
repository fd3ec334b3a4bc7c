# Generated from vllm_devclient/calls.py by scripts/generate.py; do not edit.
"""The wait methods of Fleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ...models import CheckpointStatus
from ..results import FleetResult

if TYPE_CHECKING:
    from ..async_fleet import AsyncFleet

__all__ = ["_WaitMethods"]

T = TypeVar("T")


class _WaitMethods:
    """The wait client methods on every target of the Fleet."""

    if TYPE_CHECKING:
        _fleet: AsyncFleet

        def _run(self, coro: Coroutine[Any, Any, T]) -> T: ...

    def wait_until_ready(
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
        return self._run(
            self._fleet.wait_until_ready(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_sleeping(
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
        return self._run(
            self._fleet.wait_until_sleeping(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_awake(
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
        return self._run(
            self._fleet.wait_until_awake(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_paused(
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
        return self._run(
            self._fleet.wait_until_paused(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_resumed(
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
        return self._run(
            self._fleet.wait_until_resumed(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_checkpoint_prepared(
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
        return self._run(
            self._fleet.wait_until_checkpoint_prepared(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )
