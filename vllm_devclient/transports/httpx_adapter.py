"""A user's own `httpx.Client` or `httpx.AsyncClient` as the transport (`http_client=`, `transport="httpx"`).

What httpx allows: the async exchange runs under `asyncio.wait_for`, so the deadline bounds it as a whole;
the sync one streams the body and stops at the deadline between chunks, while the status line and headers
are bounded per socket read by httpx itself (an httpx limit: use the default transport for a whole-call
bound there). httpx cannot be told to open a fresh connection for one request, so a request that is not
safe to repeat may meet a pooled connection the server had closed: it then fails and is never resent.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from . import base
from .tls import TLSConfig, TLSFailure, handshake_failure, unanswered_note

__all__ = ["AsyncHttpxTransport", "HttpxTransport", "to_httpx_request", "to_httpx_response"]


def to_httpx_request(request: base.WireRequest) -> httpx.Request:
    return httpx.Request(request.method, request.url, headers=list(request.headers), content=request.body)


def to_httpx_response(response: base.WireResponse, request: base.WireRequest) -> httpx.Response:
    return httpx.Response(
        response.status_code,
        headers=list(response.headers.items()),
        content=response.content,
        request=to_httpx_request(request),
    )


def _timeout(connect_timeout: float | None, deadline: float | None) -> httpx.Timeout:
    if deadline is None:
        return httpx.Timeout(None, connect=connect_timeout)
    left = deadline - time.monotonic()
    if left <= 0:
        raise base.TransportTimeout("no time left to send the request", sent=False)
    return httpx.Timeout(left, connect=min(left, connect_timeout or left))


# What the TLS messages say about a client of the user's own (its settings are not ours to name).
_THEIRS = TLSConfig(True, None, "your http_client's settings")


@contextmanager
def _translated(
    answered: list[bool], origin: base.Origin, tls: TLSConfig, body: bytes | None = None
) -> Iterator[None]:
    """httpx's exceptions as transport failures."""
    try:
        yield
    except (httpx.ConnectTimeout, httpx.PoolTimeout):
        raise base.TransportTimeout("connecting timed out", sent=False) from None
    except httpx.ConnectError as exc:
        raise handshake_failure(exc, origin, tls) or base.connect_failed(origin.host_header, exc) from None
    except httpx.TimeoutException:
        raise base.TransportTimeout("no complete answer in time", answered=answered[0]) from None
    except httpx.RemoteProtocolError as exc:
        size = None if answered[0] else base.cut_off(body)
        if size is not None:  # httpx reads for an answer after a failed send: it cannot say which came first
            raise base.BodyCutOff(size, "no answer", during_send=False) from None
        if "without sending" in str(exc) or not answered[0]:
            note = unanswered_note(origin, tls)
            raise base.ConnectionDropped(
                "the server closed the connection without answering" + note
            ) from None
        raise base.ProtocolViolation(f"invalid HTTP answer: {exc}") from None
    except httpx.LocalProtocolError:
        # httpx's message would quote the offending header value, which may be a credential.
        raise base.ProtocolViolation("the request is not valid HTTP/1.1", sent=False) from None
    except (httpx.TransportError, ssl.SSLError) as exc:
        # TLS 1.3: a server that refuses our certificate says so after our handshake ended (an alert that
        # anyio lets through unwrapped, in the async client).
        refused = None if answered[0] else handshake_failure(exc, origin, tls)
        if isinstance(refused, TLSFailure):
            raise refused from None
        broke = isinstance(exc, httpx.WriteError | httpx.ReadError) and not answered[0]
        size = base.cut_off(body) if broke else None
        if size is not None:  # the server closed the connection before it had read the body
            sending = isinstance(exc, httpx.WriteError)
            raise base.BodyCutOff(size, type(exc).__name__, during_send=sending) from None
        note = "" if answered[0] else unanswered_note(origin, tls)
        raise base.ConnectionDropped(
            f"the connection broke: {type(exc).__name__}{note}", answered=answered[0]
        ) from None


class HttpxTransport:
    def __init__(self, client: httpx.Client, *, owned: bool, tls: TLSConfig | None = None) -> None:
        self.client = client
        self._owned = owned
        self._tls = tls or _THEIRS

    def send(
        self, request: base.WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> base.WireResponse:
        answered = [False]
        req = to_httpx_request(request)
        req.extensions["timeout"] = _timeout(connect_timeout, deadline).as_dict()
        with _translated(answered, request.origin, self._tls, request.body):
            response = self.client.send(req, stream=True)
            answered[0] = True
            try:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if deadline is not None and time.monotonic() > deadline:
                        raise base.TransportTimeout("no complete answer in time", answered=True)
            finally:
                response.close()
        return base.WireResponse(response.status_code, _headers(response), b"".join(chunks))

    def close(self) -> None:
        if self._owned:
            self.client.close()


class AsyncHttpxTransport:
    def __init__(self, client: httpx.AsyncClient, *, owned: bool, tls: TLSConfig | None = None) -> None:
        self.client = client
        self._owned = owned
        self._tls = tls or _THEIRS

    async def send(
        self, request: base.WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> base.WireResponse:
        answered = [False]
        req = to_httpx_request(request)
        timeout = _timeout(connect_timeout, deadline)
        req.extensions["timeout"] = timeout.as_dict()

        async def exchange() -> base.WireResponse:
            response = await self.client.send(req, stream=True)
            answered[0] = True
            try:
                body = await response.aread()
            finally:
                await response.aclose()
            return base.WireResponse(response.status_code, _headers(response), body)

        with _translated(answered, request.origin, self._tls, request.body):
            if deadline is None:
                return await exchange()
            try:
                return await asyncio.wait_for(exchange(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise base.TransportTimeout("no complete answer in time", answered=answered[0]) from None

    async def aclose(self) -> None:
        if self._owned:
            await self.client.aclose()


def _headers(response: httpx.Response) -> dict[str, str]:
    return base.fold_headers(response.headers.multi_items())
