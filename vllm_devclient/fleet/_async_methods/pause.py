# Generated from vllm_devclient/routes/pause.py by scripts/generate.py; do not edit.
"""The pause methods of AsyncFleet, each on every target (the client method's signature and docstring)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from typing_extensions import Unpack

from ..._base_client import RequestOptions
from ...client import AsyncDevClient
from ...models import AbortRequestsResult, StatusResult
from ..results import FleetResult

__all__ = ["_AsyncPauseMethods"]

T = TypeVar("T")


class _AsyncPauseMethods:
    """The pause client methods on every target of the AsyncFleet."""

    if TYPE_CHECKING:

        async def _each(
            self,
            method: Callable[..., Awaitable[T]],
            arguments: dict[str, Any],
            *,
            shared_deadline: bool = False,
        ) -> FleetResult[T]: ...

    async def resume(self, **options: Unpack[RequestOptions]) -> FleetResult[StatusResult]:
        """POST /resume: schedule again after pause().

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.resume, dict(**options))

    async def is_paused(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /is_paused.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.is_paused, dict(**options))

    async def abort_requests(
        self, request_ids: Iterable[str] | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[AbortRequestsResult]:
        """POST /abort_requests (aborting all is never resent).

        Args:
            request_ids: the ids to abort; None: every request in flight.

        On every target at once: a FleetResult of each target's answer; when any target failed,
        FleetError with every target's outcome (a fleet made with raise_on_error=False returns the
        FleetResult, failures inside).
        """
        return await self._each(AsyncDevClient.abort_requests, dict(request_ids=request_ids, **options))
