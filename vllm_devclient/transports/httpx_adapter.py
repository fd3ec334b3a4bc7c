"""A user's own httpx or httpx2 client as the transport (`http_client=`, `transport="httpx"`/`"httpx2"`).

httpx and httpx2 (pydantic's fork) share one API, so one adapter serves both: it is given the client and
the module it belongs to (`stacks.stack_of`), and uses that module's request, timeout and exception
classes. The answer is that client's own response (an `httpx.Response` or an `httpx2.Response`), body read,
and becomes `RawResponse.http_response` as it is.

What httpx allows: the async exchange runs under `asyncio.wait_for`, so the deadline bounds it as a whole;
the sync one reads the body through a stream that stops at the deadline between chunks, while the status
line and headers are bounded per socket read by httpx itself (an httpx limit: use the default transport for
a whole-call bound there). httpx cannot be told to open a fresh connection for one request, so a request
that is not safe to repeat may meet a pooled connection the server had closed: it then fails and is never
resent.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..responses import ResponseLike
from . import base
from .tls import TLSConfig, TLSFailure, handshake_failure, unanswered_note

if TYPE_CHECKING:
    from typing import TypeAlias

    import httpx
    import httpx2

    Response: TypeAlias = httpx.Response | httpx2.Response
    SyncClient: TypeAlias = httpx.Client | httpx2.Client
    AsyncClient: TypeAlias = httpx.AsyncClient | httpx2.AsyncClient

__all__ = ["AsyncHttpxTransport", "HttpxTransport", "to_httpx_request", "to_httpx_response"]


def to_httpx_request(request: base.WireRequest, stack: ModuleType | None = None) -> Any:
    """`request` as a request of `stack` (httpx or httpx2; default httpx)."""
    mod = stack or _httpx()
    return mod.Request(request.method, request.url, headers=list(request.headers), content=request.body)


def to_httpx_response(response: ResponseLike, request: base.WireRequest) -> httpx.Response:
    """A transport's whole answer as an `httpx.Response` (for the contract recorder)."""
    mod = _httpx()
    return mod.Response(  # type: ignore[no-any-return]  # the module is httpx
        response.status_code,
        headers=list(response.headers.items()),
        content=response.content,
        request=to_httpx_request(request, mod),
    )


def _httpx() -> ModuleType:
    import httpx

    return httpx


def _timeout(stack: ModuleType, connect_timeout: float | None, deadline: float | None) -> dict[str, Any]:
    """The request's `timeout` extension: per-phase limits that end by the deadline."""
    if deadline is None:
        return stack.Timeout(None, connect=connect_timeout).as_dict()  # type: ignore[no-any-return]
    left = deadline - time.monotonic()
    if left <= 0:
        raise base.TransportTimeout("no time left to send the request", sent=False)
    return stack.Timeout(left, connect=min(left, connect_timeout or left)).as_dict()  # type: ignore[no-any-return]


# What the TLS messages say about a client of the user's own (its settings are not ours to name).
_THEIRS = TLSConfig(True, None, "your http_client's settings")


@contextmanager
def _translated(
    stack: ModuleType, answered: list[bool], origin: base.Origin, tls: TLSConfig, body: bytes | None = None
) -> Iterator[None]:
    """The stack's exceptions as transport failures."""
    try:
        yield
    except (stack.ConnectTimeout, stack.PoolTimeout):
        raise base.TransportTimeout("connecting timed out", sent=False) from None
    except stack.ConnectError as exc:
        raise handshake_failure(exc, origin, tls) or base.connect_failed(origin.host_header, exc) from None
    except stack.TimeoutException:
        raise base.TransportTimeout("no complete answer in time", answered=answered[0]) from None
    except stack.RemoteProtocolError as exc:
        size = None if answered[0] else base.cut_off(body)
        if size is not None:  # httpx reads for an answer after a failed send: it cannot say which came first
            raise base.BodyCutOff(size, "no answer", during_send=False) from None
        if "without sending" in str(exc) or not answered[0]:
            note = unanswered_note(origin, tls)
            raise base.ConnectionDropped(
                "the server closed the connection without answering" + note
            ) from None
        raise base.ProtocolViolation(f"invalid HTTP answer: {exc}") from None
    except stack.LocalProtocolError:
        # httpx's message would quote the offending header value, which may be a credential.
        raise base.ProtocolViolation("the request is not valid HTTP/1.1", sent=False) from None
    except (stack.TransportError, ssl.SSLError) as exc:
        # TLS 1.3: a server that refuses our certificate says so after our handshake ended (an alert that
        # anyio lets through unwrapped, in the async client).
        refused = None if answered[0] else handshake_failure(exc, origin, tls)
        if isinstance(refused, TLSFailure):
            raise refused from None
        broke = isinstance(exc, stack.WriteError | stack.ReadError) and not answered[0]
        size = base.cut_off(body) if broke else None
        if size is not None:  # the server closed the connection before it had read the body
            sending = isinstance(exc, stack.WriteError)
            raise base.BodyCutOff(size, type(exc).__name__, during_send=sending) from None
        note = "" if answered[0] else unanswered_note(origin, tls)
        raise base.ConnectionDropped(
            f"the connection broke: {type(exc).__name__}{note}", answered=answered[0]
        ) from None


