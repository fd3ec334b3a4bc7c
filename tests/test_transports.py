"""The SDK's pools (h11 sync, asyncio async, aiohttp async) on real sockets, against the misbehaving server.

What the retry rule relies on: connections are kept alive and reused; a connection that answered a 5xx or
sat idle too long is never reused; a request that is not safe to repeat opens a connection of its own; a
deadline bounds the whole exchange; the pool is safe to share between threads and follows event loops.
"""

from __future__ import annotations

import asyncio
import gzip
import importlib.util
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from vllm_devclient import APIConnectionError, AsyncDevClient, DevClient
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer, Trickle
from vllm_devclient.transports import ConnectFailed, Origin, TransportTimeout, WireRequest
from vllm_devclient.transports.aiohttp_pool import AiohttpPool
from vllm_devclient.transports.asyncio_pool import AsyncioPool
from vllm_devclient.transports.base import connect_failed
from vllm_devclient.transports.h11_pool import H11Pool

PAUSED = Answer(200, json={"is_paused": False})


@pytest.fixture
def server() -> Iterator[MisbehavingServer]:
    with MisbehavingServer() as srv:
        yield srv


def _request(server: MisbehavingServer, path: str = "/is_paused", *, fresh: bool = False) -> WireRequest:
    origin = Origin("http", "127.0.0.1", server.port)
    return WireRequest("GET", origin, path, (("Accept", "application/json"),), None, fresh_connection=fresh)


POOLS = {"h11": H11Pool, "asyncio": AsyncioPool, "aiohttp": AiohttpPool}
OWN_POOLS = ["h11", "asyncio"]  # the SDK's own: the pooling rules below are theirs


class _Driver:
    """A pool, sync or async, driven from plain code: an async one runs on one event loop of its own."""

    def __init__(self, kind: str, **settings: Any) -> None:
        self.pool = POOLS[kind](**settings)
        self.loop = None if kind == "h11" else asyncio.new_event_loop()

    def send(self, request: WireRequest, deadline: float | None = None) -> Any:
        sent = self.pool.send(request, connect_timeout=5.0, deadline=deadline)
        return sent if self.loop is None else self.loop.run_until_complete(sent)

    def close(self) -> None:
        if self.loop is None:
            self.pool.close()
        else:
            self.loop.run_until_complete(self.pool.aclose())
            self.loop.close()


def _send(kind: str, request: WireRequest, deadline: float | None = None) -> Any:
    driver = _Driver(kind)
    try:
        return driver.send(request, deadline)
    finally:
        driver.close()


@pytest.mark.parametrize("pool_kind", OWN_POOLS)
def test_keeps_connections_alive_and_reuses_them(server: MisbehavingServer, pool_kind: str) -> None:
    server.script("/is_paused", PAUSED)
    pool = _Driver(pool_kind)
    for _ in range(5):
        assert pool.send(_request(server)).json() == {"is_paused": False}
    assert server.connections == 1
    pool.close()


@pytest.mark.parametrize("pool_kind", OWN_POOLS)
def test_never_reuses_a_connection_that_answered_a_5xx(server: MisbehavingServer, pool_kind: str) -> None:
    server.script("/boom", Answer(500, json={"error": "x"}))
    server.script("/is_paused", PAUSED)
    pool = _Driver(pool_kind)
    assert pool.send(_request(server, "/boom")).status_code == 500
    pool.send(_request(server))
    assert server.connections == 2
    pool.close()


@pytest.mark.parametrize("pool_kind", OWN_POOLS)
def test_drops_idle_connections_before_the_server_would(server: MisbehavingServer, pool_kind: str) -> None:
    server.script("/is_paused", PAUSED)
    pool = _Driver(pool_kind, keepalive_expiry=0.05)
    pool.send(_request(server))
    time.sleep(0.1)
    pool.send(_request(server))
    assert server.connections == 2
    pool.close()


@pytest.mark.parametrize("pool_kind", OWN_POOLS)
def test_notices_a_pooled_connection_the_server_closed(pool_kind: str) -> None:
    with MisbehavingServer(keep_alive=0.05) as server:
        server.script("/is_paused", PAUSED)
        pool = _Driver(pool_kind)
        pool.send(_request(server))
        time.sleep(0.2)  # the server closed it meanwhile: the closed idle connection is not reused
        assert pool.send(_request(server)).status_code == 200
        assert server.connections == 2
        pool.close()


@pytest.mark.parametrize("pool_kind", POOLS)
def test_a_request_marked_fresh_gets_a_connection_of_its_own(
    server: MisbehavingServer, pool_kind: str
) -> None:
    server.script("/is_paused", PAUSED)
    pool = _Driver(pool_kind)
    pool.send(_request(server))
    pool.send(_request(server, fresh=True))
    pool.close()
    assert server.connections == 2


@pytest.mark.parametrize("part", ["head", "body"])
@pytest.mark.parametrize("pool_kind", POOLS)
def test_a_deadline_bounds_the_whole_exchange_of_a_trickling_server(
    server: MisbehavingServer, part: str, pool_kind: str
) -> None:
    server.script(
        "/is_paused",
        Trickle(Answer(200, json={"is_paused": False, "pad": "x" * 200}), part=part, interval=0.02),
    )
    start = time.monotonic()
    with pytest.raises(TransportTimeout) as info:
        _send(pool_kind, _request(server), deadline=time.monotonic() + 0.5)
    elapsed = time.monotonic() - start
    assert 0.45 <= elapsed < 0.8
    assert info.value.sent and (info.value.answered or part == "head")


