"""The misbehaving server does what its docstring says, seen through http.client and raw sockets."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import (
    Answer,
    Close,
    DeepJSON,
    EchoHeader,
    Hang,
    HugeBody,
    Redirect,
    Reset,
    Trickle,
)


@pytest.fixture
def server() -> Iterator[MisbehavingServer]:
    with MisbehavingServer() as srv:
        yield srv


def connect(srv: MisbehavingServer, timeout: float = 5.0) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(srv.host, srv.port, timeout=timeout)


def raw(srv: MisbehavingServer, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection((srv.host, srv.port), timeout=timeout)


def read_all(sock: socket.socket) -> bytes:
    """Everything until EOF (raises on a reset)."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


GET_HEALTH = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"


def test_answers_with_json_headers_and_optional_server_header(server: MisbehavingServer) -> None:
    server.script("/with", Answer(201, json={"a": 1}, headers={"x-extra": "yes"}, server="uvicorn"))
    server.script("/without", Answer(200, body="plain"))
    conn = connect(server)
    conn.request("GET", "/with")
    r = conn.getresponse()
    assert (r.status, json.loads(r.read())) == (201, {"a": 1})
    assert r.getheader("server") == "uvicorn" and r.getheader("x-extra") == "yes"
    assert r.getheader("content-type") == "application/json"
    conn.request("GET", "/without")  # same connection: keep-alive
    r = conn.getresponse()
    assert (r.status, r.read()) == (200, b"plain")
    assert r.getheader("server") is None and r.getheader("connection") is None
    conn.close()
    first, second = server.requests
    assert first.connection == second.connection == 1 and server.connections == 1
    assert (first.number_on_connection, second.number_on_connection) == (1, 2)


def test_logs_every_request_with_its_details(server: MisbehavingServer) -> None:
    conn = connect(server)
    before = time.monotonic()
    conn.request(
        "POST", "/collective_rpc?x=1&y=2", body=b'{"method": "m"}', headers={"Authorization": "Bearer k"}
    )
    conn.getresponse().read()
    conn.close()
    (req,) = server.requests_to("/collective_rpc")
    assert (req.method, req.path, req.query, req.target) == (
        "POST",
        "/collective_rpc",
        "x=1&y=2",
        "/collective_rpc?x=1&y=2",
    )
    assert req.header("AUTHORIZATION") == "Bearer k" and req.json() == {"method": "m"}
    assert req.body == b'{"method": "m"}' and before <= req.time <= time.monotonic()
    assert server.count("/collective_rpc") == server.count("/collective_rpc", "post") == 1
    assert server.count("/collective_rpc", "GET") == 0


def test_unscripted_routes_get_the_default(server: MisbehavingServer) -> None:
    conn = connect(server)
    conn.request("GET", "/nothing")
    r = conn.getresponse()
    assert (r.status, json.loads(r.read())) == (404, {"detail": "Not Found"})


def test_a_script_runs_in_order_and_its_last_action_sticks(server: MisbehavingServer) -> None:
    server.script("/x", [Answer(500)] * 2 + [Answer(200)])
    server.script("/x", Answer(405), method="PUT")  # a method-specific script wins for that method
    conn = connect(server)
    statuses = []
    for method in ("GET", "GET", "PUT", "GET", "GET"):
        conn.request(method, "/x")
        r = conn.getresponse()
        r.read()
        statuses.append(r.status)
    assert statuses == [500, 500, 405, 200, 200]
    assert [r.number for r in server.requests] == [1, 2, 1, 3, 4]


