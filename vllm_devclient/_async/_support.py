"""The few I/O primitives the async surfaces use; `_sync/_support.py` has their blocking twins."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import zmq

T = TypeVar("T")
# What `background` returns: awaited here, `.result()`-ed in the sync twin.
Pending = Awaitable


async def sleep(seconds: float) -> None:
    import asyncio  # here, not at the top: importing the package must not pay for asyncio

    await asyncio.sleep(seconds)


def background(fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> Pending[T]:
    """Start `fn(*args, **kwargs)` now and return something to await its result with (an asyncio Task)."""
    import asyncio

    return asyncio.ensure_future(fn(*args, **kwargs))


async def result_of(pending: Pending[T]) -> T:
    return await pending


# The KV-event subscriber's waiting. zmq is imported in the functions: the client must not need it.


def zmq_poller() -> zmq.Poller:
    """A poller whose `poll` is awaited (zmq.asyncio), for plain sockets."""
    import zmq.asyncio

    return zmq.asyncio.Poller()


async def zmq_poll(poller: zmq.Poller, timeout_ms: int) -> list[tuple[Any, int]]:
    """Wait on a poller from `zmq_poller` for at most `timeout_ms` milliseconds (-1: no limit)."""
    events: list[tuple[Any, int]] = await poller.poll(timeout_ms)  # type: ignore[misc]  # awaitable here
    return events