@pytest.mark.parametrize("pool_kind", POOLS)
def test_connect_failure_says_nothing_was_sent(pool_kind: str) -> None:
    with MisbehavingServer() as srv:
        port = srv.port
    origin = Origin("http", "127.0.0.1", port)
    with pytest.raises(ConnectFailed) as info:
        _send(pool_kind, WireRequest("GET", origin, "/health", (), None))
    assert info.value.sent is False
    assert str(info.value) == f"cannot connect to 127.0.0.1:{port}: Connection refused"


@pytest.mark.parametrize("pool_kind", POOLS)
def test_gzip_and_chunked_answers_are_read(server: MisbehavingServer, pool_kind: str) -> None:
    body = gzip.compress(b'{"is_paused": true}')
    server.script(
        "/is_paused",
        Answer(200, body=body, headers={"content-encoding": "gzip", "content-type": "application/json"}),
    )
    assert _send(pool_kind, _request(server)).json() == {"is_paused": True}


@pytest.mark.parametrize("pool_kind", POOLS)
def test_only_the_stated_headers_go_out(server: MisbehavingServer, pool_kind: str) -> None:
    server.script("/is_paused", PAUSED)
    stated = (("Accept", "application/json"), ("X-Trace", "a"), ("X-Trace", "b"))
    request = _request(server)._replace(headers=stated)
    assert _send(pool_kind, request).json() == {"is_paused": False}
    (seen,) = server.requests_to("/is_paused")
    # Host is the transport's; nothing else is added (no automatic Accept-Encoding or User-Agent).
    assert [k for k, _ in seen.headers if k != "host"] == ["accept", "x-trace", "x-trace"]
    assert [v for k, v in seen.headers if k == "x-trace"] == ["a", "b"]


def test_the_asyncio_pool_bounds_the_connections_in_flight(server: MisbehavingServer) -> None:
    server.script("/is_paused", Trickle(PAUSED, part="body", interval=0.01))
    pool = AsyncioPool(max_connections=3)

    async def go() -> list[Any]:
        try:
            sends = [pool.send(_request(server), connect_timeout=5, deadline=None) for _ in range(9)]
            return await asyncio.gather(*sends)
        finally:
            await pool.aclose()

    assert [r.status_code for r in asyncio.run(go())] == [200] * 9
    assert server.connections == 3  # nine exchanges, never more than three at once, reused


def test_one_sync_client_is_safe_for_many_threads(server: MisbehavingServer) -> None:
    server.script("/is_paused", PAUSED)
    errors: list[BaseException] = []
    with DevClient(server.base_url, transport="auto") as client:

        def work() -> None:
            try:
                for _ in range(50):
                    assert client.is_paused() is False
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=work) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []
    assert server.count("/is_paused") == 16 * 50
    assert server.connections <= 16 * 2  # reused, not one per call


def test_one_async_client_across_two_event_loops(server: MisbehavingServer) -> None:
    server.script("/is_paused", PAUSED)
    client = AsyncDevClient(server.base_url, transport="auto")
    assert asyncio.run(client.is_paused()) is False
    # A second asyncio.run: the first loop is closed; the client opens new connections on this one.
    assert asyncio.run(client.is_paused()) is False

    async def close() -> None:
        await client.close()

    asyncio.run(close())


def test_a_closed_port_reads_the_same_on_every_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    # The h11 pool (sync) and aiohttp (async) once said "Connection refused" and "Connect call failed" for it.
    with MisbehavingServer() as srv:
        url, host = srv.base_url, f"127.0.0.1:{srv.port}"
    messages = {}
    kinds = ["auto", "h11", "httpx"] + (["httpx2"] if importlib.util.find_spec("httpx2") else [])
    for kind in kinds:
        monkeypatch.setenv("VLLM_DEVCLIENT_TRANSPORT", kind)
        with DevClient(url, max_retries=0) as client, pytest.raises(APIConnectionError) as sync:
            client.health()

        async def call() -> None:
            async with AsyncDevClient(url, max_retries=0) as aclient:
                await aclient.health()

        with pytest.raises(APIConnectionError) as asyn:
            asyncio.run(call())
        messages[f"{kind} sync"], messages[f"{kind} async"] = str(sync.value), str(asyn.value)
    expected = f"GET /health failed: cannot connect to {host}: Connection refused (nothing was sent)"
    assert messages == dict.fromkeys(messages, expected)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (OSError(111, "Connect call failed ('127.0.0.1', 8000)"), "Connection refused"),
        (OSError("Multiple exceptions: [Errno 111] Connect call failed ('::1', 8000, 0, 0), "
                 "[Errno 111] Connect call failed ('127.0.0.1', 8000)"), "Connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "Name or service not known"),
        (OSError("All connection attempts failed"), "All connection attempts failed"),
    ],
)  # fmt: skip
def test_the_connect_reason_is_the_errnos_words(error: OSError, reason: str) -> None:
    assert str(connect_failed("h:1", error)) == f"cannot connect to h:1: {reason}"
    try:
        raise RuntimeError("a wrapper") from error  # httpx and anyio wrap the OS's error
    except RuntimeError as wrapped:
        if "All" not in reason:  # a text of its own stays the wrapper's
            assert str(connect_failed("h:1", wrapped)) == f"cannot connect to h:1: {reason}"
