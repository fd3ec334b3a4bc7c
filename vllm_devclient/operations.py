"""The client's behaviour, written once for both the sync and the async client.

An operation is a generator that yields effects (`Transmit` one HTTP exchange, `Sleep`) and gets their
outcome back; the clients run effects with their transport and `time.sleep` / `asyncio.sleep`. Retries, the
offload barrier, the waits and engine stepping live here, so the two clients cannot drift apart.

The rules every operation keeps:
- One deadline. A wait or the barrier has one absolute deadline; every try, retry and pause inside it gets
  only what is left of it (a try started just before the deadline still gets `MIN_TRY_SECONDS`, so it can be
  answered at all, and no try starts after it). A plain call's `timeout` bounds each try as a whole.
- Resend only what is safe. A request is sent again when it provably never left (no connection), or when
  its route is idempotent: after a retryable answer or failure (up to `max_retries`), and once, not counted,
  when a kept-alive connection turned out closed before any answer came. A route that is not idempotent is
  never sent twice; its request travels on a connection of its own, so a stale pooled one cannot fail it.
- Errors are built in one place (`_status_error`, `_transport_error`, `_parse`), with secrets masked.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from . import arguments as check
from . import endpoints
from .answers import ShapeError
from .arguments import Timeouts
from .constants import (
    DEFAULT_MAX_RETRIES,
    DEV_ROUTES_PROBE_TIMEOUT,
    MIN_TRY_SECONDS,
    RETRY_INITIAL_DELAY,
    RETRY_MAX_DELAY,
)
from .endpoints import Endpoint
from .errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    BarrierTimeoutError,
    BarrierUnreachableError,
    BarrierUnsupportedError,
    DevClientError,
    DevModeDisabledError,
    EngineCallError,
    EngineDeadError,
    Frontend,
    ResponseValidationError,
    RouteNotServedError,
    TLSError,
    WaitTimeoutError,
    clip,
    error_from_response,
)
from .models import BarrierResult, Completion, ResetPrefixCacheResult
from .records import GATEWAY_STATUSES
from .redaction import NO_SECRETS, Secrets
from .responses import ResponseLike
from .routes import endpoint as route
from .transports.base import ConnectionDropped, TransportError, TransportTimeout
from .transports.tls import TLSFailure

T = TypeVar("T")
log = logging.getLogger("vllm_devclient")


class Transmit(NamedTuple):
    """Send one request; hand back the response (body read), or throw the `TransportError` in.

    `deadline` (absolute, `time.monotonic()`) bounds the whole exchange; `connect_timeout` the connecting.
    """

    endpoint: Endpoint[Any]
    connect_timeout: float | None
    deadline: float | None


class Sleep(NamedTuple):
    seconds: float


Effect = Transmit | Sleep
Operation = Generator[Effect, Any, T]


@dataclass(frozen=True)
class CallContext:
    """What errors are built with: the client's URL as shown, its secrets, the frontend it has seen."""

    base_url: str = ""
    secrets: Secrets = NO_SECRETS
    frontend: Frontend = "unknown"
    # Whose words fix hints use: a Python caller's keywords, or the command line's flags.
    speaks: Literal["python", "cli"] = "python"
    prefix: str = ""  # the base URL's path, before every route's

    def hint(self, name: str, value: object = None) -> str:
        """An argument as the caller writes it: `deadline=` / `reset_running_requests=True`, or on the
        command line `--deadline` / `--reset-running-requests`."""
        if self.speaks == "cli":
            return "--" + name.replace("_", "-")
        return f"{name}={value!r}" if value is not None else f"{name}="


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = DEFAULT_MAX_RETRIES
    initial_delay: float = RETRY_INITIAL_DELAY
    max_delay: float = RETRY_MAX_DELAY

    def delay(self, retry: int) -> float:
        # Exponential backoff with full jitter, so many clients do not retry in lockstep.
        return random.uniform(0, min(self.max_delay, self.initial_delay * 2**retry))


