"""The fault suite, a wrong URL (issue 51): where nothing listens, the barrier and the state waits stop at
once (after the client's connect retries), naming the URL, and the command line exits 3 within seconds; a
server that is starting (refused connections, then up) still gets `wait_until_ready`'s deadline.

How the two are told apart (README, Guarantees): `wait_until_ready` is the wait for a starting server and
waits through refused connections; the barrier and the other waits take a refused connection for a wrong URL
or a stopped server. Against a port where nothing listens (`free_port`), and a plain HTTP server that starts
listening on its port a second after the wait began.
"""

from __future__ import annotations

import asyncio
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient import (
    AsyncDevClient,
    BarrierTimeoutError,
    BarrierUnreachableError,
    DevClient,
    WaitTimeoutError,
    WaitUnreachableError,
)
from vllm_devclient.cli import ExitCode
from vllm_devclient.testing.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
# What "at once" may take on a loaded shared machine: the acceptance's bound (the barrier's deadline is 60 s).
AT_ONCE_S = 5.0


@pytest.fixture
def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nobody listens there


def _run(kind: str, url: str, call: Callable[[Any], Any]) -> Any:
    if kind == "sync":
        with DevClient(url) as client:
            return call(client)

    async def go() -> Any:
        async with AsyncDevClient(url) as client:
            return await call(client)

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("reset_prefix_cache_until_success", BarrierUnreachableError),
        ("wait_until_paused", WaitUnreachableError),
        ("wait_until_resumed", WaitUnreachableError),
        ("wait_until_sleeping", WaitUnreachableError),
        ("wait_until_awake", WaitUnreachableError),
    ],
)
def test_the_barrier_and_the_waits_stop_at_once_where_nothing_listens(
    closed_url: str, kind: str, name: str, expected: type[Exception]
) -> None:
    start = time.monotonic()
    with pytest.raises(expected) as caught:
        _run(kind, closed_url, lambda client: getattr(client, name)())  # default deadline: 60 s
    took = time.monotonic() - start
    assert took < AT_ONCE_S, f"{name} took {took:.2f} s on a closed port"
    err = caught.value
    assert isinstance(err, WaitTimeoutError)  # code that catches a wait's failure still does
    message = str(err)
    assert f"{closed_url} is unreachable" in message and "Nothing listens there" in message, message
    assert "3 tries in a row" in message, message  # the client's max_retries (2) were tried first
    if isinstance(err, BarrierTimeoutError):
        assert err.reached == 0 and err.attempts == 3


def test_the_connect_retries_are_the_clients(closed_url: str) -> None:
    with DevClient(closed_url, max_retries=5) as client, pytest.raises(WaitUnreachableError) as caught:
        client.wait_until_paused()
    assert "6 tries in a row" in str(caught.value)


@pytest.mark.parametrize("command", [["barrier"], ["wait-paused"], ["barrier", "--deadline", "300"]])
def test_the_command_exits_3_within_seconds_naming_the_url(closed_url: str, command: list[str]) -> None:
    """As a user runs it: the installed command in a process of its own, its start included."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VLLM_DEVCLIENT_URL": "", "VLLM_DEVCLIENT_TIMEOUT": ""}
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "vllm_devclient.cli", "--url", closed_url, *command],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    took = time.monotonic() - start
    assert done.returncode == ExitCode.CONNECTION, done.stdout + done.stderr
    assert took < AT_ONCE_S, f"exit {done.returncode} after {took:.2f} s"
    assert f"{closed_url} is unreachable" in " ".join((done.stdout + done.stderr).split())


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:  # quiet
        pass


@pytest.fixture
def starting_server() -> Iterator[str]:
    """A URL whose port refuses connections for a second, then serves /health (a server that is starting)."""
    port = free_port()
    servers: list[http.server.ThreadingHTTPServer] = []

    def start_late() -> None:
        time.sleep(1.0)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), _Health)
        servers.append(server)
        server.serve_forever(poll_interval=0.05)

    thread = threading.Thread(target=start_late, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 5
    while not servers and time.monotonic() < deadline:
        time.sleep(0.05)
    for server in servers:
        server.shutdown()
        server.server_close()
    thread.join(timeout=5)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_wait_until_ready_waits_through_refused_connections_for_a_starting_server(
    starting_server: str, kind: str
) -> None:
    start = time.monotonic()
    _run(kind, starting_server, lambda client: client.wait_until_ready(deadline=30))
    took = time.monotonic() - start
    assert 0.9 <= took < 10, f"ready after {took:.2f} s; the server listened after 1 s"
