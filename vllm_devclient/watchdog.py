"""A watchdog's count, written once for the clients and the fleets (no I/O, no clock).

The clients' `watchdog()` context polls `/health` every `interval` seconds beside the caller's work (a task
for the asyncio surfaces, a daemon thread for the blocking client) and reports each answer here. A target
that fails `failures` checks in a row trips the watchdog: the error (`ServerUnhealthyError`, naming the
target and its last error) is kept, `on_trip` called once, and the context raises it (the asyncio surfaces
also cancel the task that entered the block). A check that passes sets the target's count back to zero.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from . import arguments as check
from .errors import DevClientError, ServerUnhealthyError

__all__ = ["OnTrip", "Watch"]

OnTrip = Callable[[ServerUnhealthyError], None]


class Watch:
    """What a watchdog has seen: each target's failures in a row, and the error once it tripped.

    Args:
        urls: the targets watched.
        interval: seconds between checks.
        failures: the checks in a row a target must fail to trip the watchdog.
        request_timeout: seconds for each check (None: `interval`).
        on_trip: called once, with the error, when the watchdog trips (on the watchdog's thread or task).
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        interval: float,
        failures: int,
        request_timeout: float | None = None,
        on_trip: OnTrip | None = None,
    ) -> None:
        self.interval = check.seconds(interval, "interval")
        self.failures = check.positive_int(failures, "failures")
        self.request_timeout = (
            self.interval if request_timeout is None else check.seconds(request_timeout, "request_timeout")
        )
        self.on_trip = on_trip
        self.in_a_row: dict[str, int] = dict.fromkeys(urls, 0)
        self.checks = 0
        self.error: ServerUnhealthyError | None = None

    def __repr__(self) -> str:
        state = f"tripped on {self.error.url}" if self.error is not None else "watching"
        return f"Watch({len(self.in_a_row)} targets, {self.checks} checks, {state})"

    @property
    def tripped(self) -> bool:
        return self.error is not None

    def passed(self, url: str) -> None:
        """A check of `url` answered healthy."""
        self.checks += 1
        self.in_a_row[url] = 0

    def failed(self, url: str, error: DevClientError) -> bool:
        """A check of `url` failed with `error`; True when the watchdog trips now or had tripped."""
        self.checks += 1
        self.in_a_row[url] += 1
        if self.error is None and self.in_a_row[url] >= self.failures:
            self.error = ServerUnhealthyError(url, failures=self.in_a_row[url], last=error)
            if self.on_trip is not None:
                self.on_trip(self.error)
        return self.error is not None

    def check(self) -> None:
        """Raise the watchdog's error if it tripped (for a blocking caller's loop: it cannot be cancelled)."""
        if self.error is not None:
            raise self.error
