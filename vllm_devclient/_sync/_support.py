"""The blocking twins of `_async/_support.py`."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import zmq

T = TypeVar("T")
Pending = Future


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def background(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Pending[T]:
    """Start `fn(*args, **kwargs)` on a thread now and return its Future."""
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vllm-devclient")
    future = executor.submit(fn, *args, **kwargs)
    executor.shutdown(wait=False)
    return future


def result_of(pending: Pending[T]) -> T:
    return pending.result()


def zmq_poller() -> zmq.Poller:
    """A blocking poller."""
    import zmq

    return zmq.Poller()


def zmq_poll(poller: zmq.Poller, timeout_ms: int) -> list[tuple[Any, int]]:
    """Wait on a poller from `zmq_poller` for at most `timeout_ms` milliseconds (-1: no limit)."""
    return poller.poll(timeout_ms)
