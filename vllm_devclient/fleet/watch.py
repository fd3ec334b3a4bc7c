"""A fleet's watchdog: every target's /health checked at each interval, one count per target (`Watch`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from .._async._support import Guard
from ..client import AsyncDevClient
from ..errors import DevClientError
from ..watchdog import OnTrip, Watch

__all__ = ["watch_fleet"]


@asynccontextmanager
async def watch_fleet(
    clients: Mapping[str, AsyncDevClient],
    *,
    interval: float,
    failures: int,
    request_timeout: float | None,
    on_trip: OnTrip | None,
    cancel: bool,
) -> AsyncIterator[Watch]:
    """Check every target at each interval (all at once, outside the fleet's max_concurrency, so a check
    never waits behind the work it watches); see AsyncFleet.watchdog. `cancel`: cancel the task that
    entered the block when the watchdog trips (the blocking Fleet, whose caller is no task, passes False)."""
    watch = Watch(
        list(clients), interval=interval, failures=failures, request_timeout=request_timeout, on_trip=on_trip
    )

    async def one(url: str, client: AsyncDevClient) -> bool:
        try:
            await client.health(timeout=watch.request_timeout)
        except DevClientError as error:
            return watch.failed(url, error)
        watch.passed(url)
        return False

    async def probe() -> bool:
        return any(await asyncio.gather(*(one(url, c) for url, c in clients.items())))

    guard = Guard(probe, watch.interval, cancel=cancel)
    try:
        yield watch
    except BaseException as failure:
        if await guard.stop() and watch.error is not None:
            raise watch.error from failure
        raise
    if await guard.stop() and watch.error is not None:
        raise watch.error
