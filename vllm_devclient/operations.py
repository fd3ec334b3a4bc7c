"""The client's behaviour, written once for both the sync and the async client.

An operation is a generator that yields effects (`Transmit` one HTTP exchange, `Sleep`) and gets their
outcome back; `DevClient` runs effects with httpx.Client and time.sleep, `AsyncDevClient` with
httpx.AsyncClient and asyncio.sleep. Retries, the offload barrier, the waits and engine stepping live here,
so the two clients cannot drift apart.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

from . import endpoints
from .endpoints import Endpoint
from .errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    BarrierTimeoutError,
    BarrierUnsupportedError,
    DevClientError,
    InvalidParameterError,
    WaitTimeoutError,
    error_from_response,
)
from .models import BarrierResult, Completion, ResetPrefixCacheResult

T = TypeVar("T")
log = logging.getLogger("vllm_devclient")

Timeout = float | httpx.Timeout | None


@dataclass(frozen=True)
class Transmit:
    """Send one request and hand back the httpx.Response (body read), or throw the httpx error in."""

    endpoint: Endpoint[Any]
    timeout: Timeout


@dataclass(frozen=True)
class Sleep:
    seconds: float


Effect = Transmit | Sleep
Operation = Generator[Effect, Any, T]


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 2
    initial_delay: float = 0.25
    max_delay: float = 4.0

    def delay(self, retry: int) -> float:
        # Exponential backoff with full jitter, so many clients do not retry in lockstep.
        return random.uniform(0, min(self.max_delay, self.initial_delay * 2**retry))


class StaleConnection(Exception):
    """A pooled connection the server had already dropped; the request on it was never processed.

    The Python frontend closes the keep-alive connection after answering an engine-error 500, so the next
    request on that connection is reset. The drivers report such a failure as this, and `call` resends once.
    """

    def __init__(self, cause: httpx.TransportError) -> None:
        super().__init__(str(cause))
        self.cause = cause


# The request never left the machine: safe to resend on any route.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def _connection_error(exc: httpx.HTTPError, ep: Endpoint[Any]) -> APIConnectionError:
    url = str(exc.request.url) if _has_request(exc) else ep.path
    if isinstance(exc, httpx.TimeoutException):
        return APITimeoutError(
            f"{ep.method} {ep.path} timed out ({type(exc).__name__})", method=ep.method, url=url
        )
    return APIConnectionError(
        f"{ep.method} {ep.path} failed: {exc or type(exc).__name__}", method=ep.method, url=url
    )


def _has_request(exc: httpx.HTTPError) -> bool:
    try:
        exc.request  # noqa: B018 - raises RuntimeError when unset
    except RuntimeError:
        return False
    return True


def call(ep: Endpoint[T], *, timeout: Timeout, retry: RetryPolicy) -> Operation[T]:
    """One route call with retries where repeating is safe."""
    attempt = 0
    resent_stale = False
    while True:
        cause: BaseException | None = None
        try:
            response: httpx.Response = yield Transmit(ep, timeout)
        except StaleConnection as stale:
            if not resent_stale:
                resent_stale = True
                log.debug("resending %s %s on a fresh connection: %s", ep.method, ep.path, stale)
                continue
            error: DevClientError = _connection_error(stale.cause, ep)
            cause = stale.cause
            may_retry = ep.idempotent
        except httpx.HTTPError as exc:
            error = _connection_error(exc, ep)
            cause = exc
            may_retry = ep.idempotent or isinstance(exc, _NOT_SENT)
        else:
            if (
                response.status_code not in ep.retry_statuses
                or not ep.idempotent
                or attempt >= retry.max_retries
            ):
                return ep.parse(response, ep)
            error = error_from_response(response, path=ep.path, dev_route=ep.dev_route)
            may_retry = True
        if not may_retry or attempt >= retry.max_retries:
            raise error from cause
        pause = retry.delay(attempt)
        log.debug("retrying %s %s in %.2fs after: %s", ep.method, ep.path, pause, error)
        yield Sleep(pause)
        attempt += 1


class ModelCache:
    """The served model's name, looked up once from /v1/models for engine stepping."""

    def __init__(self, model: str | None = None) -> None:
        self.model = model


def served_model(cache: ModelCache, *, timeout: Timeout, retry: RetryPolicy) -> Operation[str]:
    """The served model: given at construction, else the first one /v1/models lists (looked up once)."""
    if cache.model is None:
        listing = yield from call(endpoints.models(), timeout=timeout, retry=retry)
        if not listing.data:
            raise DevClientError("the server lists no model on /v1/models: pass model= to the client")
        cache.model = listing.data[0].id
    return cache.model


def completion(
    cache: ModelCache,
    prompt: str,
    *,
    model: str | None,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    stop: Sequence[str] | None,
    timeout: Timeout,
    retry: RetryPolicy,
) -> Operation[Completion]:
    name = model if model is not None else (yield from served_model(cache, timeout=timeout, retry=retry))
    ep = endpoints.completion(name, prompt, max_tokens, temperature=temperature, seed=seed, stop=stop)
    done: Completion = yield from call(ep, timeout=timeout, retry=retry)
    return done


