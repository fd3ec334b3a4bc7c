"""How the two subscribers wait on their sockets: a poller and its poll, asyncio (`zmq.asyncio`) for
`AsyncKVEventSubscriber`, blocking (`zmq.Poller`) for `KVEventSubscriber` (generated from the async one,
which names the async pair; `make generate` swaps the names)."""

from __future__ import annotations

from typing import Any

import zmq
import zmq.asyncio


def new_async_poller() -> zmq.Poller:
    """A poller whose `poll` is awaited (zmq.asyncio), for plain sockets."""
    return zmq.asyncio.Poller()


async def async_wait_for(poller: zmq.Poller, timeout_ms: int) -> list[tuple[Any, int]]:
    """Wait on a poller from `new_async_poller` for at most `timeout_ms` milliseconds (-1: no limit)."""
    events: list[tuple[Any, int]] = await poller.poll(timeout_ms)  # type: ignore[misc]  # awaitable here
    return events


def new_poller() -> zmq.Poller:
    """A blocking poller."""
    return zmq.Poller()


def wait_for(poller: zmq.Poller, timeout_ms: int) -> list[tuple[Any, int]]:
    """Wait on a poller from `new_poller` for at most `timeout_ms` milliseconds (-1: no limit)."""
    return poller.poll(timeout_ms)