NO_RETRY = RetryPolicy(max_retries=0)


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None or a < b else b


def _seconds(value: float) -> str:
    return f"{value:g} s"


def _bounds(tries: int, timeouts: Timeouts, deadline: float | None, cut: bool) -> str:
    """What bounded a call, each bound by its own word: the tries, the timeout per try, the deadline."""
    parts = [f"{tries} {'try' if tries == 1 else 'tries'}"]
    parts.append(
        "no timeout per try" if timeouts.total is None else f"timeout {_seconds(timeouts.total)} per try"
    )
    if deadline is not None:
        parts.append("the last try cut short by the deadline" if cut else "within the deadline")
    return ", ".join(parts)


def _transport_error(
    exc: TransportError, ep: Endpoint[Any], ctx: CallContext, bounds: str = ""
) -> APIConnectionError:
    kind: type[APIConnectionError] = APIConnectionError
    if isinstance(exc, TLSFailure):
        kind = TLSError
    elif isinstance(exc, TransportTimeout):
        kind = APITimeoutError
    verb = "timed out" if kind is APITimeoutError else "failed"
    note = "" if exc.sent else " (nothing was sent)"
    said = f" ({bounds})" if bounds and kind is APITimeoutError else ""
    return kind(
        ctx.secrets.redact(f"{ep.method} {ep.path} {verb}: {exc.reason}{note}{said}"),
        method=ep.method,
        url=ctx.base_url + ep.path,
        path=ep.path,
        sent=exc.sent,
    )


def _status_error(
    response: ResponseLike, ep: Endpoint[Any], ctx: CallContext, dev_routes_served: bool | None = None
) -> APIStatusError:
    error = _read_status_error(response, ep, ctx, dev_routes_served)
    if response.status_code == 404 and ctx.prefix and not isinstance(error, RouteNotServedError):
        # vLLM serves every route at the root: a path in the base URL is the likelier cause.
        error.message += (
            f"; the base URL has the path {ctx.prefix!r} and vLLM serves its routes at the root: drop the "
            "path from the URL, unless a proxy there forwards to the server"
        )
    return error


def _read_status_error(
    response: ResponseLike, ep: Endpoint[Any], ctx: CallContext, dev_routes_served: bool | None
) -> APIStatusError:
    return error_from_response(
        response,
        method=ep.method,
        path=ep.path,
        dev_route=ep.dev_route,
        secrets=ctx.secrets,
        frontend=ctx.frontend,
        dev_routes_served=dev_routes_served,
    )


def dev_routes_served(
    *, timeouts: Timeouts, deadline: float | None, ctx: CallContext
) -> Operation[bool | None]:
    """After a dev route's 404: does the server serve dev routes at all? One request (`dev_routes_probe`):
    404 says dev mode is off, 405 (or a 2xx) that it is on, so the release lacks the route. None for any
    other answer or none (a proxy's error, a timeout): nothing then tells the two apart."""
    probe = endpoints.dev_routes_probe()
    start = time.monotonic()
    limit = min(DEV_ROUTES_PROBE_TIMEOUT, *(t for t in (timeouts.total, timeouts.connect) if t is not None))
    try:
        response: ResponseLike = yield Transmit(probe, limit, _earliest(start + limit, deadline))
    except TransportError as exc:
        _log_exchange(probe, ctx, start, f"failed ({exc.reason})")
        return None
    _log_exchange(probe, ctx, start, str(response.status_code))
    status = response.status_code
    return False if status == 404 else True if status == 405 or 200 <= status < 300 else None


def _parse(ep: Endpoint[T], response: ResponseLike, ctx: CallContext) -> T:
    try:
        return ep.parse(response, ep.body)
    except ShapeError as exc:
        raise ResponseValidationError(
            ctx.secrets.redact(str(exc)),
            method=ep.method,
            path=ep.path,
            status_code=response.status_code,
            body=ctx.secrets.redact(response.text),
        ) from None


