# Generated from vllm_devclient/routes/pause.py by scripts/generate.py; do not edit.
"""The pause methods of Fleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...models import AbortRequestsResult, StatusResult
from ..results import FleetResult

if TYPE_CHECKING:
    from ..async_fleet import AsyncFleet

__all__ = ["_PauseMethods"]

T = TypeVar("T")


class _PauseMethods:
    """The pause client methods on every target of the Fleet."""

    if TYPE_CHECKING:
        _fleet: AsyncFleet

        def _run(self, coro: Coroutine[Any, Any, T]) -> T: ...

    def resume(self, **options: Unpack[RequestOptions]) -> FleetResult[StatusResult]:
        """POST /resume: schedule again after pause().

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.resume(**options))

    def is_paused(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /is_paused.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.is_paused(**options))

    def abort_requests(
        self, request_ids: Iterable[str] | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[AbortRequestsResult]:
        """POST /abort_requests (aborting all is never resent).

        Args:
            request_ids: the ids to abort; None: every request in flight.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return self._run(self._fleet.abort_requests(request_ids=request_ids, **options))
