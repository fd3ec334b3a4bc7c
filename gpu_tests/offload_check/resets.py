"""A reset of the prefix cache, and what confirms that it happened, on every release the check serves.

vLLM 0.26 answers ``/reset_prefix_cache`` with ``{"success": bool}``, and the SDK's barrier
(``reset_prefix_cache_until_success``) resets until it says true. Every release before answers a bare 200,
whether or not the reset went through (a GPU reset fails while blocks are held), and the SDK refuses to guess
(``BarrierUnsupportedError``). There the check confirms a reset by the KV-event stream: the GPU block pool
sends ``AllBlocksCleared`` after a reset that succeeded, with the next engine step's events.

:func:`confirm_reset` is that barrier, sans-IO: it yields :class:`Post` (one reset, answered with
:class:`Answered`, :class:`NotYet` or :class:`Refused`), :class:`Step` (one engine step), :class:`Look` (the
clock and the ``AllBlocksCleared`` count so far, a :class:`Seen`) and :class:`Pause`, and returns a
:class:`~.report.ResetResult`: confirmed by ``success`` or by ``AllBlocksCleared``, refused (an HTTP error
that is no gateway's, with the server's message), or unconfirmed with the reason; never success by default.
:func:`drive` runs it over plain callables (``server_io.ServerIO`` and the tests' fake server).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from .report import ResetResult

__all__ = [
    "GATEWAY_STATUSES",
    "Answered",
    "Look",
    "NotYet",
    "Pause",
    "Post",
    "Refused",
    "Seen",
    "Step",
    "confirm_reset",
    "drive",
]


@dataclass(frozen=True)
class Post:
    """Send one ``/reset_prefix_cache``; answered with an :data:`Outcome`."""

    external: bool


@dataclass(frozen=True)
class Step:
    """Make the engine run one step: a reset's events go out with the next step's."""


@dataclass(frozen=True)
class Look:
    """Read the clock and the stream; answered with a :class:`Seen`."""


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Seen:
    now: float
    cleared: int | None  # AllBlocksCleared seen so far; None: the check has no KV-event stream


@dataclass(frozen=True)
class Answered:
    success: bool | None  # None: a bare 200


@dataclass(frozen=True)
class NotYet:
    """A try the next one may get through (no connection, a gateway status)."""

    reason: str


@dataclass(frozen=True)
class Refused:
    """The server answered the reset with an error of its own: the reset is refused, not late."""

    status: int
    message: str


Effect = Post | Step | Look | Pause
Outcome = Answered | NotYet | Refused

# HTTP's gateway family (a proxy, or a server between starts, answered): a reset so answered is not yet
# refused, and the next try may get through (the statuses the client itself retries).
GATEWAY_STATUSES = frozenset({502, 503, 504})


def _intervals(initial: float, maximum: float) -> Generator[float, None, None]:
    value = initial
    while True:
        yield value
        value = min(maximum, value * 2)


@dataclass
class _Tries:
    """A confirmation under way: the resets sent, the engine steps, the last answer and whether one was a
    bare 200, from its first look (``start``) and the ``AllBlocksCleared`` count a confirmation must pass."""

    external: bool
    start: Seen
    base: int | None
    attempts: int
    last: str
    bare: bool
    steps: int = 0

    def result(self, seen: Seen, outcome: str, **kw: Any) -> ResetResult:
        return ResetResult(
            attempts=self.attempts,
            engine_steps=self.steps,
            elapsed_s=round(seen.now - self.start.now, 3),
            external=self.external,
            outcome=outcome,
            **kw,
        )

    def confirmed(self, seen: Seen) -> bool:
        return seen.cleared is not None and self.base is not None and seen.cleared > self.base


def _post(tries: _Tries) -> Generator[Effect, Any, ResetResult | None]:
    """Send one reset: a refusal or a ``success`` ends the barrier (its result); any other answer is kept
    as the last one (None)."""
    out: Outcome = yield Post(tries.external)
    tries.attempts += 1
    if isinstance(out, Refused):
        seen = yield Look()
        return tries.result(seen, "refused", confirmed_by=None, http_status=out.status, message=out.message)
    if isinstance(out, Answered) and out.success:
        seen = yield Look()
        return tries.result(seen, "confirmed", confirmed_by="success")
    if isinstance(out, Answered):
        tries.bare = tries.bare or out.success is None
        tries.last = "a bare 200" if out.success is None else "success=false (blocks still held)"
    else:
        tries.last = out.reason
    return None


def _given_up(tries: _Tries, seen: Seen, deadline: float, end: float) -> ResetResult | None:
    """After an unconfirming step: unconfirmed where nothing can confirm a bare 200 (no stream) or nothing
    did by the deadline; None: try again."""
    if tries.bare and seen.cleared is None:
        why = (
            "the server answers /reset_prefix_cache with a bare 200 and the check has no KV-event stream "
            "to confirm the reset by (AllBlocksCleared)"
        )
        return tries.result(seen, "unconfirmed", confirmed_by=None, message=why)
    if seen.now >= end:
        why = (
            f"nothing confirmed the reset within {deadline:g} s: no success answer and no "
            f"AllBlocksCleared on the stream; {tries.attempts} reset(s) sent, {tries.steps} engine step(s), "
            f"last answer {tries.last}"
        )
        return tries.result(seen, "unconfirmed", confirmed_by=None, message=why)
    return None


def confirm_reset(
    *,
    external: bool,
    deadline: float,
    sent: int = 0,
    cleared_before: int | None = None,
    interval: float = 0.02,
    max_interval: float = 1.0,
) -> Generator[Effect, Any, ResetResult]:
    """Reset until a ``success`` answer or an ``AllBlocksCleared`` after the first reset confirms it, stepping
    the engine and retrying until ``deadline`` seconds have passed (the SDK barrier's loop).

    ``sent``: resets already sent before (the SDK barrier's try that met the bare 200), whose
    ``AllBlocksCleared`` counts too; ``cleared_before``: the count read before them (default: at the start).
    """
    start: Seen = yield Look()
    base = cleared_before if cleared_before is not None else start.cleared
    last = "a bare 200" if sent else "no answer"
    tries = _Tries(external, start, base, attempts=sent, last=last, bare=sent > 0)
    end = start.now + deadline
    waits = _intervals(interval, max_interval)
    post = not sent
    while True:
        if post:
            done = yield from _post(tries)
            if done is not None:
                return done
        post = True
        yield Step()
        tries.steps += 1
        seen = yield Look()
        if tries.confirmed(seen):
            return tries.result(seen, "confirmed", confirmed_by="AllBlocksCleared")
        given_up = _given_up(tries, seen, deadline, end)
        if given_up is not None:
            return given_up
        yield Pause(min(next(waits), max(0.0, end - seen.now)))
        seen = yield Look()  # an event that came late confirms the reset already sent
        if tries.confirmed(seen):
            return tries.result(seen, "confirmed", confirmed_by="AllBlocksCleared")


def drive(
    op: Generator[Effect, Any, ResetResult],
    *,
    post: Callable[[bool], Outcome],
    step: Callable[[], None],
    cleared: Callable[[], int | None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ResetResult:
    """Run :func:`confirm_reset`'s effects with these callables; its result."""
    answer: Any = None
    try:
        while True:
            effect = op.send(answer)
            if isinstance(effect, Post):
                answer = post(effect.external)
            elif isinstance(effect, Step):
                step()
                answer = None
            elif isinstance(effect, Look):
                answer = Seen(now=clock(), cleared=cleared())
            else:
                sleep(effect.seconds)
                answer = None
    except StopIteration as stop:
        value: ResetResult = stop.value
        return value