def _log_exchange(ep: Endpoint[Any], ctx: CallContext, start: float, outcome: str) -> None:
    """One DEBUG line per exchange (as httpx and openai-python log theirs): method, path, status, time."""
    if log.isEnabledFor(logging.DEBUG):
        took = (time.monotonic() - start) * 1000
        line = f"{ep.method} {ep.path} -> {outcome} in {took:.1f} ms"
        log.debug("%s", ctx.secrets.redact(line))


def call(
    ep: Endpoint[T],
    *,
    timeouts: Timeouts,
    retry: RetryPolicy,
    ctx: CallContext,
    deadline: float | None = None,
) -> Operation[T]:
    """One route call: each try bounded by `timeouts`, all of them by `deadline`; resent only where safe."""
    attempt = 0
    replaced_stale = False
    while True:
        start = time.monotonic()
        own = None if timeouts.total is None else start + timeouts.total
        try:
            response: ResponseLike = yield Transmit(ep, timeouts.connect, _earliest(own, deadline))
        except TransportError as exc:
            _log_exchange(ep, ctx, start, f"failed ({exc.reason})")
            if (
                isinstance(exc, ConnectionDropped)
                and not exc.answered
                and ep.idempotent
                and not replaced_stale
            ):
                # A kept-alive connection the server had closed: safe to resend once, on a new one.
                replaced_stale = True
                log.debug("%s %s: %s; resending on a new connection", ep.method, ep.path, exc.reason)
                continue
            cut = deadline is not None and (own is None or deadline < own)
            error: DevClientError = _transport_error(
                exc, ep, ctx, _bounds(attempt + 1, timeouts, deadline, cut)
            )
            # A certificate failure is met again on every try.
            may_retry = (ep.idempotent or not exc.sent) and not isinstance(exc, TLSFailure)
        else:
            status = response.status_code
            _log_exchange(ep, ctx, start, str(status))
            if 200 <= status < 300 or status in ep.ok_statuses:
                return _parse(ep, response, ctx)
            error = _status_error(response, ep, ctx)
            if isinstance(error, DevModeDisabledError):
                served = yield from dev_routes_served(timeouts=timeouts, deadline=deadline, ctx=ctx)
                error = _status_error(response, ep, ctx, served)
            may_retry = ep.idempotent and status in ep.retry_statuses
        if not may_retry or attempt >= retry.max_retries:
            raise error
        pause = retry.delay(attempt)
        if deadline is not None and time.monotonic() + pause >= deadline:
            raise error
        log.debug("retrying %s %s in %.2fs after: %s", ep.method, ep.path, pause, error)
        yield Sleep(pause)
        attempt += 1


