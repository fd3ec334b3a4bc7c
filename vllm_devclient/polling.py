"""The offload barrier and the waits: poll until a state is reached, written once for both clients (sans-IO,
run as the operations of `operations/` are).

How long. A poll has one `Bound`: its `deadline`, or the client's `total_timeout` when that ends sooner.
Each try gets `request_timeout` (None: no bound of its own) but never more than what is left of the bound;
a try started just before the end still gets `MIN_TRY_SECONDS`, so that it can be answered at all, and no
try starts after the end. Each try is one request, never resent (the poll is its own retry loop).

When to stop sooner: nothing listens there. A try that could not connect at all (refused, or no such host;
not a timeout, not TLS) is "not yet" only `connect_retries` times in a row (the client's `max_retries`):
the next one ends the barrier (`BarrierUnreachableError`) or the wait (`WaitUnreachableError`) at once,
naming the URL. A refused connection there means a wrong URL or a server that is not running, which
waiting cannot mend. `wait_until_ready` alone (`connect_retries=None`) polls on through refused
connections until its bound: it exists for a server that is starting, whose port is closed until it
listens, and nothing on the wire tells a starting server from a missing one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from . import arguments as check
from .arguments import Timeouts
from .constants import MIN_TRY_SECONDS
from .endpoints import Endpoint
from .errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    BarrierTimeoutError,
    BarrierUnreachableError,
    BarrierUnsupportedError,
    DevClientError,
    EngineCallError,
    EngineDeadError,
    TLSError,
    WaitTimeoutError,
    WaitUnreachableError,
    clip,
)
from .models import BarrierResult, ResetPrefixCacheResult
from .operations import NO_RETRY, Bound, CallContext, ModelCache, Operation, Sleep, call, per_try, step_engine
from .records import GATEWAY_STATUSES
from .routes import endpoint as route

__all__ = [
    "Backoff",
    "Plan",
    "reset_prefix_cache_until_success",
    "wait_for_flag",
    "wait_until",
    "wait_until_ready",
]

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Poll interval: fast at first (the answer often flips within milliseconds), then backing off."""

    initial: float
    maximum: float
    factor: float = 2.0

    @classmethod
    def of(cls, interval: object, max_interval: object) -> Backoff:
        initial = check.seconds(interval, "interval")
        maximum = check.seconds(max_interval, "max_interval")
        return cls(initial=initial, maximum=max(initial, maximum))

    def intervals(self) -> Generator[float, None, None]:
        value = self.initial
        while True:
            yield value
            value = min(self.maximum, value * self.factor)


@dataclass(frozen=True)
class Plan:
    """How a poll runs: its `deadline` and the client's `total_timeout` (seconds; the sooner ends it), each
    try's `request_timeout`, the pauses, and how many tries in a row may fail to connect (None: any)."""

    deadline: float
    request_timeout: float | None
    poll: Backoff
    total_timeout: float | None = None
    connect_retries: int | None = None

    def start(self) -> Bound:
        """The poll's bound, starting now (the arguments checked first: nothing is sent before)."""
        deadline = check.seconds(self.deadline, "deadline")
        check.optional_seconds(self.request_timeout, "request_timeout")
        if self.total_timeout is not None and self.total_timeout < deadline:
            return Bound.starting_now(self.total_timeout, "total timeout")
        return Bound.starting_now(deadline, "deadline")

    def try_timeouts(self, bound: Bound) -> Timeouts:
        left = max(MIN_TRY_SECONDS, bound.end - time.monotonic())
        seconds = left if self.request_timeout is None else min(self.request_timeout, left)
        return Timeouts(connect=seconds, total=seconds)

    def raise_hint(self, bound: Bound, ctx: CallContext) -> str:
        """What to raise when the bound ended a poll: the argument that set it."""
        if bound.name == "total timeout":
            return f"raise {ctx.hint('total_timeout')} (or {ctx.hint('deadline')})"
        return f"raise {ctx.hint('deadline')}"


def _no_connection(exc: object) -> bool:
    """A try that could not connect at all: refused, or no such host (not a timeout, not TLS)."""
    return (
        isinstance(exc, APIConnectionError)
        and not exc.sent
        and not isinstance(exc, APITimeoutError | TLSError)
    )


class _Refusals:
    """Counts tries in a row that could not connect; says when the poll must stop (see the module)."""

    def __init__(self, allowed: int | None) -> None:
        self.allowed = allowed
        self.in_a_row = 0

    def too_many(self, outcome: object) -> bool:
        self.in_a_row = self.in_a_row + 1 if _no_connection(outcome) else 0
        return self.allowed is not None and self.in_a_row > self.allowed

    def message(self, what: str, last: object, ctx: CallContext, counts: str = "") -> str:
        tries = f"{self.in_a_row} {'try' if self.in_a_row == 1 else 'tries'} in a row"
        ready = "wait-ready" if ctx.speaks == "cli" else "wait_until_ready()"
        return ctx.secrets.redact(
            f"{ctx.base_url} is unreachable: {what} could not connect ({tries}{counts}; last error: "
            f"{clip(str(last), 300)}). Nothing listens there: check the URL and that the server is running "
            f"(this does not wait for a server to start; {ready} does)"
        )