def test_hang_reads_the_request_and_never_answers(server: MisbehavingServer) -> None:
    server.script("/reset_prefix_cache", Hang())
    sock = raw(server, timeout=0.3)
    sock.sendall(b"POST /reset_prefix_cache HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
    with pytest.raises(TimeoutError):
        sock.recv(1)
    sock.close()
    assert server.wait_for("/reset_prefix_cache")[0].body == b"{}"


@pytest.mark.parametrize("mode", ["never_read", "never_accept"])
def test_black_holes_take_the_connection_and_read_nothing(mode: str) -> None:
    with MisbehavingServer(mode=mode) as srv:  # type: ignore[arg-type]
        sock = raw(srv, timeout=0.3)  # the TCP handshake completes
        sock.sendall(GET_HEALTH)
        with pytest.raises(TimeoutError):
            sock.recv(1)
        sock.close()
        assert srv.requests == []
        assert srv.connections == (1 if mode == "never_read" else 0)


def test_trickled_head_arrives_a_byte_at_a_time(server: MisbehavingServer) -> None:
    answer = Answer(200, body=b"ok")
    server.script("/health", Trickle(answer, part="head", interval=0.01))
    head, _ = answer.head_and_body()
    sock = raw(server)
    start = time.monotonic()
    sock.sendall(GET_HEALTH)
    first = sock.recv(65536)
    assert len(first) == 1  # no read ever waits long: each byte comes within the interval
    got = first
    while not got.endswith(b"\r\n\r\nok"):
        got += sock.recv(65536)
    assert time.monotonic() - start >= 0.01 * (len(head) - 1)
    assert got == head + b"ok"
    sock.close()


def test_trickled_body_follows_a_prompt_head(server: MisbehavingServer) -> None:
    server.script("/version", Trickle(Answer(200, body=b"x" * 20), part="body", interval=0.02))
    conn = connect(server)
    start = time.monotonic()
    conn.request("GET", "/version")
    r = conn.getresponse()
    head_at = time.monotonic() - start
    assert r.status == 200 and head_at < 0.2
    assert r.read() == b"x" * 20
    assert time.monotonic() - start >= 0.02 * 19


def test_huge_error_page(server: MisbehavingServer) -> None:
    server.script("/v1/models", HugeBody(502, size=50 * 1024 * 1024))
    conn = connect(server)
    conn.request("GET", "/v1/models")
    r = conn.getresponse()
    assert r.status == 502 and r.getheader("content-type") == "text/html; charset=utf-8"
    body = r.read()
    assert len(body) == int(r.getheader("content-length") or 0) == 50 * 1024 * 1024
    assert body.startswith(b"<p>internal error")


def test_deeply_nested_json(server: MisbehavingServer) -> None:
    server.script("/version", DeepJSON(depth=100_000))
    conn = connect(server)
    conn.request("GET", "/version")
    r = conn.getresponse()
    body = r.read()
    assert r.getheader("content-type") == "application/json" and len(body) == 200_000
    with pytest.raises(RecursionError):
        json.loads(body)


def test_answer_then_close_like_uvicorn_after_an_engine_error(server: MisbehavingServer) -> None:
    server.script("/collective_rpc", Answer(500, json={"error": "boom"}, close_after=0.0))
    sock = raw(server)
    sock.sendall(b"POST /collective_rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    data = read_all(sock)  # a complete answer, then EOF
    assert data.startswith(b"HTTP/1.1 500 ") and data.endswith(b'{"error": "boom"}')
    assert b"connection:" not in data.lower()  # no warning that the connection ends
    sock.close()


def test_the_close_delay_reproduces_the_stale_connection_race(server: MisbehavingServer) -> None:
    server.script("/collective_rpc", Answer(500, json={"error": "boom"}, close_after=0.3))
    sock = raw(server)
    sock.sendall(b"POST /collective_rpc HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    time.sleep(0.1)
    assert sock.recv(65536).startswith(b"HTTP/1.1 500 ")
    sock.sendall(GET_HEALTH)  # on the same connection, inside the delay: never read
    with pytest.raises(ConnectionResetError):
        read_all(sock)
    sock.close()
    assert [r.path for r in server.requests] == ["/collective_rpc"]


def test_close_without_answering(server: MisbehavingServer) -> None:
    server.script("/update_weights", Close())
    sock = raw(server)
    sock.sendall(b"POST /update_weights HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    assert read_all(sock) == b""  # EOF, no byte of an answer
    sock.close()
    assert server.count("/update_weights") == 1


def test_reset_sends_an_rst(server: MisbehavingServer) -> None:
    server.script("/update_weights", Reset())
    sock = raw(server)
    sock.sendall(b"POST /update_weights HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    with pytest.raises(ConnectionResetError):
        read_all(sock)
    sock.close()
    assert server.count("/update_weights") == 1


def test_echoes_a_request_header(server: MisbehavingServer) -> None:
    server.script("/v1/models", EchoHeader("authorization"))
    conn = connect(server)
    conn.request("GET", "/v1/models", headers={"Authorization": "Bearer sk-123"})
    r = conn.getresponse()
    assert r.status == 401
    assert json.loads(r.read())["error"]["message"] == "invalid authorization: Bearer sk-123"


def test_redirects_to_another_origin(server: MisbehavingServer) -> None:
    server.script("/health", Redirect("http://elsewhere.invalid/steal", status=302))
    conn = connect(server)
    conn.request("GET", "/health")
    r = conn.getresponse()
    r.read()
    assert (r.status, r.getheader("location")) == (302, "http://elsewhere.invalid/steal")


def test_polite_close_says_so(server: MisbehavingServer) -> None:
    server.script("/health", Answer(200, connection_close=True))
    sock = raw(server)
    sock.sendall(GET_HEALTH)
    data = read_all(sock)
    assert b"\r\nconnection: close\r\n" in data


def test_idle_keep_alive_connections_are_closed() -> None:
    with MisbehavingServer(default=Answer(200), keep_alive=0.2) as srv:
        sock = raw(srv)
        sock.sendall(GET_HEALTH)
        time.sleep(0.05)
        sock.sendall(GET_HEALTH)  # before the idle timeout: served on the same connection
        start = time.monotonic()
        data = read_all(sock)  # then EOF once idle
        assert data.count(b"HTTP/1.1 200 OK") == 2
        assert 0.1 <= time.monotonic() - start < 1.0
        assert [r.connection for r in srv.requests] == [1, 1]


def test_chunked_body_and_expect_continue(server: MisbehavingServer) -> None:
    sock = raw(server)
    sock.sendall(
        b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
        b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    assert server.wait_for("/x")[0].body == b"abcde"
    assert sock.recv(65536).startswith(b"HTTP/1.1 100 Continue")
    sock.close()


def test_a_request_with_connection_close_ends_the_connection(server: MisbehavingServer) -> None:
    sock = raw(server)
    sock.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert read_all(sock).startswith(b"HTTP/1.1 404 ")


def test_a_garbled_request_gets_a_400(server: MisbehavingServer) -> None:
    sock = raw(server)
    sock.sendall(b"NONSENSE\r\n\r\n")
    assert read_all(sock).startswith(b"HTTP/1.1 400 ")
    assert server.requests == []


def test_scripts_are_checked_and_reset_forgets(server: MisbehavingServer) -> None:
    with pytest.raises(TypeError, match="not a behaviour"):
        server.script("/x", [Answer(), "hang"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="empty"):
        server.script("/x", [])
    server.script("/x", Answer(500))
    conn = connect(server)
    conn.request("GET", "/x")
    assert conn.getresponse().status == 500
    conn.close()
    server.reset()
    assert server.requests == []
    conn = connect(server)
    conn.request("GET", "/x")
    assert conn.getresponse().status == 404


def test_wait_for_counts_concurrent_arrivals(server: MisbehavingServer) -> None:
    def hit() -> None:
        conn = connect(server)
        conn.request("GET", "/c")
        conn.getresponse().read()
        conn.close()

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for t in threads:
        t.start()
    assert len(server.wait_for("/c", 8, deadline=5)) == 8
    for t in threads:
        t.join()
    assert sorted(r.connection for r in server.requests) == list(range(1, 9))
    with pytest.raises(TimeoutError, match="8 of 9"):
        server.wait_for("/c", 9, deadline=0.1)


def test_close_ends_hung_and_trickling_answers_promptly() -> None:
    srv = MisbehavingServer().start()
    srv.script("/hang", Hang())
    srv.script("/slow", Trickle(Answer(200, body=b"x" * 1000), part="all", interval=1.0))
    socks = [raw(srv) for _ in range(2)]
    socks[0].sendall(b"GET /hang HTTP/1.1\r\nHost: x\r\n\r\n")
    socks[1].sendall(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    srv.wait_for("/slow")
    srv.wait_for("/hang")
    start = time.monotonic()
    srv.close()
    assert time.monotonic() - start < 1.0
    assert not [t for t in srv._threads if t.is_alive()]
    for sock in socks:
        sock.close()