class ModelCache:
    """The served model's name, looked up once from /v1/models for engine stepping and completions."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model


def served_model(
    cache: ModelCache, *, timeouts: Timeouts, retry: RetryPolicy, ctx: CallContext
) -> Operation[str]:
    """The served model: given at construction, else the first one /v1/models lists (looked up once)."""
    if cache.model is None:
        try:
            listing = yield from call(route("models"), timeouts=timeouts, retry=retry, ctx=ctx)
        except APIConnectionError as exc:  # a timeout too: say why a completion met /v1/models
            exc.args = (f"{exc}, looking up the model for POST /v1/completions (model= skips it)",)
            raise
        if not listing.data:
            raise DevClientError("the server lists no model on /v1/models: pass model= to the client")
        cache.model = listing.data[0].id
    return cache.model


def completion(
    cache: ModelCache,
    prompt: str | Sequence[int],
    *,
    model: str | None,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    stop: Sequence[str] | None,
    timeouts: Timeouts,
    retry: RetryPolicy,
    ctx: CallContext,
) -> Operation[Completion]:
    name = (
        model
        if model is not None
        else (yield from served_model(cache, timeouts=timeouts, retry=retry, ctx=ctx))
    )
    ep = endpoints.completion(
        name, prompt, max_tokens=max_tokens, temperature=temperature, seed=seed, stop=stop
    )
    done: Completion = yield from call(ep, timeouts=timeouts, retry=retry, ctx=ctx)
    return done


def step_engine(
    cache: ModelCache, *, timeouts: Timeouts, retry: RetryPolicy, ctx: CallContext
) -> Operation[str]:
    """A 1-token greedy completion: makes the engine run one step (and so release finished blocks)."""
    done = yield from completion(
        cache, "0", model=None, max_tokens=1, temperature=0, seed=None, stop=None,
        timeouts=timeouts, retry=retry, ctx=ctx,
    )  # fmt: skip
    return done.text


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


def _try_timeouts(request_timeout: float, end: float) -> Timeouts:
    per_try = min(request_timeout, max(MIN_TRY_SECONDS, end - time.monotonic()))
    return Timeouts(connect=per_try, total=per_try)


def _not_yet(exc: DevClientError) -> bool:
    """A barrier try that failed in a way the next try may not: counted as 'not yet'."""
    if isinstance(exc, APIConnectionError):
        return not isinstance(exc, TLSError)
    return (
        isinstance(exc, APIStatusError)
        and not isinstance(exc, EngineCallError)
        and exc.status_code in GATEWAY_STATUSES
    )


def reset_prefix_cache_until_success(
    cache: ModelCache,
    *,
    deadline: float,
    reset_external: bool,
    reset_running_requests: bool,
    step: bool,
    poll: Backoff,
    request_timeout: float,
    ctx: CallContext,
    on_attempt: Callable[[int, object], None] | None = None,
) -> Operation[BarrierResult]:
    """The offload barrier: reset until success, stepping the engine between tries, until the deadline.

    Each try is one request (the barrier is its own retry loop: `attempts` counts what the server got). A try
    that times out, cannot connect or meets a gateway error counts as "not yet"; other errors end the barrier.
    """
    check.seconds(deadline, "deadline")
    check.seconds(request_timeout, "request_timeout")
    check.flag(step, "step_engine")
    ep: Endpoint[ResetPrefixCacheResult] = route(
        "reset_prefix_cache", reset_running_requests=reset_running_requests, reset_external=reset_external
    )
    start = time.monotonic()
    end = start + deadline
    attempts = steps = reached = refused = 0
    last: object = None
    intervals = poll.intervals()
    while True:
        try:
            last = yield from call(ep, timeouts=_try_timeouts(request_timeout, end), retry=NO_RETRY, ctx=ctx)
        except DevClientError as exc:
            if not _not_yet(exc):
                raise
            last = exc
        attempts += 1
        if not isinstance(last, APIConnectionError) or last.sent:
            reached += 1  # an answer came, or the request left: the server got this reset
        if on_attempt is not None:
            on_attempt(attempts, last)
        if isinstance(last, ResetPrefixCacheResult):
            if last.success is None:
                raise BarrierUnsupportedError(
                    "the server answers /reset_prefix_cache with a bare 200, so the barrier cannot know "
                    "whether the prefix cache was reset; upgrade vLLM (>= 0.26) or reset without the barrier"
                )
            if last.success:
                return BarrierResult(
                    attempts=attempts, engine_steps=steps, elapsed_s=time.monotonic() - start
                )
            refused += 1
        if time.monotonic() >= end:
            break
        if step and end - time.monotonic() >= MIN_TRY_SECONDS:
            try:
                yield from step_engine(
                    cache, timeouts=_try_timeouts(request_timeout, end), retry=NO_RETRY, ctx=ctx
                )
                steps += 1
            except DevClientError as exc:
                if not _not_yet(exc):
                    raise
        # The last try falls on the deadline: a reset that succeeds then still counts.
        wait = min(next(intervals), end - time.monotonic())
        if wait > 0:
            yield Sleep(wait)
    elapsed = time.monotonic() - start
    said = f"success={last.success}" if isinstance(last, ResetPrefixCacheResult) else clip(f"{last}", 300)
    counts = (
        f"{attempts} {'try' if attempts == 1 else 'tries'} (timeout {request_timeout:g} s per try), "
        f"{reached} reached the server, {refused} refused by the engine, {steps} engine steps"
    )
    fields: dict[str, Any] = {"waited_s": elapsed, "attempts": attempts, "engine_steps": steps, "last": last}
    if reached == 0:
        raise BarrierUnreachableError(
            ctx.secrets.redact(
                f"{ctx.base_url} is unreachable: reset_prefix_cache never reached the server within the "
                f"deadline of {deadline:g} s: {counts}; last error: {said}. Check the URL and that the "
                "server is running"
            ),
            reached=reached,
            refused=refused,
            **fields,
        )
    cause = (
        f"Blocks are still held (running requests or in-flight offload stores); raise {ctx.hint('deadline')} "
        f"or pass {ctx.hint('reset_running_requests', True)}"
        if refused
        else (
            f"The server did not answer in time; raise {ctx.hint('request_timeout')} or "
            f"{ctx.hint('deadline')}"
        )
    )
    raise BarrierTimeoutError(
        ctx.secrets.redact(
            f"reset_prefix_cache did not succeed within the deadline of {deadline:g} s: {counts}; last "
            f"answer: {said}. {cause}"
        ),
        reached=reached,
        refused=refused,
        **fields,
    )


def wait_until(
    probe: Endpoint[T],
    done: Callable[[T], bool],
    *,
    what: str,
    deadline: float,
    poll: Backoff,
    request_timeout: float,
    ctx: CallContext,
    tolerate: Callable[[DevClientError], bool],
) -> Operation[T]:
    """Poll `probe` until `done(answer)` or the deadline; errors for which `tolerate` is true: 'not yet'."""
    check.seconds(deadline, "deadline")
    check.seconds(request_timeout, "request_timeout")
    start = time.monotonic()
    end = start + deadline
    last: object = None
    tries = 0
    for interval in poll.intervals():
        tries += 1
        try:
            answer = yield from call(
                probe, timeouts=_try_timeouts(request_timeout, end), retry=NO_RETRY, ctx=ctx
            )
        except DevClientError as exc:
            if isinstance(exc, TLSError) or not tolerate(exc):
                raise
            last = exc
        else:
            if done(answer):
                return answer
            last = answer
        remaining = end - time.monotonic()
        if remaining <= 0:
            break
        yield Sleep(min(interval, remaining))
    counts = f"{tries} {'try' if tries == 1 else 'tries'}, timeout {request_timeout:g} s per try"
    raise WaitTimeoutError(
        ctx.secrets.redact(
            f"{what} not reached within the deadline of {deadline:g} s "
            f"({counts}; last: {clip(repr(last), 300)})"
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


def wait_until_ready(
    *, deadline: float, poll: Backoff, request_timeout: float, ctx: CallContext
) -> Operation[bool]:
    health: Endpoint[bool] = route("health")
    result = yield from wait_until(
        health,
        bool,
        what="/health answering 200",
        deadline=deadline,
        poll=poll,
        request_timeout=request_timeout,
        ctx=ctx,
        tolerate=_ready_tolerates,
    )
    return result


def wait_for_flag(
    probe: Endpoint[bool],
    wanted: bool,
    *,
    what: str,
    deadline: float,
    poll: Backoff,
    request_timeout: float,
    ctx: CallContext,
) -> Operation[None]:
    yield from wait_until(
        probe,
        lambda v: v is wanted,
        what=what,
        deadline=deadline,
        poll=poll,
        request_timeout=request_timeout,
        ctx=ctx,
        tolerate=lambda exc: isinstance(exc, APIConnectionError),
    )


__all__ = [
    "NO_RETRY",
    "Backoff",
    "CallContext",
    "ModelCache",
    "RetryPolicy",
    "Sleep",
    "Transmit",
    "call",
    "completion",
    "dev_routes_served",
    "reset_prefix_cache_until_success",
    "served_model",
    "step_engine",
    "wait_for_flag",
    "wait_until",
    "wait_until_ready",
]
