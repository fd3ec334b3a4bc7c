"""The asynchronous default transport: aiohttp's connection pool (its C HTTP parser, its connector).

Two sessions per event loop: a keep-alive one, and one that opens a new connection for every request, for
requests that are not safe to repeat (see `WireRequest.fresh_connection`). A session belongs to the event
loop it was made in; used from another loop (a second `asyncio.run`), the transport makes new sessions
there and drops the old ones, whose loop is gone.

Every request runs under aiohttp's `total` timeout set to what is left of the deadline, so the whole
exchange, body included, is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time

import aiohttp

from ..constants import DEFAULT_MAX_CONNECTIONS, KEEPALIVE_EXPIRY
from . import base
from .tls import TLSConfig, TLSFailure, handshake_failure, tls_connect_failure, unanswered_note

__all__ = ["AiohttpPool"]


class _StatedRequest(aiohttp.ClientRequest):
    """Sends the headers it is given and no others: no automatic Accept, Accept-Encoding or User-Agent.
    (The same as skipping those three, without the per-request work aiohttp does for a skip list.)"""

    def update_auto_headers(self, skip_auto_headers: object) -> None:
        return None


class AiohttpPool:
    def __init__(
        self,
        *,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        keepalive_expiry: float = KEEPALIVE_EXPIRY,
        tls: TLSConfig | None = None,
    ) -> None:
        self._max_connections = max_connections
        self._expiry = keepalive_expiry
        self._tls = tls or TLSConfig.of()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sessions: tuple[aiohttp.ClientSession, aiohttp.ClientSession] | None = None
        self._ssl: ssl.SSLContext | None = None

    def _session(self, fresh: bool) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._sessions is None or loop is not self._loop:
            self._abandon()
            self._loop = loop
            pooled = aiohttp.TCPConnector(limit=self._max_connections, keepalive_timeout=self._expiry)
            single = aiohttp.TCPConnector(limit=self._max_connections, force_close=True)
            self._sessions = (self._new_session(pooled), self._new_session(single))
        return self._sessions[1 if fresh else 0]

    @staticmethod
    def _new_session(connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        # No cookies, no default headers beyond ours, no redirects: every request is stated in full.
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            request_class=_StatedRequest,
            auto_decompress=True,
        )

    def _abandon(self) -> None:
        """Forget sessions of a loop that is gone: their connections cannot be closed from here."""
        sessions, self._sessions = self._sessions, None
        if sessions is None:
            return
        for session in sessions:
            connector = session.connector
            if connector is not None:
                with contextlib.suppress(Exception):
                    connector._close()
            session._connector = None  # nothing left to close: no "unclosed session" warning

    async def aclose(self) -> None:
        sessions, self._sessions = self._sessions, None
        if sessions is None:
            return
        if self._loop is not asyncio.get_running_loop():
            self._sessions = sessions
            self._abandon()
            return
        for session in sessions:
            await session.close()

    def _ssl_for(self, origin: base.Origin) -> ssl.SSLContext | bool:
        """The SSLContext for https, made at the first https request (so http never loads a CA bundle)."""
        if origin.scheme != "https":
            return True  # aiohttp's default; unused over http
        if self._ssl is None:
            self._ssl = self._tls.context()
        return self._ssl

    async def send(
        self, request: base.WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> base.WireResponse:
        session = self._session(request.fresh_connection)
        tls = self._ssl_for(request.origin)
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise base.TransportTimeout("no time left to send the request", sent=False)
        connect = connect_timeout if left is None else min(left, connect_timeout or left)
        timeout = aiohttp.ClientTimeout(total=left, sock_connect=connect)
        answered = False
        try:
            async with session.request(
                request.method,
                request.url,
                headers=request.headers,
                data=request.body,
                allow_redirects=False,
                timeout=timeout,
                ssl=tls,
            ) as response:
                answered = True
                body = await response.read()
                # aiohttp's headers mapping is case-insensitive already.
                return base.WireResponse(response.status, response.headers, body)
        except aiohttp.ConnectionTimeoutError:
            raise base.TransportTimeout(
                f"connecting to {request.origin.host_header} timed out", sent=False
            ) from None
        except aiohttp.ClientSSLError as exc:
            raise tls_connect_failure(exc, request.origin, self._tls) from None
        except aiohttp.ClientConnectorError as exc:
            raise base.connect_failed(request.origin.host_header, exc) from None
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            raise base.TransportTimeout("no complete answer in time", answered=answered) from None
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            size = None if answered else base.cut_off(request.body)
            if size is not None:  # the server closed the connection before it had read the body
                raise base.BodyCutOff(size, exc) from None
            if isinstance(exc, aiohttp.ClientOSError):
                raise self._broke(exc, request.origin, answered) from None
            note = "" if answered else unanswered_note(request.origin, self._tls)
            raise base.ConnectionDropped(
                "the server closed the connection"
                + (" mid-answer" if answered else " without answering")
                + note,
                answered=answered,
            ) from None
        except aiohttp.ClientPayloadError as exc:
            raise base.ConnectionDropped(f"the answer broke off: {exc}", answered=True) from None
        except aiohttp.ClientResponseError as exc:
            raise base.ProtocolViolation(f"invalid HTTP answer: {exc.message}") from None
        except aiohttp.ClientConnectionError as exc:
            raise base.ConnectionDropped(f"the connection broke: {exc}", answered=answered) from None

    def _broke(self, exc: aiohttp.ClientOSError, origin: base.Origin, answered: bool) -> base.TransportError:
        # TLS 1.3: a server that refuses our certificate says so after our handshake ended.
        refused = None if answered else handshake_failure(exc, origin, self._tls)
        if isinstance(refused, TLSFailure):
            return refused
        note = "" if answered else unanswered_note(origin, self._tls)
        return base.ConnectionDropped(f"the connection broke: {exc.strerror or exc}{note}", answered=answered)
