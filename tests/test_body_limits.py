"""Body limits (on the real frontends: contract_tests/test_body_limits.py): the measured data, the refusal
before sending, the lazy /version lookup, a server's 400, and a connection cut mid-body on each transport."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Literal

import httpx
import pytest

from tools.fixtures.support import body_limits as measured_limits
from vllm_devclient import (
    AsyncDevClient,
    BodyCutOffError,
    BodyLimitExceededError,
    BodyTooLargeError,
    DevClient,
    body_limits,
)
from vllm_devclient.support import load_support

MiB = 1 << 20
Transport = Literal["auto", "httpx"]
LIMIT = 32 * MiB


def test_the_shipped_limits_are_the_measured_ones() -> None:
    assert load_support().raw["body_limits"] == measured_limits()
    assert body_limits.body_limit("rust", "0.33.0") == LIMIT  # measured: 33554432 read, 33554433 refused
    assert body_limits.body_limit("python", "0.33.0") is None  # read 100 MiB
    assert body_limits.checked_above() == LIMIT


def test_a_release_newer_than_all_measured_keeps_the_newest_limit_and_an_older_one_is_unknown() -> None:
    assert body_limits.body_limit("rust", "0.40.1") == LIMIT
    assert body_limits.body_limit("rust", "0.22.0") is None
    assert body_limits.body_limit("rust", None) is None
    assert body_limits.body_limit("unknown", "0.33.0") is None


def test_the_refusal_names_the_limit_and_what_to_do() -> None:
    body_limits.check_body(LIMIT, frontend="rust", release="0.33.0", method="POST", path="/update_weights")
    with pytest.raises(BodyTooLargeError) as caught:
        body_limits.check_body(
            LIMIT + 1, frontend="rust", release="0.33.0", method="POST", path="/update_weights"
        )
    said = str(caught.value)
    assert "33554433 bytes" in said and "33554432 bytes" in said and "vllm-rs 0.33.0" in said
    assert "IPC handles" in said and "chunks" in said and "Python frontend" in said
    assert (caught.value.size, caught.value.limit) == (LIMIT + 1, LIMIT)


class Server:
    """/version as `frontend` answers it, and every other route a 200 (counting the bodies it got)."""

    def __init__(self, frontend: str, answer: httpx.Response | None = None) -> None:
        self.frontend = frontend
        self.answer = answer
        self.paths: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        if request.url.path == "/version":
            extra = {"rust_frontend_version": "0.33.0"} if self.frontend == "rust" else {}
            return httpx.Response(200, json={"version": "0.33.0", **extra})
        return self.answer or httpx.Response(200, json={"message": "ok"})


def client_of(server: Server) -> DevClient:
    return DevClient("http://a.test", http_client=httpx.Client(transport=httpx.MockTransport(server)))


def big(size: int) -> dict[str, str]:
    return {"pad": "a" * (size - 20)}


def test_the_first_large_body_learns_the_frontend_and_is_refused_unsent() -> None:
    server = Server("rust")
    client = client_of(server)
    client.update_weights({"names": ["w"]})  # small: no lookup
    assert server.paths == ["/update_weights"]
    with pytest.raises(BodyTooLargeError) as caught:
        client.update_weights(big(LIMIT + MiB))
    assert server.paths == ["/update_weights", "/version"] and caught.value.frontend == "rust"
    with pytest.raises(BodyTooLargeError):
        client.update_weights(big(LIMIT + MiB))
    assert server.paths.count("/version") == 1  # learned once


def test_the_python_frontend_gets_the_large_body() -> None:
    server = Server("python")
    client_of(server).update_weights(big(LIMIT + MiB))
    assert server.paths == ["/version", "/update_weights"]


def test_a_server_that_cannot_say_gets_the_body() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(503 if request.url.path == "/version" else 200, json={"message": "ok"})

    seen: list[str] = []
    client = DevClient("http://a.test", http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    client.update_weights(big(LIMIT + MiB))
    assert seen[-1] == "/update_weights"


def test_vllm_rs_400_over_its_limit_is_typed() -> None:
    refusal = {"error": {"message": "Failed to buffer the request body: length limit exceeded", "code": 400}}
    server = Server("python", httpx.Response(400, json=refusal))
    with pytest.raises(BodyLimitExceededError) as caught:
        client_of(server).update_weights({"names": ["w"]})
    assert caught.value.status_code == 400 and "IPC handles" in str(caught.value)


@pytest.fixture
def closing_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Reads the request's first bytes, then resets the connection: a server refusing a body mid-way."""
    monkeypatch.delenv("VLLM_DEVCLIENT_TRANSPORT")  # "auto": the default pools
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.recv(65536)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


@pytest.mark.parametrize(
    ("transport", "said"),
    [("auto", "while the 67108854-byte request body was being sent"), ("httpx", "without answering a")],
)
def test_a_body_cut_off_is_named_sync(closing_server: str, transport: Transport, said: str) -> None:
    """The default pool (h11) sees its send break; httpx reads for an answer after it and cannot tell."""
    with DevClient(closing_server, transport=transport) as client, pytest.raises(BodyCutOffError) as caught:
        client.request("POST", "/update_weights", json=big(64 * MiB))
    got = str(caught.value)
    assert said in got and "body limit" in got and "IPC handles" in got


@pytest.mark.parametrize("transport", ["auto", "httpx"])
async def test_a_body_cut_off_is_named_async(closing_server: str, transport: Transport) -> None:
    async with AsyncDevClient(closing_server, transport=transport) as client:
        with pytest.raises(BodyCutOffError, match=r"the server closed the connection .* request body"):
            await client.request("POST", "/update_weights", json=big(64 * MiB))


def test_a_small_body_is_not_called_cut_off(closing_server: str) -> None:
    with DevClient(closing_server, transport="auto") as client, pytest.raises(Exception) as caught:
        client.request("POST", "/update_weights", json={"names": ["w"]})
    assert not isinstance(caught.value, BodyCutOffError)
    assert json.dumps(str(caught.value))  # a message, whatever the transport saw


def test_the_command_line_does_not_call_a_cut_body_unreachable() -> None:
    from vllm_devclient.cli._exit import ExitCode, exit_code_for

    cut = BodyCutOffError("cut", method="POST", url="http://a.test/update_weights")
    assert exit_code_for(cut) == ExitCode.FAILED


def test_the_measuring_tool_bisects_to_the_byte() -> None:
    """`tools.fixtures.body_limit.measure` against a fake server reading at most 33554432 bytes."""
    from tools.fixtures.body_limit import CAP, measure

    def server_with(limit: int | None) -> Callable[[str, int], str]:
        def send(_: str, size: int) -> str:
            if limit is None or size <= limit:
                return "500 start_weight_update must be called before update_weights."
            return (
                "400 Failed to buffer the request body: length limit exceeded"
                if size < limit + MiB
                else "closed"
            )

        return send

    found = measure("http://x", server_with(LIMIT))
    assert (found["limit"], found["smallest_refused"]) == (LIMIT, LIMIT + 1)
    assert found["tried"][str(64 * MiB)] == "closed"
    assert measure("http://x", server_with(20 * MiB + 7))["limit"] == 20 * MiB + 7
    unlimited = measure("http://x", server_with(None))
    assert (unlimited["limit"], unlimited["largest_accepted"]) == (None, CAP)