_BOUNDED: dict[str, type] = {}


def _bounded_stream(stack: ModuleType, inner: Any, deadline: float) -> Any:
    """`inner` (a response's byte stream) as one of `stack` that stops at `deadline` between chunks, so
    that the response's own `read()` fills in its body (decoded, as the stack decodes it) by the deadline."""
    cls = _BOUNDED.get(stack.__name__)
    if cls is None:

        class Bounded(stack.SyncByteStream):  # type: ignore[name-defined,misc]
            def __init__(self, inner: Any, deadline: float) -> None:
                self.inner = inner
                self.deadline = deadline

            def __iter__(self) -> Iterator[bytes]:
                for chunk in self.inner:
                    if time.monotonic() > self.deadline:
                        raise base.TransportTimeout("no complete answer in time", answered=True)
                    yield chunk

            def close(self) -> None:
                self.inner.close()

        cls = _BOUNDED[stack.__name__] = Bounded
    return cls(inner, deadline)


class HttpxTransport:
    """Sends over a sync httpx or httpx2 client (`stack`: its module); `owned`: closed with the SDK client."""

    def __init__(
        self, client: SyncClient, stack: ModuleType, *, owned: bool, tls: TLSConfig | None = None
    ) -> None:
        self.client = client
        self.stack = stack
        self._owned = owned
        self._tls = tls or _THEIRS

    def send(
        self, request: base.WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> Response:
        answered = [False]
        req = to_httpx_request(request, self.stack)
        req.extensions["timeout"] = _timeout(self.stack, connect_timeout, deadline)
        with _translated(self.stack, answered, request.origin, self._tls, request.body):
            response = self.client.send(req, stream=True)
            answered[0] = True
            try:
                if deadline is not None:
                    response.stream = _bounded_stream(self.stack, response.stream, deadline)
                response.read()
            finally:
                response.close()
        return response

    def close(self) -> None:
        if self._owned:
            self.client.close()


class AsyncHttpxTransport:
    """Sends over an async httpx or httpx2 client (`stack`: its module); `owned`: closed with the SDK
    client."""

    def __init__(
        self, client: AsyncClient, stack: ModuleType, *, owned: bool, tls: TLSConfig | None = None
    ) -> None:
        self.client = client
        self.stack = stack
        self._owned = owned
        self._tls = tls or _THEIRS

    async def send(
        self, request: base.WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> Response:
        answered = [False]
        req = to_httpx_request(request, self.stack)
        req.extensions["timeout"] = _timeout(self.stack, connect_timeout, deadline)

        async def exchange() -> Response:
            response = await self.client.send(req, stream=True)
            answered[0] = True
            try:
                await response.aread()
            finally:
                await response.aclose()
            return response

        with _translated(self.stack, answered, request.origin, self._tls, request.body):
            if deadline is None:
                return await exchange()
            try:
                return await asyncio.wait_for(exchange(), max(0.0, deadline - time.monotonic()))
            except asyncio.TimeoutError:
                raise base.TransportTimeout("no complete answer in time", answered=answered[0]) from None

    async def aclose(self) -> None:
        if self._owned:
            await self.client.aclose()
