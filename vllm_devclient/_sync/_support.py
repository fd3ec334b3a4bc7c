"""The blocking twins of `_async/_support.py`."""

from __future__ import annotations

import threading
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


class Guard:
    """`probe()` every `interval` seconds on a daemon thread beside the caller, until it returns True (it
    fired) or `stop()`. A thread cannot be cancelled: `cancel` is the asyncio twin's, and the caller learns
    of a firing from `fired` (the context raising at its end)."""

    def __init__(self, probe: Callable[[], bool], interval: float, *, cancel: bool = True) -> None:
        self.fired = False
        self._error: BaseException | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(probe, interval), name="vllm-devclient-watchdog", daemon=True
        )
        self._thread.start()

    def _watch(self, probe: Callable[[], bool], interval: float) -> None:
        try:
            while not self._stopped.is_set():
                if probe():
                    self.fired = True
                    return
                self._stopped.wait(interval)
        except BaseException as error:  # a bug in the probe: raised by stop(), never a silent end
            self._error = error

    def stop(self) -> bool:
        """End the probing, waiting for the check in flight; True when it fired."""
        self._stopped.set()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self.fired