def _not_yet(exc: DevClientError) -> bool:
    """A barrier try that failed in a way the next try may not: counted as 'not yet'."""
    if isinstance(exc, APIConnectionError):
        return not isinstance(exc, TLSError)
    return (
        isinstance(exc, APIStatusError)
        and not isinstance(exc, EngineCallError)
        and exc.status_code in GATEWAY_STATUSES
    )


@dataclass
class _Tally:
    """What the barrier's tries came to (its result, or its error's fields and words)."""

    start: float
    attempts: int = 0
    steps: int = 0
    reached: int = 0
    refused: int = 0
    last: object = None

    def add(self, outcome: object) -> None:
        self.attempts += 1
        self.last = outcome
        if not isinstance(outcome, APIConnectionError) or outcome.sent:
            self.reached += 1  # an answer came, or the request left: the server got this reset
        if isinstance(outcome, ResetPrefixCacheResult) and outcome.success is False:
            self.refused += 1

    def fields(self) -> dict[str, Any]:
        return {
            "waited_s": time.monotonic() - self.start,
            "attempts": self.attempts,
            "engine_steps": self.steps,
            "last": self.last,
            "reached": self.reached,
            "refused": self.refused,
        }

    def counts(self, request_timeout: float | None) -> str:
        tries = f"{self.attempts} {'try' if self.attempts == 1 else 'tries'}"
        return (
            f"{tries} ({per_try(request_timeout)}), {self.reached} reached the server, {self.refused} "
            f"refused by the engine, {self.steps} engine steps"
        )


def reset_prefix_cache_until_success(
    cache: ModelCache,
    *,
    plan: Plan,
    reset_external: bool,
    reset_running_requests: bool,
    step: bool,
    ctx: CallContext,
    on_attempt: Callable[[int, object], None] | None = None,
) -> Operation[BarrierResult]:
    """The offload barrier: reset until success, stepping the engine between tries, until the bound.

    Each try is one request (`attempts` counts what the server got). A try that times out, cannot connect or
    meets a gateway error counts as "not yet" (no connection: see the module); other errors end the barrier.
    """
    check.flag(step, "step_engine")
    ep: Endpoint[ResetPrefixCacheResult] = route(
        "reset_prefix_cache", reset_running_requests=reset_running_requests, reset_external=reset_external
    )
    bound = plan.start()
    tally = _Tally(time.monotonic())
    refusals = _Refusals(plan.connect_retries)
    intervals = plan.poll.intervals()
    while True:
        outcome = yield from _barrier_try(ep, plan, bound, ctx)
        tally.add(outcome)
        if on_attempt is not None:
            on_attempt(tally.attempts, outcome)
        if isinstance(outcome, ResetPrefixCacheResult) and outcome.success is not False:
            return _barrier_done(outcome, tally)
        if refusals.too_many(outcome):
            counts = f"; in all {tally.counts(plan.request_timeout)}"
            message = refusals.message("reset_prefix_cache", outcome, ctx, counts)
            raise BarrierUnreachableError(message, **tally.fields())
        if time.monotonic() >= bound.end:
            break
        if step and not _no_connection(outcome) and bound.end - time.monotonic() >= MIN_TRY_SECONDS:
            tally.steps += yield from _step(cache, plan, bound, ctx)
        # The last try falls on the bound: a reset that succeeds then still counts.
        wait = min(next(intervals), bound.end - time.monotonic())
        if wait > 0:
            yield Sleep(wait)
    raise _barrier_failed(tally, plan, bound, ctx)


def _barrier_try(
    ep: Endpoint[ResetPrefixCacheResult], plan: Plan, bound: Bound, ctx: CallContext
) -> Operation[object]:
    try:
        answer: object = yield from call(
            ep, timeouts=plan.try_timeouts(bound), retry=NO_RETRY, ctx=ctx, say_bounds=False
        )
    except DevClientError as exc:
        if not _not_yet(exc):
            raise
        return exc
    return answer


def _step(cache: ModelCache, plan: Plan, bound: Bound, ctx: CallContext) -> Operation[int]:
    """One engine step between tries: 1 when it went through, 0 when it was 'not yet'."""
    try:
        yield from step_engine(cache, timeouts=plan.try_timeouts(bound), retry=NO_RETRY, ctx=ctx)
    except DevClientError as exc:
        if not _not_yet(exc):
            raise
        return 0
    return 1


