"""Hand-written calls with each HTTP library: the baselines the SDK is measured against.

Each is what a careful caller writes for one JSON request on a kept-alive connection: the request (method
and target, the query string written out), a status check, the body decoded as JSON. `transport_of` names
the pool an SDK client really travels on, so a row can say which bare library is its same-transport peer.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import h11
import httpx
import urllib3

__all__ = [
    "RESET_TARGET",
    "BareH11",
    "HttpClientFloor",
    "aiohttp_call",
    "httpx_acall",
    "httpx_call",
    "transport_of",
    "urllib3_call",
]

RESET_TARGET = "/reset_prefix_cache?reset_running_requests=false&reset_external=false"
ACCEPT = {"Accept": "application/json"}
Call = Callable[[str, str], Any]
ACall = Callable[[str, str], Awaitable[Any]]


def _decoded(status: int, body: bytes) -> Any:
    if status != 200:
        raise RuntimeError(f"status {status}")
    return json.loads(body)


class HttpClientFloor:
    """The floor: http.client on one persistent connection (reconnecting if the server closed it); over
    https when given the SSLContext to trust."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.conn = self._connection()

    def _connection(self) -> http.client.HTTPConnection:
        if self.tls is None:
            return http.client.HTTPConnection(self.host, self.port)
        return http.client.HTTPSConnection(self.host, self.port, context=self.tls)

    def call(self, method: str, target: str) -> Any:
        for attempt in (0, 1):
            try:
                self.conn.request(method, target, headers=ACCEPT)
                response = self.conn.getresponse()
                body = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionError):
                self.conn.close()
                self.conn = self._connection()
                if attempt:
                    raise
        return _decoded(response.status, body)

    def close(self) -> None:
        self.conn.close()


class BareH11:
    """h11 on one kept-alive socket, the parser the SDK's sync pool uses, with nothing around it: no pool,
    no deadline per socket operation, no retry."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._connect()

    def _connect(self) -> None:
        self.sock = socket.create_connection((self.host, self.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h11.Connection(h11.CLIENT)

    def call(self, method: str, target: str) -> Any:
        if self.conn.our_state is not h11.IDLE:
            self.sock.close()
            self._connect()
        headers = [("host", f"{self.host}:{self.port}"), ("accept", "application/json")]
        if method == "POST":
            headers.append(("content-length", "0"))
        self.sock.sendall(
            self.conn.send(h11.Request(method=method, target=target, headers=headers))
            + self.conn.send(h11.EndOfMessage())
        )
        status, body = 0, bytearray()
        while True:
            event = self.conn.next_event()
            if event is h11.NEED_DATA:
                self.conn.receive_data(self.sock.recv(65536))
            elif isinstance(event, h11.Response):
                status = event.status_code
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection")
        if self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
            self.conn.start_next_cycle()  # else the next call reconnects
        return _decoded(status, bytes(body))

    def close(self) -> None:
        self.sock.close()


def urllib3_call(pool: urllib3.HTTPConnectionPool) -> Call:
    def call(method: str, target: str) -> Any:
        r = pool.request(method, target, headers=ACCEPT)
        return _decoded(r.status, r.data)

    return call


def httpx_call(client: httpx.Client, base: str) -> Call:
    def call(method: str, target: str) -> Any:
        r = client.request(method, base + target)
        r.raise_for_status()
        return r.json()

    return call


def httpx_acall(client: httpx.AsyncClient, base: str) -> ACall:
    async def call(method: str, target: str) -> Any:
        r = await client.request(method, base + target)
        r.raise_for_status()
        return r.json()

    return call


def aiohttp_call(session: aiohttp.ClientSession, base: str) -> ACall:
    async def call(method: str, target: str) -> Any:
        async with session.request(method, base + target) as r:
            return _decoded(r.status, await r.read())

    return call


def transport_of(client: Any) -> str:
    """The class name of the pool a DevClient / AsyncDevClient sends through ("H11Pool", "AiohttpPool",
    or the httpx adapter's)."""
    return type(client._transport).__name__
