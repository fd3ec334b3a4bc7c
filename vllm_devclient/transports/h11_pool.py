"""The synchronous default transport: a keep-alive connection pool over plain sockets, HTTP/1.1 by h11.

Why not httpx's own transport: building an `httpx.Request` and `httpx.Response` costs more than the whole
exchange with a local server, and httpx bounds each socket read, not a call. Here every socket operation
gets what is left of the call's deadline, so a server that trickles its headers or body cannot hold a call
past it; h11 (the sans-IO parser httpx itself uses) reads the answer.

Pooling rules: a connection goes back to the pool only after a complete answer below 500 that did not ask
to close (the Python frontend closes the connection right after some 500s, without saying so). Before a
pooled connection is reused it must be younger than `keepalive_expiry` (servers close idle connections
after 5 s) and have nothing to read (a readable idle socket is one the server closed). Thread-safe.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
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

__all__ = ["H11Pool"]

# How long a failed send on a new TLS connection waits for the alert that says why.
_ALERT_WAIT = 0.5


class _Connection:
    __slots__ = ("fresh", "h11", "idle_since", "sock")

    def __init__(self, sock: socket.socket, *, fresh: bool) -> None:
        self.sock = sock
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self.fresh = fresh  # no exchange on it yet

    def usable(self, now: float, expiry: float) -> bool:
        if now - self.idle_since > expiry:
            return False
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


def _remaining(deadline: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


class H11Pool:
    """Send `WireRequest`s over pooled HTTP/1.1 connections; `close()` closes the idle ones."""

    def __init__(
        self,
        *,
        max_idle: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
        tls: TLSConfig | None = None,
    ) -> None:
        self._idle: IdleConnections[_Connection] = IdleConnections(max_idle, keepalive_expiry)
        self._lock = threading.Lock()
        self._tls = tls or TLSConfig.of()
        self._ssl: ssl.SSLContext | None = None  # made at the first https connection

    # ---- the pool ----------------------------------------------------------------------------------------

    def _checkout(self, origin: Origin) -> _Connection | None:
        with self._lock:
            return self._idle.checkout(origin)

    def _checkin(self, origin: Origin, conn: _Connection) -> None:
        with self._lock:
            self._idle.checkin(origin, conn)

    def close(self) -> None:
        with self._lock:
            self._idle.close_all()

    def _connect(self, origin: Origin, connect_timeout: float | None, deadline: float | None) -> _Connection:
        try:
            left = _remaining(deadline)
        except TimeoutError:
            raise TransportTimeout("no time left to connect", sent=False) from None
        limits = [t for t in (connect_timeout, left) if t is not None]
        limit = min(limits) if limits else None
        if origin.scheme == "https" and self._ssl is None:
            self._ssl = self._tls.context()  # outside the try: a bad CA file is not a connect failure
        try:
            sock = socket.create_connection((origin.host, origin.port), timeout=limit)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl is not None and origin.scheme == "https":
                sock = self._ssl.wrap_socket(sock, server_hostname=origin.host)
        except TimeoutError:
            raise TransportTimeout(f"connecting to {origin.host_header} timed out", sent=False) from None
        except ssl.SSLError as exc:
            raise tls_connect_failure(exc, origin, self._tls) from None
        except OSError as exc:
            raise connect_failed(origin.host_header, exc) from None
        return _Connection(sock, fresh=True)

    # ---- one exchange ------------------------------------------------------------------------------------

    def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> WireResponse:
        conn = None if request.fresh_connection else self._checkout(request.origin)
        if conn is None:
            conn = self._connect(request.origin, connect_timeout, deadline)
        try:
            response, reusable = self._exchange(conn, request, deadline)
        except BaseException:
            conn.close()
            raise
        if reusable and response.status_code < 500:
            conn.h11.start_next_cycle()
            self._checkin(request.origin, conn)
        else:
            conn.close()
        return response

    def _exchange(
        self, conn: _Connection, request: WireRequest, deadline: float | None
    ) -> tuple[WireResponse, bool]:
        data = request_bytes(conn.h11, request)
        sock = conn.sock
        try:
            sock.settimeout(_remaining(deadline))
        except TimeoutError:
            raise TransportTimeout("no time left to send the request", sent=False) from None
        try:
            sock.sendall(data)
        except TimeoutError:
            raise TransportTimeout("sending the request timed out") from None
        except OSError as exc:
            refused = self._refusal(conn, request.origin, deadline)
            if refused is not None:
                raise refused from None
            size = cut_off(request.body)
            if size is not None:
                raise BodyCutOff(size, exc.strerror or exc) from None
            raise ConnectionDropped(f"the connection broke while sending: {exc.strerror or exc}") from None
        return self._receive(conn, request.origin, deadline)

    def _refusal(self, conn: _Connection, origin: Origin, deadline: float | None) -> TLSFailure | None:
        """The alert of a TLS 1.3 server that refused our certificate after our side of the handshake had
        ended: a send fails on the server's close while the alert waits to be read (within the deadline)."""
        wait = _ALERT_WAIT if deadline is None else min(_ALERT_WAIT, deadline - time.monotonic())
        if not (conn.fresh and isinstance(conn.sock, ssl.SSLSocket)) or wait <= 0:
            return None
        try:
            conn.sock.settimeout(wait)
            conn.sock.recv(1)
        except OSError as exc:
            refused = handshake_failure(exc, origin, self._tls)
            return refused if isinstance(refused, TLSFailure) else None
        return None

    def _receive(
        self, conn: _Connection, origin: Origin, deadline: float | None
    ) -> tuple[WireResponse, bool]:
        reader = AnswerReader(conn.h11, lambda: unanswered_note(origin, self._tls) if conn.fresh else "")
        while (response := reader.step()) is None:
            try:
                conn.sock.settimeout(_remaining(deadline))
                data = conn.sock.recv(READ_SIZE)
            except TimeoutError:
                raise TransportTimeout("no complete answer in time", answered=reader.answered) from None
            except OSError as exc:
                # TLS 1.3: a server that refuses our certificate says so after our handshake ended.
                answered = reader.answered
                refused = handshake_failure(exc, origin, self._tls) if conn.fresh and not answered else None
                if isinstance(refused, TLSFailure):
                    raise refused from None
                raise ConnectionDropped(
                    f"the connection broke: {exc.strerror or exc}", answered=answered
                ) from None
            reader.feed(data)
        return response, reader.reusable