def step_engine(cache: ModelCache, *, timeout: Timeout, retry: RetryPolicy) -> Operation[str]:
    """A 1-token greedy completion: makes the engine run one step (and so release finished blocks)."""
    model = yield from served_model(cache, timeout=timeout, retry=retry)
    done = yield from call(endpoints.completion(model, "0", 1), timeout=timeout, retry=retry)
    return done.text


@dataclass(frozen=True)
class Backoff:
    """Poll interval: fast at first (the answer often flips within milliseconds), then backing off."""

    initial: float = 0.02
    maximum: float = 1.0
    factor: float = 2.0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.maximum < self.initial or self.factor < 1:
            raise InvalidParameterError(
                f"poll interval needs 0 < initial <= maximum and factor >= 1, got {self.initial}, "
                f"{self.maximum}, {self.factor}"
            )

    def intervals(self) -> Generator[float, None, None]:
        value = self.initial
        while True:
            yield value
            value = min(self.maximum, value * self.factor)


def _check_deadline(timeout: float) -> None:
    if not timeout > 0:
        raise InvalidParameterError(f"timeout must be a positive number of seconds, got {timeout!r}")


# A try started just before the deadline still gets this long, so that it can be answered at all.
_MIN_TRY = 0.25


def _try_timeout(per_try: float, deadline: float) -> float:
    return min(per_try, max(_MIN_TRY, deadline - time.monotonic()))


def reset_prefix_cache_until_success(
    cache: ModelCache,
    *,
    timeout: float,
    reset_external: bool,
    reset_running_requests: bool,
    step: bool,
    poll: Backoff,
    request_timeout: float,
    retry: RetryPolicy,
) -> Operation[BarrierResult]:
    """The offload barrier: reset until success, stepping the engine between tries, until the deadline."""
    _check_deadline(timeout)
    start = time.monotonic()
    deadline = start + timeout
    attempts = steps = 0
    last: ResetPrefixCacheResult | APITimeoutError | None = None
    intervals = poll.intervals()
    ep = endpoints.reset_prefix_cache(reset_running_requests, reset_external)
    while True:
        # A try that times out (busy or hung engine) counts as "not yet": only the deadline ends the barrier.
        try:
            last = yield from call(ep, timeout=_try_timeout(request_timeout, deadline), retry=retry)
        except APITimeoutError as exc:
            last = exc
        attempts += 1
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
        if time.monotonic() >= deadline:
            break
        if step:
            try:
                yield from step_engine(cache, timeout=_try_timeout(request_timeout, deadline), retry=retry)
                steps += 1
            except APITimeoutError as exc:
                last = exc
        wait = min(next(intervals), deadline - time.monotonic())
        if wait > 0:
            yield Sleep(wait)
    elapsed = time.monotonic() - start
    said = f"success={last.success}" if isinstance(last, ResetPrefixCacheResult) else f"{last}"
    raise BarrierTimeoutError(
        f"reset_prefix_cache did not succeed within {timeout:.1f}s: {attempts} attempts, "
        f"{steps} engine steps, "
        f"last answer {said}. Blocks are still held (running requests or in-flight offload stores); "
        "raise the timeout or pass reset_running_requests=True",
        waited_s=elapsed,
        attempts=attempts,
        engine_steps=steps,
        last=last,
    )


def wait_until(
    probe: Endpoint[T],
    done: Callable[[T], bool],
    *,
    what: str,
    timeout: float,
    poll: Backoff,
    request_timeout: float,
    tolerate: tuple[type[DevClientError], ...] = (),
) -> Operation[T]:
    """Poll `probe` until `done(answer)` or the deadline; errors in `tolerate` count as 'not yet'."""
    _check_deadline(timeout)
    start = time.monotonic()
    deadline = start + timeout
    no_retry = RetryPolicy(max_retries=0)
    last: object = None
    for interval in poll.intervals():
        try:
            answer = yield from call(probe, timeout=_try_timeout(request_timeout, deadline), retry=no_retry)
        except tolerate as exc:
            last = exc
        else:
            if done(answer):
                return answer
            last = answer
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        yield Sleep(min(interval, remaining))
    raise WaitTimeoutError(
        f"{what} not reached within {timeout:.1f}s (last: {last!r})",
        waited_s=time.monotonic() - start,
        last=last,
    )


def wait_until_ready(*, timeout: float, poll: Backoff, request_timeout: float) -> Operation[bool]:
    # A Rust frontend accepts TCP before its engine registers and then answers nothing: short tries.
    result = yield from wait_until(
        endpoints.health(),
        bool,
        what="/health answering 200",
        timeout=timeout,
        poll=poll,
        request_timeout=request_timeout,
        tolerate=(APIConnectionError, APIStatusError),
    )
    return result


def wait_for_flag(
    probe: Endpoint[bool], wanted: bool, *, what: str, timeout: float, poll: Backoff, request_timeout: float
) -> Operation[None]:
    yield from wait_until(
        probe,
        lambda v: v is wanted,
        what=what,
        timeout=timeout,
        poll=poll,
        request_timeout=request_timeout,
        tolerate=(APIConnectionError,),
    )


__all__ = [
    "Backoff",
    "ModelCache",
    "RetryPolicy",
    "Sleep",
    "StaleConnection",
    "Transmit",
    "call",
    "reset_prefix_cache_until_success",
    "step_engine",
    "wait_for_flag",
    "wait_until",
    "wait_until_ready",
]
