"""The client's behaviour, written once for both the sync and the async client.

An operation is a generator that yields effects (`Transmit` one HTTP exchange, `Sleep`) and gets their
outcome back; the clients run effects with their transport and `time.sleep` / `asyncio.sleep`. Retries, the
engine stepping and the whole-call bound live here, and the barrier and the waits beside it (`polling.py`),
so the two clients cannot drift apart.

The rules every operation keeps:
- Two bounds, each with one meaning. `timeouts` bound each try as a whole. A `Bound` (the caller's
  `total_timeout`, or a wait's `deadline`) bounds the operation as a whole: it travels on the `RetryPolicy`,
  so every try, retry, pause and inner call of the operation gets only what is left of it, and no pause
  that would end past it is taken (the last error is raised instead). With no `Bound`, only the tries and
  `max_retries` bound a call.
- Resend only what is safe. A request is sent again when it provably never left (no connection), or when
  its route is idempotent: after a retryable answer or failure (up to `max_retries`), and once, not counted,
  when a kept-alive connection turned out closed before any answer came. A route that is not idempotent is
  never sent twice; its request travels on a connection of its own, so a stale pooled one cannot fail it.
- Errors are built in one place (`_status_error`, `_transport_error`, `_parse`), with secrets masked.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, TypeVar

from . import endpoints
from .answers import ShapeError
from .arguments import Timeouts
from .constants import (
    DEFAULT_MAX_RETRIES,
    DEV_ROUTES_PROBE_TIMEOUT,
    RETRY_INITIAL_DELAY,
    RETRY_MAX_DELAY,
)
from .endpoints import Endpoint
from .errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    BodyCutOffError,
    DevClientError,
    DevModeDisabledError,
    Frontend,
    ResponseValidationError,
    RouteNotServedError,
    TLSError,
    error_from_response,
)
from .models import Completion
from .redaction import NO_SECRETS, Secrets
from .responses import ResponseLike
from .routes import endpoint as route
from .transports.base import BodyCutOff, ConnectionDropped, TransportError, TransportTimeout
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
            # A wait's request_timeout is the global --timeout there (the commands have no option of it).
            return "--timeout" if name == "request_timeout" else "--" + name.replace("_", "-")
        return f"{name}={value!r}" if value is not None else f"{name}="


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
        return f"the {self.name} of {_seconds(self.seconds)}"


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


def _earliest(a: float | None, b: float | None) -> float | None:
    if a is None:
        return b
    return a if b is None or a < b else b


def _seconds(value: float) -> str:
    return f"{value:g} s"


def per_try(timeout: float | None) -> str:
    return "no timeout per try" if timeout is None else f"timeout {_seconds(timeout)} per try"


def _bounds(tries: int, timeouts: Timeouts, bound: Bound | None, cut: bool) -> str:
    """What bounded a call, each bound by its own word: the tries, the timeout per try, the whole bound."""
    parts = [f"{tries} {'try' if tries == 1 else 'tries'}", per_try(timeouts.total)]
    if bound is not None:
        parts.append(f"the last try cut short by {bound}" if cut else f"within {bound}")
    return ", ".join(parts)


def _transport_error(
    exc: TransportError, ep: Endpoint[Any], ctx: CallContext, bounds: str = ""
) -> APIConnectionError:
    kind: type[APIConnectionError] = APIConnectionError
    if isinstance(exc, TLSFailure):
        kind = TLSError
    elif isinstance(exc, TransportTimeout):
        kind = APITimeoutError
    elif isinstance(exc, BodyCutOff):
        kind = BodyCutOffError
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


def dev_routes_served(*, timeouts: Timeouts, bound: Bound | None, ctx: CallContext) -> Operation[bool | None]:
    """After a dev route's 404: does the server serve dev routes at all? One request (`dev_routes_probe`):
    404 says dev mode is off, 405 (or a 2xx) that it is on, so the release lacks the route. None for any
    other answer or none (a proxy's error, a timeout): nothing then tells the two apart."""
    probe = endpoints.dev_routes_probe()
    start = time.monotonic()
    limit = min(DEV_ROUTES_PROBE_TIMEOUT, *(t for t in (timeouts.total, timeouts.connect) if t is not None))
    try:
        end = _earliest(start + limit, None if bound is None else bound.end)
        response: ResponseLike = yield Transmit(probe, limit, end)
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
    say_bounds: bool = True,
) -> Operation[T]:
    """One route call: each try bounded by `timeouts`, all of them by `retry.bound`; resent only where safe.

    `say_bounds=False` leaves the bounds out of a timeout's message, for a caller (a wait) that says its own.
    """
    attempt = 0
    replaced_stale = False
    bound = retry.bound
    while True:
        start = time.monotonic()
        own = None if timeouts.total is None else start + timeouts.total
        try:
            end = own if bound is None else _earliest(own, bound.end)
            response: ResponseLike = yield Transmit(ep, timeouts.connect, end)
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
            cut = bound is not None and (own is None or bound.end < own)
            said = _bounds(attempt + 1, timeouts, bound, cut) if say_bounds else ""
            error: DevClientError = _transport_error(exc, ep, ctx, said)
            # A certificate failure is met again on every try.
            may_retry = (ep.idempotent or not exc.sent) and not isinstance(exc, TLSFailure)
        else:
            status = response.status_code
            _log_exchange(ep, ctx, start, str(status))
            if 200 <= status < 300 or status in ep.ok_statuses:
                return _parse(ep, response, ctx)
            error = _status_error(response, ep, ctx)
            if isinstance(error, DevModeDisabledError):
                served = yield from dev_routes_served(timeouts=timeouts, bound=bound, ctx=ctx)
                error = _status_error(response, ep, ctx, served)
            may_retry = ep.idempotent and status in ep.retry_statuses
        if not may_retry or attempt >= retry.max_retries:
            raise error
        pause = retry.delay(attempt)
        if bound is not None and time.monotonic() + pause >= bound.end:
            raise error  # a try after the pause would have no time left: the last error is the answer
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
    cache_salt: str | None = None,
) -> Operation[Completion]:
    name = (
        model
        if model is not None
        else (yield from served_model(cache, timeouts=timeouts, retry=retry, ctx=ctx))
    )
    ep = endpoints.completion(
        name, prompt, max_tokens=max_tokens, temperature=temperature, seed=seed, stop=stop,
        cache_salt=cache_salt,
    )  # fmt: skip
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


__all__ = [
    "NO_RETRY",
    "Bound",
    "CallContext",
    "ModelCache",
    "RetryPolicy",
    "Sleep",
    "Transmit",
    "call",
    "completion",
    "dev_routes_served",
    "per_try",
    "served_model",
    "step_engine",
]
