"""The blocking twins of `_async/_support.py`."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

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
