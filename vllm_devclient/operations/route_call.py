"""One route call (`call`): its tries, each bounded by the timeouts, all by the whole-call bound; resent only
where it is safe."""

from __future__ import annotations

import time
from typing import TypeVar

from ..arguments import Timeouts
from ..endpoints import Endpoint
from ..errors import DevClientError, DevModeDisabledError
from ..responses import ResponseLike
from ..transports.base import ConnectionDropped, TransportError
from ..transports.tls import TLSFailure
from .bounds import RetryPolicy, earliest, said_bounds
from .context import CallContext
from .effects import Operation, Sleep, Transmit, log, log_exchange
from .failures import dev_routes_served, parse, status_error, transport_error

T = TypeVar("T")


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
            end = own if bound is None else earliest(own, bound.end)
            response: ResponseLike = yield Transmit(ep, timeouts.connect, end)
        except TransportError as exc:
            log_exchange(ep, ctx, start, f"failed ({exc.reason})")
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
            said = said_bounds(attempt + 1, timeouts, bound, cut) if say_bounds else ""
            error: DevClientError = transport_error(exc, ep, ctx, said)
            # A certificate failure is met again on every try.
            may_retry = (ep.idempotent or not exc.sent) and not isinstance(exc, TLSFailure)
        else:
            status = response.status_code
            log_exchange(ep, ctx, start, str(status))
            if 200 <= status < 300 or status in ep.ok_statuses:
                return parse(ep, response, ctx)
            error = status_error(response, ep, ctx)
            if isinstance(error, DevModeDisabledError):
                served = yield from dev_routes_served(timeouts=timeouts, bound=bound, ctx=ctx)
                error = status_error(response, ep, ctx, served)
            may_retry = ep.idempotent and status in ep.retry_statuses
        if not may_retry or attempt >= retry.max_retries:
            raise error
        pause = retry.delay(attempt)
        if bound is not None and time.monotonic() + pause >= bound.end:
            raise error  # a try after the pause would have no time left: the last error is the answer
        log.debug("retrying %s %s in %.2fs after: %s", ep.method, ep.path, pause, error)
        yield Sleep(pause)
        attempt += 1
