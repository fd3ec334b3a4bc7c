"""What a failed exchange becomes: the typed error of a transport failure, of an error answer (after a dev
route's 404, with the probe that tells a disabled dev mode from a release that lacks the route), and of an
answer of the wrong shape; built here alone, with secrets masked."""

from __future__ import annotations

import time
from typing import Any, TypeVar

from .. import endpoints
from ..answers import ShapeError
from ..arguments import Timeouts
from ..constants import DEV_ROUTES_PROBE_TIMEOUT
from ..endpoints import Endpoint
from ..errors import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    BodyCutOffError,
    ResponseValidationError,
    RouteNotServedError,
    TLSError,
    error_from_response,
)
from ..responses import ResponseLike
from ..transports.base import BodyCutOff, TransportError, TransportTimeout
from ..transports.tls import TLSFailure
from .bounds import Bound, earliest
from .context import CallContext
from .effects import Operation, Transmit, log_exchange

T = TypeVar("T")


def transport_error(
    exc: TransportError, ep: Endpoint[Any], ctx: CallContext, bounds: str = ""
) -> APIConnectionError:
    """The error of an exchange that got no answer; a timeout's message says `bounds`, what bounded it."""
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


def status_error(
    response: ResponseLike, ep: Endpoint[Any], ctx: CallContext, dev_routes_served: bool | None = None
) -> APIStatusError:
    """The error of an error answer (`dev_routes_served`: what the probe after a dev route's 404 said)."""
    error = error_from_response(
        response,
        method=ep.method,
        path=ep.path,
        dev_route=ep.dev_route,
        secrets=ctx.secrets,
        frontend=ctx.frontend,
        dev_routes_served=dev_routes_served,
    )
    if response.status_code == 404 and ctx.prefix and not isinstance(error, RouteNotServedError):
        # vLLM serves every route at the root: a path in the base URL is the likelier cause.
        error.message += (
            f"; the base URL has the path {ctx.prefix!r} and vLLM serves its routes at the root: drop the "
            "path from the URL, unless a proxy there forwards to the server"
        )
    return error


def dev_routes_served(*, timeouts: Timeouts, bound: Bound | None, ctx: CallContext) -> Operation[bool | None]:
    """After a dev route's 404: does the server serve dev routes at all? One request (`dev_routes_probe`):
    404 says dev mode is off, 405 (or a 2xx) that it is on, so the release lacks the route. None for any
    other answer or none (a proxy's error, a timeout): nothing then tells the two apart."""
    probe = endpoints.dev_routes_probe()
    start = time.monotonic()
    limit = min(DEV_ROUTES_PROBE_TIMEOUT, *(t for t in (timeouts.total, timeouts.connect) if t is not None))
    try:
        end = earliest(start + limit, None if bound is None else bound.end)
        response: ResponseLike = yield Transmit(probe, limit, end)
    except TransportError as exc:
        log_exchange(probe, ctx, start, f"failed ({exc.reason})")
        return None
    log_exchange(probe, ctx, start, str(response.status_code))
    status = response.status_code
    return False if status == 404 else True if status == 405 or 200 <= status < 300 else None


def parse(ep: Endpoint[T], response: ResponseLike, ctx: CallContext) -> T:
    """The route's typed answer; one of the wrong shape is a `ResponseValidationError`."""
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
