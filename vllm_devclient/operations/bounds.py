"""The bounds of an operation: the whole-call `Bound`, the `RetryPolicy` that carries it, and how errors say
what bounded a call."""

from __future__ import annotations

import dataclasses
import random
import time
from dataclasses import dataclass
from typing import Literal

from ..arguments import Timeouts
from ..constants import DEFAULT_MAX_RETRIES, RETRY_INITIAL_DELAY, RETRY_MAX_DELAY


@dataclass(frozen=True)
class Bound:
    """A bound on an operation as a whole: it ends by `end` (`time.monotonic()`). `seconds` and `name` (the
    argument that set it: "total timeout" or "deadline") are what errors say."""

    end: float
    seconds: float
    name: Literal["total timeout", "deadline"]

    @classmethod
    def starting_now(cls, seconds: float, name: Literal["total timeout", "deadline"]) -> Bound:
        return cls(time.monotonic() + seconds, seconds, name)

    def __str__(self) -> str:
        return f"the {self.name} of {seconds(self.seconds)}"


@dataclass(frozen=True)
class RetryPolicy:
    """How often a call is tried, the pauses between tries, and the bound of all of them (`bound`)."""

    max_retries: int = DEFAULT_MAX_RETRIES
    initial_delay: float = RETRY_INITIAL_DELAY
    max_delay: float = RETRY_MAX_DELAY
    bound: Bound | None = None

    def delay(self, retry: int) -> float:
        # Exponential backoff with full jitter, so many clients do not retry in lockstep.
        return random.uniform(0, min(self.max_delay, self.initial_delay * 2**retry))

    def within(self, total_timeout: float | None) -> RetryPolicy:
        """This policy for one operation starting now, bounded as a whole by `total_timeout` (None: not)."""
        if total_timeout is None:
            return self
        return dataclasses.replace(self, bound=Bound.starting_now(total_timeout, "total timeout"))

    def under(self, bound: Bound | None) -> RetryPolicy:
        return self if bound is None else dataclasses.replace(self, bound=bound)


NO_RETRY = RetryPolicy(max_retries=0)


def earliest(a: float | None, b: float | None) -> float | None:
    """The earlier of two deadlines, None standing for none."""
    if a is None:
        return b
    return a if b is None or a < b else b


def seconds(value: float) -> str:
    return f"{value:g} s"


def per_try(timeout: float | None) -> str:
    return "no timeout per try" if timeout is None else f"timeout {seconds(timeout)} per try"


def said_bounds(tries: int, timeouts: Timeouts, bound: Bound | None, cut: bool) -> str:
    """What bounded a call, each bound by its own word: the tries, the timeout per try, the whole bound."""
    parts = [f"{tries} {'try' if tries == 1 else 'tries'}", per_try(timeouts.total)]
    if bound is not None:
        parts.append(f"the last try cut short by {bound}" if cut else f"within {bound}")
    return ", ".join(parts)