def _barrier_done(answer: ResetPrefixCacheResult, tally: _Tally) -> BarrierResult:
    if answer.success is None:
        raise BarrierUnsupportedError(
            "the server answers /reset_prefix_cache with a bare 200, so the barrier cannot know "
            "whether the prefix cache was reset; upgrade vLLM (>= 0.26) or reset without the barrier"
        )
    elapsed = time.monotonic() - tally.start
    return BarrierResult(attempts=tally.attempts, engine_steps=tally.steps, elapsed_s=elapsed)


def _barrier_failed(tally: _Tally, plan: Plan, bound: Bound, ctx: CallContext) -> BarrierTimeoutError:
    last = tally.last
    said = f"success={last.success}" if isinstance(last, ResetPrefixCacheResult) else clip(f"{last}", 300)
    counts = tally.counts(plan.request_timeout)
    if tally.reached == 0:
        return BarrierUnreachableError(
            ctx.secrets.redact(
                f"{ctx.base_url} is unreachable: reset_prefix_cache never reached the server within "
                f"{bound}: {counts}; last error: {said}. Check the URL and that the server is running"
            ),
            **tally.fields(),
        )
    raise_bound = plan.raise_hint(bound, ctx)
    cause = (
        f"Blocks are still held (running requests or in-flight offload stores); {raise_bound} or pass "
        f"{ctx.hint('reset_running_requests', True)}"
        if tally.refused
        else f"The server did not answer in time; raise {ctx.hint('request_timeout')} or "
        f"{raise_bound.removeprefix('raise ')}"
    )
    return BarrierTimeoutError(
        ctx.secrets.redact(
            f"reset_prefix_cache did not succeed within {bound}: {counts}; last answer: {said}. {cause}"
        ),
        **tally.fields(),
    )


def wait_until(
    probe: Endpoint[T],
    done: Callable[[T], bool],
    *,
    what: str,
    plan: Plan,
    ctx: CallContext,
    tolerate: Callable[[DevClientError], bool],
) -> Operation[T]:
    """Poll `probe` until `done(answer)` or the bound; errors for which `tolerate` is true: 'not yet'."""
    bound = plan.start()
    start = time.monotonic()
    refusals = _Refusals(plan.connect_retries)
    last: object = None
    tries = 0
    for interval in plan.poll.intervals():
        tries += 1
        try:
            answer = yield from call(
                probe, timeouts=plan.try_timeouts(bound), retry=NO_RETRY, ctx=ctx, say_bounds=False
            )
        except DevClientError as exc:
            if isinstance(exc, TLSError) or not tolerate(exc):
                raise
            last = exc
        else:
            if done(answer):
                return answer
            last = answer
        if refusals.too_many(last):
            message = refusals.message(f"waiting for {what}", last, ctx)
            raise WaitUnreachableError(message, waited_s=time.monotonic() - start, last=last)
        remaining = bound.end - time.monotonic()
        if remaining <= 0:
            break
        yield Sleep(min(interval, remaining))
    counts = f"{tries} {'try' if tries == 1 else 'tries'}, {per_try(plan.request_timeout)}"
    raise WaitTimeoutError(
        ctx.secrets.redact(
            f"{what} not reached within {bound} ({counts}; last: {clip(repr(last), 300)}); "
            f"{plan.raise_hint(bound, ctx)}"
        ),
        waited_s=time.monotonic() - start,
        last=last,
    )


def _ready_tolerates(exc: DevClientError) -> bool:
    # Not up yet: refused connections, a Rust frontend that accepts TCP and answers nothing, a proxy's 502.
    # A dead engine (503 from /health) will not come back: that ends the wait.
    return isinstance(exc, APIConnectionError) or (
        isinstance(exc, APIStatusError) and not isinstance(exc, EngineDeadError)
    )


def wait_until_ready(*, plan: Plan, ctx: CallContext) -> Operation[bool]:
    """Poll /health until 200. Refused connections are 'not yet' until the bound (a starting server)."""
    health: Endpoint[bool] = route("health")
    ready = Plan(plan.deadline, plan.request_timeout, plan.poll, plan.total_timeout, connect_retries=None)
    result = yield from wait_until(
        health, bool, what="/health answering 200", plan=ready, ctx=ctx, tolerate=_ready_tolerates
    )
    return result


def wait_for_flag(
    probe: Endpoint[bool], wanted: bool, *, what: str, plan: Plan, ctx: CallContext
) -> Operation[None]:
    yield from wait_until(
        probe,
        lambda v: v is wanted,
        what=what,
        plan=plan,
        ctx=ctx,
        tolerate=lambda exc: isinstance(exc, APIConnectionError),
    )
