"""The asynchronous transport of the SDK's own: a keep-alive pool over asyncio streams, HTTP/1.1 by h11.

The async default when aiohttp is not installed (and `transport="h11"`): it needs nothing beyond h11, which
reads the answer as it does in the sync pool (`h11_wire`). The whole exchange (a free connection slot,
connecting, sending, the status line, headers and body) runs under one `asyncio.wait_for` ending at the
deadline, so a server that trickles its answer cannot hold a call past it; connecting is also bounded by the
connect timeout.

Pooling rules, as in the sync pool: a connection goes back to the pool only after a complete answer below 500
that did not ask to close; a pooled one is reused while younger than `keepalive_expiry` and while the server
has not closed it. At most `max_connections` exchanges are in flight at once. Connections belong to the event
loop that opened them; used from another loop (a second `asyncio.run`), the pool starts afresh there.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import ssl
import time

import h11

from ..constants import DEFAULT_MAX_CONNECTIONS, KEEPALIVE_EXPIRY
from .base import (
    BodyCutOff,
    ConnectionDropped,
    Origin,
    TransportTimeout,
    WireRequest,
    WireResponse,
    connect_failed,
    cut_off,
)
from .h11_wire import READ_SIZE, AnswerReader, request_bytes
from .idle import IdleConnections
from .tls import TLSConfig, TLSFailure, handshake_failure, tls_connect_failure, unanswered_note

__all__ = ["AsyncioPool"]

# How long a failed send on a new TLS connection waits for the alert that says why.
_ALERT_WAIT = 0.5


class _Connection:
    __slots__ = ("fresh", "h11", "idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self.fresh = True  # no exchange on it yet

    def usable(self, now: float, expiry: float) -> bool:
        if now - self.idle_since > expiry or self.writer.transport.is_closing() or self.reader.at_eof():
            return False
        # A readable idle socket is one the server closed (the loop may not have run to see it yet).
        sock = self.writer.get_extra_info("socket")
        try:
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError, AttributeError):
            return False

    def close(self) -> None:
        with contextlib.suppress(Exception):  # a loop that is gone cannot close it: dropped
            self.writer.close()


class _Progress:
    """How far an exchange got, for what a timeout means."""

    __slots__ = ("connected", "reader", "sent")

    def __init__(self) -> None:
        self.connected = False
        self.sent = False
        self.reader: AnswerReader | None = None

    @property
    def answered(self) -> bool:
        return self.reader is not None and self.reader.answered


class AsyncioPool:
    """Send `WireRequest`s over pooled HTTP/1.1 connections of the running event loop; `aclose()` closes the
    idle ones."""

    def __init__(
        self,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
        tls: TLSConfig | None = None,
    ) -> None:
        self._max = max_connections
        self._tls = tls or TLSConfig.of()
        self._ssl: ssl.SSLContext | None = None  # made at the first https connection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._idle: IdleConnections[_Connection] = IdleConnections(max_connections, keepalive_expiry)
        self._slots = asyncio.Semaphore(max_connections)

    # ---- the pool ----------------------------------------------------------------------------------------

    def _for_this_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._drop_idle()
            self._loop = loop
            self._slots = asyncio.Semaphore(self._max)

    def _drop_idle(self) -> None:
        self._idle.close_all()

    def _checkout(self, origin: Origin) -> _Connection | None:
        return self._idle.checkout(origin)

    def _checkin(self, origin: Origin, conn: _Connection) -> None:
        self._idle.checkin(origin, conn)

    async def aclose(self) -> None:
        self._drop_idle()

    async def _connect(
        self, origin: Origin, connect_timeout: float | None, deadline: float | None
    ) -> _Connection:
        left = None if deadline is None else deadline - time.monotonic()
        limits = [t for t in (connect_timeout, left) if t is not None]
        limit = min(limits) if limits else None
        tls = None
        if origin.scheme == "https":
            if self._ssl is None:
                self._ssl = self._tls.context()  # outside the try: a bad CA file is not a connect failure
            tls = self._ssl
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    origin.host, origin.port, ssl=tls, server_hostname=origin.host if tls else None
                ),
                limit,
            )
        except asyncio.TimeoutError:
            raise TransportTimeout(f"connecting to {origin.host_header} timed out", sent=False) from None
        except ssl.SSLError as exc:
            raise tls_connect_failure(exc, origin, self._tls) from None
        except OSError as exc:
            raise connect_failed(origin.host_header, exc) from None
        return _Connection(reader, writer)

    # ---- one exchange ------------------------------------------------------------------------------------

    async def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> WireResponse:
        self._for_this_loop()
        progress = _Progress()
        if deadline is None:
            return await self._send(request, connect_timeout, deadline, progress)
        left = deadline - time.monotonic()
        if left <= 0:
            raise TransportTimeout("no time left to send the request", sent=False)
        try:
            return await asyncio.wait_for(self._send(request, connect_timeout, deadline, progress), left)
        except asyncio.TimeoutError:
            if not progress.connected:
                what = f"connecting to {request.origin.host_header} timed out"
                raise TransportTimeout(what, sent=False) from None
            if not progress.sent:
                raise TransportTimeout("sending the request timed out") from None
            raise TransportTimeout("no complete answer in time", answered=progress.answered) from None

    async def _send(
        self, request: WireRequest, connect_timeout: float | None, deadline: float | None, progress: _Progress
    ) -> WireResponse:
        async with self._slots:
            conn = None if request.fresh_connection else self._checkout(request.origin)
            if conn is None:
                conn = await self._connect(request.origin, connect_timeout, deadline)
            progress.connected = True
            try:
                response = await self._exchange(conn, request, deadline, progress)
            except BaseException:  # cancelled (the deadline) included: the connection is mid-exchange
                conn.close()
                raise
            if progress.reader is not None and progress.reader.reusable and response.status_code < 500:
                conn.h11.start_next_cycle()
                self._checkin(request.origin, conn)
            else:
                conn.close()
            return response

    async def _exchange(
        self, conn: _Connection, request: WireRequest, deadline: float | None, progress: _Progress
    ) -> WireResponse:
        data = request_bytes(conn.h11, request)
        origin = request.origin
        try:
            conn.writer.write(data)
            await conn.writer.drain()
        except OSError as exc:
            refused = await self._refusal(conn, origin, deadline)
            if refused is not None:
                raise refused from None
            size = cut_off(request.body)
            if size is not None:
                raise BodyCutOff(size, exc.strerror or exc) from None
            # The loop may have seen the close of a server that refused the handshake's result before our
            # first write did: said as the sync pool says a close without an answer.
            note = unanswered_note(origin, self._tls) if conn.fresh else ""
            raise ConnectionDropped(
                f"the connection broke while sending: {exc.strerror or exc}{note}"
            ) from None
        progress.sent = True
        reader = progress.reader = AnswerReader(
            conn.h11, lambda: unanswered_note(origin, self._tls) if conn.fresh else ""
        )
        while (response := reader.step()) is None:
            try:
                chunk = await conn.reader.read(READ_SIZE)
            except OSError as exc:
                # TLS 1.3: a server that refuses our certificate says so after our handshake ended.
                answered = reader.answered
                failure = handshake_failure(exc, origin, self._tls) if conn.fresh and not answered else None
                if isinstance(failure, TLSFailure):
                    raise failure from None
                size = None if answered else cut_off(request.body)
                if size is not None:  # the server reset the connection before it had read the body
                    raise BodyCutOff(size, exc.strerror or exc, during_send=False) from None
                raise ConnectionDropped(
                    f"the connection broke: {exc.strerror or exc}", answered=answered
                ) from None
            reader.feed(chunk)
        return response

    async def _refusal(self, conn: _Connection, origin: Origin, deadline: float | None) -> TLSFailure | None:
        """The alert of a TLS 1.3 server that refused our certificate after our side of the handshake had
        ended: a send fails on the server's close while the alert waits to be read (within the deadline)."""
        wait = _ALERT_WAIT if deadline is None else min(_ALERT_WAIT, deadline - time.monotonic())
        if not (conn.fresh and conn.writer.get_extra_info("ssl_object") is not None) or wait <= 0:
            return None
        try:
            await asyncio.wait_for(conn.reader.read(1), wait)
        except (OSError, asyncio.TimeoutError) as exc:
            refused = handshake_failure(exc, origin, self._tls)
            return refused if isinstance(refused, TLSFailure) else None
        return None
