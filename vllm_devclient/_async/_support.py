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


class Guard:
    """`probe()` every `interval` seconds in a task beside the caller's, until it returns True (it fired) or
    `stop()`. With `cancel`, firing cancels the task that made the guard, so its work ends at its next await.
    """

    def __init__(self, probe: Callable[[], Awaitable[bool]], interval: float, *, cancel: bool = True) -> None:
        import asyncio

        self.fired = False
        self._stopping = False
        self._owner = asyncio.current_task() if cancel else None
        self._task = asyncio.ensure_future(self._watch(probe, interval))

    async def _watch(self, probe: Callable[[], Awaitable[bool]], interval: float) -> None:
        while not self._stopping:
            if await probe():
                if not self._stopping:
                    self.fired = True
                    if self._owner is not None:
                        self._owner.cancel()
                return
            await sleep(interval)

    async def stop(self) -> bool:
        """End the probing, waiting for it; True when it fired (the cancellation it caused is taken back)."""
        import asyncio

        self._stopping = True
        try:
            # Cancelled again until it ends: on Python 3.10 and 3.11 a cancellation that meets a call
            # completing inside `asyncio.wait_for` is lost (bpo-42130).
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait([self._task], timeout=0.05)
        except asyncio.CancelledError:
            if not self.fired:
                raise  # a cancellation of the caller's own
        uncancel = getattr(self._owner, "uncancel", None)  # Python 3.11+ counts cancellations
        if self.fired and uncancel is not None:
            uncancel()
        if not self._task.cancelled() and (error := self._task.exception()) is not None:
            raise error  # a bug in the probe: never a silent end of the watch
        return self.fired
