"""The few I/O primitives the async surfaces use; `_sync/_support.py` has their blocking twins."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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
