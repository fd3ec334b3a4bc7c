"""The recording transport: every HTTP exchange a scenario's client makes, as JSON-ready data.

One class serves both httpx bases (a sync and an async client): it wraps the transport that really sends
(a `MockTransport` on replay) and logs each exchange, bodies read, also those that fail (a timeout is logged
with its error's name). Against a live server the client keeps its own default transport (the one users
get) and `record_wire` puts the same recorder under it, so the contract runs prove that transport.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from ...responses import ResponseLike
from ...transports import (
    AsyncTransport,
    ConnectFailed,
    SyncTransport,
    TransportError,
    TransportTimeout,
    WireRequest,
)
from ...transports.httpx_adapter import to_httpx_request, to_httpx_response
from .outcome import body_data

__all__ = [
    "HEADERS_THAT_MATTER",
    "Exchange",
    "RecordingAsyncTransport",
    "RecordingTransport",
    "record_wire",
    "request_data",
    "response_data",
]

# Headers whose value the SDK reads (server: which frontend answered; allow: 405 hint).
HEADERS_THAT_MATTER = ("allow", "content-type", "server", "www-authenticate")


@dataclass
class Exchange:
    """One HTTP request and its response (or the transport error that ended it), as JSON-ready data."""

    request: dict[str, Any]
    response: dict[str, Any] | None
    error: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request}
        if self.error is not None:
            out["error"] = self.error
        else:
            out["response"] = self.response
        return out


def request_data(request: httpx.Request) -> dict[str, Any]:
    """What a fixture keeps of a request: method, path, query, whether a key was sent, body."""
    content = request.content if hasattr(request, "_content") else b""
    out: dict[str, Any] = {
        "method": request.method,
        "path": request.url.path,
        "query": [[k, v] for k, v in request.url.params.multi_items()],
        "auth": "authorization" in request.headers,
    }
    if content:
        out.update(body_data(content, request.headers.get("content-type", "")))
    return out


def response_data(response: httpx.Response) -> dict[str, Any]:
    """What a fixture keeps of a response: status, the headers the SDK reads, body."""
    headers = {k: response.headers[k] for k in HEADERS_THAT_MATTER if k in response.headers}
    out: dict[str, Any] = {"status": response.status_code, "headers": headers}
    out.update(body_data(response.content, response.headers.get("content-type", "")))
    return out


Inner = httpx.BaseTransport | httpx.AsyncBaseTransport


class RecordingTransport(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Wraps a transport (sync or async) and logs every exchange in `exchanges`.

    Give it to an `httpx.Client` or an `httpx.AsyncClient`: it sends through `inner`, or through a default
    httpx transport of the kind the client asks for, made on first use.
    """

    def __init__(self, inner: Inner | None = None) -> None:
        self.inner = inner
        self.exchanges: list[Exchange] = []

    @contextlib.contextmanager
    def _recording(self, request: httpx.Request) -> Iterator[list[httpx.Response]]:
        req = request_data(request)
        answered: list[httpx.Response] = []
        try:
            yield answered
        except httpx.HTTPError as exc:
            self.exchanges.append(Exchange(req, None, type(exc).__name__))
            raise
        self.exchanges.append(Exchange(req, response_data(answered[0])))

    def _inner(self, kind: type[Any], default: type[Any]) -> Any:
        if self.inner is None:
            self.inner = default()
        if not isinstance(self.inner, kind):
            raise TypeError(
                f"{type(self.inner).__name__} is not an {kind.__name__}: it cannot serve this client"
            )
        return self.inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        inner: httpx.BaseTransport = self._inner(httpx.BaseTransport, httpx.HTTPTransport)
        with self._recording(request) as answered:
            answered.append(inner.handle_request(request))
            answered[0].read()
        return answered[0]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        inner: httpx.AsyncBaseTransport = self._inner(httpx.AsyncBaseTransport, httpx.AsyncHTTPTransport)
        with self._recording(request) as answered:
            answered.append(await inner.handle_async_request(request))
            await answered[0].aread()
        return answered[0]

    def close(self) -> None:
        if isinstance(self.inner, httpx.BaseTransport):
            self.inner.close()

    async def aclose(self) -> None:
        if isinstance(self.inner, httpx.AsyncBaseTransport):
            await self.inner.aclose()


# The async twin of earlier releases: the one class now serves both bases.
RecordingAsyncTransport = RecordingTransport


def _error_name(exc: TransportError) -> str:
    """The name httpx gives the same failure, so fixtures read the same whichever transport recorded them."""
    if isinstance(exc, TransportTimeout):
        return "ConnectTimeout" if not exc.sent else "ReadTimeout"
    if isinstance(exc, ConnectFailed):
        return "ConnectError"
    return "RemoteProtocolError" if not exc.answered else "ReadError"


class _WireRecorder:
    def __init__(self, recorder: RecordingTransport) -> None:
        self.recorder = recorder

    @contextlib.contextmanager
    def _recording(self, request: WireRequest) -> Iterator[list[ResponseLike]]:
        req = request_data(to_httpx_request(request))
        answered: list[ResponseLike] = []
        try:
            yield answered
        except TransportError as exc:
            self.recorder.exchanges.append(Exchange(req, None, _error_name(exc)))
            raise
        self.recorder.exchanges.append(Exchange(req, response_data(to_httpx_response(answered[0], request))))


class _SyncWire(_WireRecorder):
    def __init__(self, inner: SyncTransport, recorder: RecordingTransport) -> None:
        super().__init__(recorder)
        self.inner = inner

    def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> ResponseLike:
        with self._recording(request) as answered:
            answered.append(self.inner.send(request, connect_timeout=connect_timeout, deadline=deadline))
        return answered[0]

    def close(self) -> None:
        self.inner.close()


class _AsyncWire(_WireRecorder):
    def __init__(self, inner: AsyncTransport, recorder: RecordingTransport) -> None:
        super().__init__(recorder)
        self.inner = inner

    async def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> ResponseLike:
        with self._recording(request) as answered:
            answered.append(
                await self.inner.send(request, connect_timeout=connect_timeout, deadline=deadline)
            )
        return answered[0]

    async def aclose(self) -> None:
        await self.inner.aclose()


def record_wire(client: Any, recorder: RecordingTransport) -> None:
    """Log every exchange of `client` (a DevClient or AsyncDevClient on its default transport) in
    `recorder`."""
    from ...client import AsyncDevClient

    if isinstance(client, AsyncDevClient):
        client._transport = _AsyncWire(client._transport, recorder)
    else:
        client._transport = _SyncWire(client._transport, recorder)
