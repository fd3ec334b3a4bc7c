"""The fault suite (issue 11): what the SDK promises under faults, on both real frontends and a raw server.

One section per class of the issue, each run against the real vLLM frontends (the plugin's `frontend`,
`python_frontend` and `rust_frontend` fixtures, driven by the scripted engine) where the class applies, and
against `MisbehavingServer` (vllm_devclient/testing/misbehaving.py), which does what no real frontend will:
hang after reading, trickle bytes, reset, close right after answering, echo headers, send 50 MB pages.

1. Deadlines: the barrier, the waits and the fleet barrier return within their deadline plus one short last
   try with every try hanging or a slow-loris server; a per-call `timeout` bounds a whole try (connect,
   head, body). The bounds are README's, from `vllm_devclient.testing.bounds` (which says what the
   scheduling allowance on top of them is for).
2. No unsafe resend: no route outside the idempotent set reaches the server twice, after a 5xx or not, on
   fresh and reused connections, with max_retries=0 and the default.
3. Concurrency: 16 threads interleaving failing engine calls with collective_rpc: no stale-connection
   failure, every collective_rpc reaches the engine exactly once.
4. Credentials: an API key or URL password is never in str/repr of an error, repr(client), an error's
   `.url`, any log record at DEBUG, or the CLI's `--json` output.
5. Raw exceptions: every failure is a DevClientError; its message quotes at most ERROR_TEXT_LIMIT characters
   of what the server sent, and `.body` keeps it all.
6. Bad arguments: refused with InvalidParameterError before anything is sent (the server log stays empty).
7. A dead engine: wait_until_ready raises EngineDeadError at once.
8. KV events: a publisher restart never makes batches vanish silently (vLLM's own ZmqEventPublisher).
9. The frontend label: "rust" only with evidence.

The suite is written against the planned client API (PLAN.md: `deadline=` on the barrier and the waits,
keyword-only options after the first argument).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from vllm_devclient import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncDevClient,
    AsyncFleet,
    BarrierTimeoutError,
    DevClient,
    DevClientError,
    EngineCallError,
    EngineDeadError,
    Fleet,
    InternalServerError,
    InvalidParameterError,
    ResponseValidationError,
    WaitTimeoutError,
)
from vllm_devclient.testing import Hang as EngineHang
from vllm_devclient.testing import Raise, Return, RustFrontend, processes
from vllm_devclient.testing.bounds import ERROR_TEXT_LIMIT, deadline_bound, timeout_bound
from vllm_devclient.testing.misbehaving import (
    Answer,
    Behaviour,
    Close,
    DeepJSON,
    EchoHeader,
    Hang,
    HugeBody,
    MisbehavingServer,
    Reset,
    Trickle,
)

OWN_WORDS = 200  # what an error says besides the server's text: method, path, status, what was cut
SECRET = "sk-faults-SECRET-0123456789"

MODELS = Answer(200, json={"object": "list", "data": [{"id": "m", "object": "model"}]})
COMPLETION = Answer(
    200,
    json={
        "id": "cmpl-1",
        "object": "text_completion",
        "model": "m",
        "choices": [{"index": 0, "text": "x", "finish_reason": "length"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    },
)


def engine_error(method: str = "collective_rpc", status: int = 500, **kw: Any) -> Answer:
    """What the Python frontend answers when an engine call raised (without its `server` header)."""
    error = {
        "message": f"Call to {method} method failed: boom",
        "type": "InternalServerError",
        "param": None,
        "code": status,
    }
    return Answer(status, json={"error": error}, **kw)


@pytest.fixture
def server() -> Iterator[MisbehavingServer]:
    with MisbehavingServer() as srv:
        yield srv


def _within(limit: float, fn: Callable[[], Any], expected: type[BaseException]) -> BaseException:
    """Run fn, which must raise `expected`, and must do so within `limit` seconds."""
    start = time.monotonic()
    error: BaseException | None = None
    try:
        fn()
    except expected as exc:  # anything else propagates as it is
        error = exc
    took = time.monotonic() - start
    outcome = "returned" if error is None else type(error).__name__
    assert took <= limit, f"{outcome} after {took:.2f} s; the bound is {limit:.2f} s"
    assert error is not None, f"returned after {took:.2f} s instead of raising {expected.__name__}"
    return error


def _run(kind: str, url: str, call: Callable[[Any], Any], **client_kw: Any) -> Any:
    """call(client) on a DevClient ("sync") or an AsyncDevClient ("async", awaited), closed afterwards."""
    if kind == "sync":
        with DevClient(url, **client_kw) as client:
            return call(client)

    async def go() -> Any:
        async with AsyncDevClient(url, **client_kw) as client:
            return await call(client)

    return asyncio.run(go())


# ================================================================================================
# 1. Deadlines
# ================================================================================================

PAD = "x" * 60  # makes every trickled answer take seconds at 0.05 s a byte
# A slow loris: every byte within any per-read timeout, the whole answer after seconds.
SLOW_RESET = Trickle(Answer(200, json={"success": False}), part="all", interval=0.05)


@pytest.mark.parametrize("request_timeout", [10.0, 0.4], ids=["try-longer-than-deadline", "short-tries"])
def test_barrier_deadline_holds_when_every_try_hangs(frontend: Any, request_timeout: float) -> None:
    """Every reset hangs in the engine; default retries. The barrier returns within its deadline and its
    attempt count is the number of resets the engine got (no hidden retries inside a try)."""
    frontend.engine.script("reset_prefix_cache", EngineHang())
    with DevClient(frontend.base_url) as client:
        err = _within(
            deadline_bound(1.0),
            lambda: client.reset_prefix_cache_until_success(deadline=1.0, request_timeout=request_timeout),
            BarrierTimeoutError,
        )
    assert isinstance(err, BarrierTimeoutError)
    time.sleep(0.2)  # the last try's request reaches the engine
    sent = len(frontend.engine.calls_for("reset_prefix_cache"))
    assert err.attempts == sent, f"the barrier reports {err.attempts} attempts, the engine got {sent} resets"


def test_barrier_deadline_holds_when_the_engine_step_hangs(frontend: Any) -> None:
    frontend.engine.script("reset_prefix_cache", Return(False))
    frontend.engine.hold_requests = True  # the stepping completion never finishes
    with DevClient(frontend.base_url) as client:
        _within(
            deadline_bound(1.0),
            lambda: client.reset_prefix_cache_until_success(deadline=1.0, request_timeout=10.0),
            BarrierTimeoutError,
        )


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("slow", ["reset", "step"])
def test_barrier_deadline_holds_against_a_slow_loris(server: MisbehavingServer, kind: str, slow: str) -> None:
    server.script("/v1/models", MODELS)
    if slow == "reset":
        server.script("/reset_prefix_cache", SLOW_RESET)
    else:
        server.script("/reset_prefix_cache", Answer(200, json={"success": False}))
        server.script("/v1/completions", Trickle(COMPLETION, part="all", interval=0.05))

    def barrier(client: Any) -> Any:
        return client.reset_prefix_cache_until_success(deadline=1.0, request_timeout=10.0)

    _within(deadline_bound(1.0), lambda: _run(kind, server.base_url, barrier), BarrierTimeoutError)


WAITS = {
    "ready": ("/health", Answer(200, headers={"x-pad": PAD})),
    "sleeping": ("/is_sleeping", Answer(200, json={"is_sleeping": False})),
    "awake": ("/is_sleeping", Answer(200, json={"is_sleeping": True})),
    "paused": ("/is_paused", Answer(200, json={"is_paused": False})),
    "resumed": ("/is_paused", Answer(200, json={"is_paused": True})),
}


@pytest.mark.parametrize("wait", list(WAITS))
def test_wait_deadline_holds_against_a_slow_loris(server: MisbehavingServer, wait: str) -> None:
    path, answer = WAITS[wait]
    server.script(path, Trickle(answer, part="all", interval=0.05))
    with DevClient(server.base_url) as client:
        method = getattr(client, f"wait_until_{wait}")
        _within(deadline_bound(1.0), lambda: method(deadline=1.0, request_timeout=5.0), WaitTimeoutError)


def test_wait_deadline_holds_when_every_probe_hangs(frontend: Any) -> None:
    frontend.engine.script("is_sleeping", EngineHang())
    with DevClient(frontend.base_url) as client:
        _within(
            deadline_bound(1.0),
            lambda: client.wait_until_sleeping(deadline=1.0, request_timeout=5.0),
            WaitTimeoutError,
        )


def test_fleet_barrier_deadline_holds_over_black_holes_and_slow_lorises() -> None:
    """50 targets that accept TCP and never answer, 2 that trickle: every target fails with
    BarrierTimeoutError, and the fleet call returns within the deadline."""
    holes = [MisbehavingServer(mode="never_accept").start() for _ in range(48)]
    holes += [MisbehavingServer(mode="never_read").start() for _ in range(2)]
    lorises = [MisbehavingServer(default=SLOW_RESET).start() for _ in range(2)]
    try:
        with Fleet([s.base_url for s in holes + lorises]) as fleet:
            start = time.monotonic()
            result = fleet.reset_prefix_cache_until_success(deadline=2.0)
            took = time.monotonic() - start
        assert took <= deadline_bound(2.0), f"the fleet barrier took {took:.2f} s for a 2 s deadline"
        assert len(result.failed) == 52
        wrong = {
            url: type(e).__name__ for url, e in result.failed.items() if not isinstance(e, WaitTimeoutError)
        }
        assert not wrong, f"targets that failed other than by the deadline: {wrong}"
    finally:
        for srv in holes + lorises:
            srv.close()


def _fill_backlog(srv: MisbehavingServer) -> list[socket.socket]:
    """Connections that fill a never-accepting server's accept queue, so the next connect hangs."""
    socks = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((srv.host, srv.port))
        socks.append(s)
    time.sleep(0.2)
    return socks


@pytest.mark.parametrize("kind", ["sync", "async"])
@pytest.mark.parametrize("phase", ["connect", "head", "body", "delay-then-body"])
def test_per_call_timeout_bounds_the_whole_try(kind: str, phase: str) -> None:
    """`timeout=1` bounds one try as a whole, not each socket read (max_retries=0: one try)."""
    answer = Answer(200, json={"version": "0.33.0", "pad": PAD})
    behaviours: dict[str, Behaviour] = {
        "head": Trickle(answer, part="head", interval=0.05),
        "body": Trickle(answer, part="body", interval=0.05),
        "delay-then-body": Trickle(
            Answer(200, json={"version": "0.33.0", "pad": PAD}, delay=0.8), part="body", interval=0.05
        ),
    }
    if phase == "connect":
        srv = MisbehavingServer(mode="never_accept", backlog=0).start()
        held = _fill_backlog(srv)
    else:
        srv = MisbehavingServer(default=behaviours[phase]).start()
        held = []
    try:
        _within(
            timeout_bound(1.0),
            lambda: _run(kind, srv.base_url, lambda c: c.version(timeout=1.0), max_retries=0),
            APITimeoutError,
        )
    finally:
        for s in held:
            s.close()
        srv.close()


def test_per_call_timeout_bounds_an_unsafe_call_against_a_slow_loris(server: MisbehavingServer) -> None:
    server.script("/collective_rpc", Trickle(Answer(200, json={"results": [PAD]}), part="all", interval=0.05))
    with DevClient(server.base_url) as client:
        _within(timeout_bound(1.0), lambda: client.collective_rpc("m", timeout=1.0), APITimeoutError)
    assert server.count("/collective_rpc") == 1


@pytest.mark.parametrize("route", ["is_sleeping", "collective_rpc", "step_engine"])
def test_per_call_timeout_ends_a_hung_engine_call(frontend: Any, route: str) -> None:
    if route == "step_engine":
        frontend.engine.hold_requests = True
    else:
        frontend.engine.script(route, EngineHang())
    with DevClient(frontend.base_url, max_retries=0, model=frontend.model) as client:
        call = {
            "is_sleeping": lambda: client.is_sleeping(timeout=0.5),
            "collective_rpc": lambda: client.collective_rpc("m", timeout=0.5),
            "step_engine": lambda: client.step_engine(timeout=0.5),
        }[route]
        _within(timeout_bound(0.5), call, APITimeoutError)


# ================================================================================================
# 2. No unsafe resend
# ================================================================================================

UNSAFE: dict[str, tuple[str, Callable[[DevClient], Any]]] = {
    "collective_rpc": ("/collective_rpc", lambda c: c.collective_rpc("m")),
    "update_weights": ("/update_weights", lambda c: c.update_weights({"names": ["w"]})),
    "start_weight_update": ("/start_weight_update", lambda c: c.start_weight_update()),
    "finish_weight_update": ("/finish_weight_update", lambda c: c.finish_weight_update()),
    "init_weight_transfer_engine": (
        "/init_weight_transfer_engine",
        lambda c: c.init_weight_transfer_engine({}),
    ),
    "abort_requests_all": ("/abort_requests", lambda c: c.abort_requests()),
    "release_kv_cache_memory": ("/release_kv_cache_memory", lambda c: c.release_kv_cache_memory()),
    "step_engine": ("/v1/completions", lambda c: c.step_engine()),
    "completion": ("/v1/completions", lambda c: c.completion("hi")),
}

# What the call before answered: a 5xx then a close (uvicorn after an engine error; the unsafe request goes
# out on a fresh connection once the close has arrived), a 5xx on a kept connection (reused, unless the
# client drops a connection that answered a 5xx), or a 2xx on a kept connection (reused). The race of a
# request sent on a connection the server is closing is the concurrency section's.
BEFORE = {
    "5xx-then-close": engine_error(close_after=0.0),
    "5xx-keep-alive": engine_error(),
    "2xx-keep-alive": Answer(200, json={"version": "0.33.0"}),
}


@pytest.mark.parametrize("max_retries", [0, 2], ids=["max_retries=0", "default-retries"])
@pytest.mark.parametrize("failure", ["close", "reset"])
@pytest.mark.parametrize("before", list(BEFORE))
@pytest.mark.parametrize("route", list(UNSAFE))
def test_an_unsafe_request_that_reached_the_server_is_never_sent_again(
    server: MisbehavingServer, route: str, before: str, failure: str, max_retries: int
) -> None:
    """The server reads the unsafe request, then closes (or resets) without answering: the request
    reached it, so the call fails (APIConnectionError) and is not resent."""
    path, call = UNSAFE[route]
    server.script("/v1/models", MODELS)
    server.script("/version", BEFORE[before])
    server.script(path, Close() if failure == "close" else Reset())
    with DevClient(server.base_url, max_retries=max_retries, model="m") as client:
        try:
            client.version()
        except DevClientError:
            pass
        if before == "5xx-then-close":
            time.sleep(0.05)  # the close has arrived: the unsafe request goes out on a fresh connection
        with pytest.raises(APIConnectionError):
            call(client)
    sent = server.requests_to(path)
    conns = [(r.connection, r.number_on_connection) for r in sent]
    assert sent, (
        f"{route} never reached the server: it went out on a connection the server had closed after its 5xx "
        "(a stale-connection failure) and was not sent again"
    )
    assert len(sent) == 1, f"{route} reached the server {len(sent)} times (connection, nth on it): {conns}"


def test_a_connection_the_server_closed_while_idle_is_not_used() -> None:
    """uvicorn closes idle keep-alive connections (after 5 s); an unsafe call made later goes out once, on
    a new connection, and succeeds."""
    with MisbehavingServer(keep_alive=0.2) as srv:
        srv.script("/version", Answer(200, json={"version": "0.33.0"}))
        srv.script("/collective_rpc", Answer(200, json={"results": [None]}))
        with DevClient(srv.base_url, max_retries=0) as client:
            client.version()
            time.sleep(0.5)
            assert client.collective_rpc("m") == [None]
        (rpc,) = srv.requests_to("/collective_rpc")
        assert rpc.connection == 2 and rpc.number_on_connection == 1


@pytest.mark.parametrize("route", list(UNSAFE))
def test_an_unsafe_route_is_not_retried_after_a_gateway_status(server: MisbehavingServer, route: str) -> None:
    path, call = UNSAFE[route]
    server.script("/v1/models", MODELS)
    for status in (502, 503, 504):
        server.reset()
        server.script("/v1/models", MODELS)
        server.script(path, Answer(status, body="bad gateway"))
        with DevClient(server.base_url, model="m") as client, pytest.raises(APIStatusError):
            call(client)
        assert server.count(path) == 1, f"{route} after a {status}: sent {server.count(path)} times"


FRONTEND_UNSAFE: dict[str, tuple[str, Callable[[DevClient], Any]]] = {
    # The weight routes are engine collective_rpc calls on both frontends.
    "collective_rpc": ("collective_rpc", lambda c: c.collective_rpc("m", timeout=0.2)),
    "update_weights": ("collective_rpc", lambda c: c.update_weights({"names": ["w"]}, timeout=0.2)),
    "start_weight_update": ("collective_rpc", lambda c: c.start_weight_update(timeout=0.2)),
    "finish_weight_update": ("collective_rpc", lambda c: c.finish_weight_update(timeout=0.2)),
    "init_weight_transfer_engine": (
        "collective_rpc",
        lambda c: c.init_weight_transfer_engine({}, timeout=0.2),
    ),
    "release_kv_cache_memory": ("release_kv_cache_memory", lambda c: c.release_kv_cache_memory(timeout=0.2)),
    "step_engine": ("add_request", lambda c: c.step_engine(timeout=0.2)),
    "completion": ("add_request", lambda c: c.completion("hi", timeout=0.2)),
}


@pytest.mark.parametrize("route", list(FRONTEND_UNSAFE))
def test_an_unsafe_call_after_an_engine_error_reaches_the_engine_once(frontend: Any, route: str) -> None:
    """An engine error (500; the Python frontend then closes the connection), then an unsafe call whose
    engine call hangs until the client's timeout: the engine got it exactly once (default retries)."""
    method, call = FRONTEND_UNSAFE[route]
    engine = frontend.engine
    engine.script("reset_prefix_cache", Raise("boom"))
    if method == "add_request":
        engine.hold_requests = True
    else:
        engine.script(method, EngineHang())
    with DevClient(frontend.base_url, model=frontend.model) as client:
        with pytest.raises(EngineCallError):
            client.reset_prefix_cache()
        with pytest.raises(APITimeoutError):
            call(client)
    time.sleep(0.1)
    got = engine.requests_added if method == "add_request" else len(engine.calls_for(method))
    assert got == 1, f"{route}: the engine got {got} {method} calls"


# ================================================================================================
# 3. Concurrency: failing engine calls interleaved with collective_rpc on one client
# ================================================================================================

THREADS, ROUNDS = 16, 25


def _interleave(client: DevClient) -> tuple[int, list[str]]:
    """16 threads: a failing reset_prefix_cache, then a collective_rpc, 25 times. (rpc successes, errors)"""
    ok = [0]
    errors: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(ROUNDS):
            try:
                client.reset_prefix_cache()
            except APIStatusError:
                pass  # the engine error itself
            except DevClientError as exc:
                with lock:
                    errors.append(f"reset_prefix_cache: {type(exc).__name__}: {exc}")
            try:
                client.collective_rpc("echo")
            except DevClientError as exc:
                with lock:
                    errors.append(f"collective_rpc: {type(exc).__name__}: {exc}")
            else:
                with lock:
                    ok[0] += 1

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ok[0], errors


def test_concurrent_engine_errors_cause_no_stale_connection_failure(frontend: Any) -> None:
    frontend.engine.script("reset_prefix_cache", Raise("boom"))
    with DevClient(frontend.base_url) as client:
        ok, errors = _interleave(client)
    reached = len(frontend.engine.calls_for("collective_rpc"))
    assert not errors, f"{len(errors)} failures, e.g. {errors[:3]}"
    assert ok == reached == THREADS * ROUNDS, f"{ok} succeeded, {reached} reached the engine"


def test_concurrent_close_after_5xx_causes_no_stale_connection_failure(server: MisbehavingServer) -> None:
    """uvicorn's race, exaggerated: the connection that answered a 500 closes 2 ms later, unread."""
    server.script("/reset_prefix_cache", engine_error("reset_prefix_cache", close_after=0.002))
    server.script("/collective_rpc", Answer(200, json={"results": [None]}))
    with DevClient(server.base_url) as client:
        ok, errors = _interleave(client)
    reached = server.count("/collective_rpc")
    assert not errors, f"{len(errors)} failures, e.g. {errors[:3]}"
    assert ok == reached == THREADS * ROUNDS, f"{ok} succeeded, {reached} reached the server"


# ================================================================================================
# 4. Credentials
# ================================================================================================

KEYS = {
    "newline-key": SECRET + "\n",  # what a key read from a file or a Kubernetes secret has
    "non-ascii-key": SECRET + "-ключ",
}


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Every logger at DEBUG (httpx, httpcore, ours, any other), captured."""
    loggers = [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    saved = [(lg, lg.level, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
        lg.disabled = False
    caplog.set_level(logging.DEBUG)
    yield caplog
    for lg, level, disabled in saved:
        lg.setLevel(level)
        lg.disabled = disabled


def _log_text(caplog: pytest.LogCaptureFixture) -> str:
    parts = [caplog.text]
    for record in caplog.records:
        parts.append(record.getMessage())
        parts.append(repr(record.args))
    return "\n".join(parts)


def _leaks(client: Any, errors: list[BaseException], caplog: pytest.LogCaptureFixture) -> list[str]:
    found = []
    if client is not None and SECRET in repr(client):
        found.append(f"repr(client): {client!r}")
    for exc in errors:
        for where, text in (("str", str(exc)), ("repr", repr(exc)), (".url", str(getattr(exc, "url", "")))):
            if SECRET in text:
                found.append(f"{where}({type(exc).__name__}): {text[:300]}")
    if SECRET in _log_text(caplog):
        found.append("a log record at DEBUG")
    return found


def _exercise(url: str, api_key: str | None, model: str) -> tuple[Any, list[BaseException]]:
    """A success, an engine error and a timeout, with these credentials: (client or None, errors)."""
    errors: list[BaseException] = []
    try:
        client = DevClient(url, api_key=api_key, max_retries=0, model=model)
    except BaseException as exc:  # refusing the key up front is fine, if typed and silent about it
        return None, [exc]
    with client:
        for call in (
            client.models,
            lambda: client.collective_rpc("m"),
            lambda: client.is_sleeping(timeout=0.3),
        ):
            try:
                call()
            except BaseException as exc:
                errors.append(exc)
    return client, errors


def _target(request: pytest.FixtureRequest, name: str) -> tuple[str, str]:
    """(base URL, model) of a target set up to answer models(), fail collective_rpc, hang is_sleeping."""
    if name == "raw":
        srv = MisbehavingServer().start()
        request.addfinalizer(srv.close)
        srv.script("/v1/models", MODELS)
        srv.script("/collective_rpc", engine_error())
        srv.script("/is_sleeping", Hang())
        return srv.base_url, "m"
    fe = request.getfixturevalue(f"{name}_frontend")
    fe.engine.reset()
    request.addfinalizer(fe.engine.reset)
    fe.engine.script("collective_rpc", Raise("boom"))
    fe.engine.script("is_sleeping", EngineHang())
    return fe.base_url, fe.model


def _with_password(url: str) -> str:
    return url.replace("http://", f"http://user:{SECRET}@", 1)


@pytest.mark.parametrize("target", ["raw", "python", "rust"])
@pytest.mark.parametrize("case", [*KEYS, "password-in-url"])
def test_credentials_never_leak(
    request: pytest.FixtureRequest, debug_logs: pytest.LogCaptureFixture, case: str, target: str
) -> None:
    url, model = _target(request, target)
    if case == "password-in-url":
        client, errors = _exercise(_with_password(url), None, model)
    else:
        client, errors = _exercise(url, KEYS[case], model)
    raw = [f"{type(e).__name__}: {e!s:.200}" for e in errors if not isinstance(e, DevClientError)]
    assert not raw, f"raw exceptions escaped: {raw}"
    leaks = _leaks(client, errors, debug_logs)
    assert not leaks, "the secret leaked:\n" + "\n".join(leaks)


def test_a_url_password_never_leaks_from_a_connection_error(debug_logs: pytest.LogCaptureFixture) -> None:
    with MisbehavingServer() as gone:
        port = gone.port
    client = DevClient(_with_password(f"http://127.0.0.1:{port}"), max_retries=0)
    with pytest.raises(APIConnectionError) as info:
        client.health()
    client.close()
    leaks = _leaks(client, [info.value], debug_logs)
    assert not leaks, "the secret leaked:\n" + "\n".join(leaks)


def test_a_key_echoed_by_the_server_is_not_repeated(
    server: MisbehavingServer, debug_logs: pytest.LogCaptureFixture
) -> None:
    server.script("/v1/models", EchoHeader("authorization", status=401))
    server.script("/collective_rpc", EchoHeader("authorization", status=500))
    errors: list[BaseException] = []
    with DevClient(server.base_url, api_key=SECRET, max_retries=0) as client:
        for call in (client.models, lambda: client.collective_rpc("m")):
            with pytest.raises(APIStatusError) as info:
                call()
            errors.append(info.value)
    assert server.requests[0].header("authorization") == f"Bearer {SECRET}"  # it was echoed
    leaks = _leaks(client, errors, debug_logs)
    assert not leaks, "the secret leaked:\n" + "\n".join(leaks)


CLI = str(Path(sys.executable).with_name("vllm-devclient"))


@pytest.mark.parametrize("case", [*KEYS, "password-in-url", "echoed-key"])
def test_the_cli_json_output_never_shows_the_key(server: MisbehavingServer, case: str) -> None:
    server.script("/v1/models", EchoHeader("authorization") if case == "echoed-key" else MODELS)
    url, key = server.base_url, SECRET
    if case in KEYS:
        key = KEYS[case]
    elif case == "password-in-url":
        url, key = _with_password(url), "sk-unrelated"
    proc = subprocess.run(
        [CLI, "--url", url, "--api-key", key, "--json", "--timeout", "2", "--retries", "0", "models"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = proc.stdout + proc.stderr
    assert SECRET not in out, f"the secret is in the CLI output:\n{out[:2000]}"
    assert "Traceback" not in out, f"the CLI crashed (exit {proc.returncode}):\n{out[-2000:]}"


# ================================================================================================
# 5. Raw exceptions
# ================================================================================================

JSON_ROUTES: dict[str, tuple[str, Callable[[DevClient], Any]]] = {
    "version": ("/version", lambda c: c.version()),
    "models": ("/v1/models", lambda c: c.models()),
    "server_info": ("/server_info", lambda c: c.server_info()),
    "is_sleeping": ("/is_sleeping", lambda c: c.is_sleeping()),
    "collective_rpc": ("/collective_rpc", lambda c: c.collective_rpc("m")),
    "kv_event_sources": ("/kv_event_sources", lambda c: c.kv_event_sources()),
    "reset_prefix_cache": ("/reset_prefix_cache", lambda c: c.reset_prefix_cache()),
    "barrier": ("/reset_prefix_cache", lambda c: c.reset_prefix_cache_until_success(deadline=2.0)),
}


@pytest.mark.parametrize("route", list(JSON_ROUTES))
def test_deeply_nested_json_is_a_validation_error(server: MisbehavingServer, route: str) -> None:
    path, call = JSON_ROUTES[route]
    server.script(path, DeepJSON(depth=100_000))
    with (
        DevClient(server.base_url, max_retries=0, model="m") as client,
        pytest.raises(ResponseValidationError),
    ):
        call(client)


def test_deeply_nested_json_in_an_error_is_a_status_error(server: MisbehavingServer) -> None:
    server.script("/collective_rpc", DeepJSON(depth=100_000, status=500))
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(InternalServerError) as info:
        client.collective_rpc("m")
    assert info.value.status_code == 500


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_call_after_close_is_a_devclient_error(server: MisbehavingServer, kind: str) -> None:
    if kind == "sync":
        client = DevClient(server.base_url)
        client.close()
        with pytest.raises(DevClientError):
            client.health()
    else:

        async def go() -> None:
            aclient = AsyncDevClient(server.base_url)
            await aclient.close()
            await aclient.health()

        with pytest.raises(DevClientError):
            asyncio.run(go())
    assert server.requests == [] and server.connections == 0


def test_a_call_after_close_is_a_devclient_error_on_a_frontend(frontend: Any) -> None:
    client = DevClient(frontend.base_url)
    client.close()
    with pytest.raises(DevClientError):
        client.collective_rpc("m")
    assert frontend.engine.calls == []


def test_a_closed_async_fleet_gives_devclient_errors(server: MisbehavingServer) -> None:
    async def go() -> list[Any]:
        fleet = AsyncFleet([server.base_url])
        await fleet.close()
        try:
            result = await fleet.health()
        except DevClientError as exc:
            return [exc]
        return [o.error for o in result.values()]

    errors = asyncio.run(go())
    assert errors and all(isinstance(e, DevClientError) for e in errors), errors
    assert server.requests == []


@pytest.mark.parametrize("status", [400, 500, 503, 200])
def test_a_50_mb_error_page_gives_a_bounded_error_text(server: MisbehavingServer, status: int) -> None:
    server.script("/collective_rpc", HugeBody(status))  # README quotes its size
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(DevClientError) as info:
        client.collective_rpc("m")
    err = info.value
    body = getattr(err, "body", None)
    assert isinstance(body, str) and len(body) == HugeBody.size, "`.body` keeps the whole page"
    for text in (str(err), repr(err)):
        assert body[: ERROR_TEXT_LIMIT + 1] not in text, f"{type(err).__name__} quotes more of the page"
        assert len(text) <= ERROR_TEXT_LIMIT + OWN_WORDS, f"{type(err).__name__}: {len(text):,} characters"


@pytest.mark.parametrize(
    "payload",
    [{"0": None}, {"sources": {"0": None}}, {"0": []}, {"0": {"endpoint": None}}],
    ids=["null-source", "nested-null-source", "list-source", "null-endpoint"],
)
def test_a_malformed_kv_event_source_is_a_validation_error(server: MisbehavingServer, payload: Any) -> None:
    server.script("/kv_event_sources", Answer(200, json=payload))
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(ResponseValidationError):
        client.kv_event_sources()


# ================================================================================================
# 6. Bad arguments: InvalidParameterError before anything is sent
# ================================================================================================

NAN, INF = float("nan"), float("inf")

BAD_ARGUMENTS: dict[str, Callable[[DevClient, str], Any]] = {
    # per-call timeouts
    "health(timeout=-1)": lambda c, u: c.health(timeout=-1),
    "health(timeout=nan)": lambda c, u: c.health(timeout=NAN),
    "health(timeout='5')": lambda c, u: c.health(timeout="5"),  # type: ignore[arg-type]
    "health(timeout=True)": lambda c, u: c.health(timeout=True),
    "collective_rpc(timeout=-1)": lambda c, u: c.collective_rpc("m", timeout=-1),
    "collective_rpc(timeout=nan)": lambda c, u: c.collective_rpc("m", timeout=NAN),
    # client timeouts
    "DevClient(timeout=-1)": lambda c, u: DevClient(u, timeout=-1).health(),
    "DevClient(timeout='30')": lambda c, u: DevClient(u, timeout="30").health(),  # type: ignore[arg-type]
    "DevClient(timeout=nan)": lambda c, u: DevClient(u, timeout=NAN).health(),
    "with_options(timeout=-1)": lambda c, u: c.with_options(timeout=-1).health(),
    "with_options(timeout='30')": lambda c, u: c.with_options(timeout="30").health(),  # type: ignore[arg-type]
    # collective_rpc
    "collective_rpc(args='abc')": lambda c, u: c.collective_rpc("m", args="abc"),
    "collective_rpc(args=[nan])": lambda c, u: c.collective_rpc("m", args=[NAN]),
    "collective_rpc(args=[inf])": lambda c, u: c.collective_rpc("m", args=[INF]),
    "collective_rpc(kwargs={'x': nan})": lambda c, u: c.collective_rpc("m", kwargs={"x": NAN}),
    "collective_rpc(kwargs=[1, 2])": lambda c, u: c.collective_rpc("m", kwargs=[1, 2]),  # type: ignore[arg-type]
    "collective_rpc(rpc_timeout=nan)": lambda c, u: c.collective_rpc("m", rpc_timeout=NAN),
    "collective_rpc(rpc_timeout=-1)": lambda c, u: c.collective_rpc("m", rpc_timeout=-1),
    "collective_rpc(rpc_timeout='5')": lambda c, u: c.collective_rpc("m", rpc_timeout="5"),  # type: ignore[arg-type]
    # other routes
    "wake_up(5)": lambda c, u: c.wake_up(5),  # type: ignore[arg-type]
    "abort_requests(5)": lambda c, u: c.abort_requests(5),  # type: ignore[arg-type]
    "update_weights(5)": lambda c, u: c.update_weights(5),  # type: ignore[arg-type]
    "update_weights({'x': inf})": lambda c, u: c.update_weights({"x": INF}),
    "init_weight_transfer_engine({'x': nan})": lambda c, u: c.init_weight_transfer_engine({"x": NAN}),
    "finish_weight_update(weight_version=5)": lambda c, u: c.finish_weight_update(weight_version=5),  # type: ignore[arg-type]
    "completion(temperature=nan)": lambda c, u: c.completion("x", model="m", temperature=NAN),
    "completion(max_tokens=True)": lambda c, u: c.completion("x", model="m", max_tokens=True),
    "completion(max_tokens='16')": lambda c, u: c.completion("x", model="m", max_tokens="16"),  # type: ignore[arg-type]
    # the barrier and the waits
    "barrier(interval=nan)": lambda c, u: c.reset_prefix_cache_until_success(interval=NAN),
    "barrier(interval=0)": lambda c, u: c.reset_prefix_cache_until_success(interval=0),
    "barrier(interval=-1)": lambda c, u: c.reset_prefix_cache_until_success(interval=-1),
    "barrier(max_interval=nan)": lambda c, u: c.reset_prefix_cache_until_success(max_interval=NAN),
    "barrier(deadline=nan)": lambda c, u: c.reset_prefix_cache_until_success(deadline=NAN),
    "barrier(deadline=-1)": lambda c, u: c.reset_prefix_cache_until_success(deadline=-1),
    "barrier(request_timeout=nan)": lambda c, u: c.reset_prefix_cache_until_success(request_timeout=NAN),
    "barrier(request_timeout=-1)": lambda c, u: c.reset_prefix_cache_until_success(request_timeout=-1),
    "wait_until_sleeping(interval=nan)": lambda c, u: c.wait_until_sleeping(interval=NAN),
    "wait_until_ready(request_timeout=nan)": lambda c, u: c.wait_until_ready(request_timeout=NAN),
    "wait_until_ready(deadline=nan)": lambda c, u: c.wait_until_ready(deadline=NAN),
    # the escape hatch's path: one plain path (a NUL used to reach the transport and fail there)
    "request(path with NUL)": lambda c, u: c.request("GET", "/health\x00x"),
    "request(path with CR LF)": lambda c, u: c.request("GET", "/health\r\nX-Injected: 1"),
    "request(path with a tab)": lambda c, u: c.request("GET", "/health\tx"),
    "request(path with DEL)": lambda c, u: c.request("GET", "/health\x7f"),
    # base URLs
    "DevClient('http://')": lambda c, u: DevClient("http://").health(),
    "DevClient(url + '?token=x')": lambda c, u: DevClient(u + "?token=x").health(),
    "DevClient(url + '#frag')": lambda c, u: DevClient(u + "#frag").health(),
    "DevClient('ftp://h')": lambda c, u: DevClient("ftp://h").health(),
    "DevClient('')": lambda c, u: DevClient("").health(),
    "DevClient('http://127.0.0.1:99999')": lambda c, u: DevClient("http://127.0.0.1:99999").health(),
    "Fleet([url + '?token=x'])": lambda c, u: Fleet([u + "?token=x"]).health(),
}


@pytest.mark.parametrize("case", list(BAD_ARGUMENTS))
def test_a_bad_argument_is_refused_before_anything_is_sent(server: MisbehavingServer, case: str) -> None:
    # Were anything sent, it would succeed at once: the routes answer what the calls wait for.
    server.script("/reset_prefix_cache", Answer(200, json={"success": True}))
    server.script("/is_sleeping", Answer(200, json={"is_sleeping": True}))
    server.script("/v1/completions", COMPLETION)
    server.default = Answer(200, json={})
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(InvalidParameterError):
        BAD_ARGUMENTS[case](client, server.base_url)
    sent = [r.target for r in server.requests]
    assert not sent and server.connections == 0, f"sent before refusing: {sent}"


# ================================================================================================
# 7. A dead engine
# ================================================================================================


def test_wait_until_ready_raises_engine_dead_at_once(server: MisbehavingServer) -> None:
    server.script("/health", Answer(503))
    with DevClient(server.base_url) as client:
        _within(1.0, lambda: client.wait_until_ready(deadline=5.0), EngineDeadError)


def test_wait_until_ready_raises_engine_dead_on_the_rust_frontend(tiny_model_dir: Path) -> None:
    with RustFrontend(model_dir=tiny_model_dir) as fe:  # its own: a dead engine stays dead
        fe.engine.declare_dead()
        with DevClient(fe.base_url) as client:
            deadline = time.monotonic() + 10
            while True:  # until the frontend has noticed
                try:
                    client.health()
                except EngineDeadError:
                    break
                assert time.monotonic() < deadline, "/health never answered 503"
                time.sleep(0.05)
            _within(1.0, lambda: client.wait_until_ready(deadline=5.0), EngineDeadError)


# ================================================================================================
# 8. KV events: publisher restarts (vLLM's own ZmqEventPublisher)
# ================================================================================================

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def vkv() -> ModuleType:
    """vllm.distributed.kv_events (imports torch: several seconds, once per module)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.fail("vllm is not installed: run `make setup`")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module("vllm.distributed.kv_events")


@pytest.fixture
def publishers(vkv: ModuleType) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def make(**kw: Any) -> Any:
        pub = vkv.ZmqEventPublisher(0, **kw)
        made.append(pub)
        return pub

    yield make
    for pub in made:
        if pub._running:
            pub.shutdown()


def _free_port() -> int:
    return processes.free_port(HOST)


def _wait_until_bindable(*ports: int) -> None:
    processes.wait_until_bindable(HOST, *ports)


def _batch(vkv: ModuleType, block_hash: int) -> Any:
    stored = vkv.BlockStored(
        block_hashes=[block_hash],
        parent_block_hash=None,
        token_ids=[1, 2, 3],
        block_size=16,
        lora_id=None,
        medium="GPU",
        lora_name=None,
    )
    return vkv.KVEventBatch(ts=time.time(), events=[stored])


def _connect(sub: Any, pub: Any, vkv: ModuleType) -> list[Any]:
    """Publish until the subscriber receives a batch (its SUB may still be joining), then drain."""
    got = []
    for i in range(50):
        pub.publish(_batch(vkv, i))
        b = sub.poll(0.1)
        if b is not None:
            got.append(b)
            break
    assert got, "the subscriber never received a batch"
    return got + _drain(sub, 0.3)


def _drain(sub: Any, quiet: float = 1.0) -> list[Any]:
    out = []
    while (b := sub.poll(quiet)) is not None:
        out.append(b)
    return out


NEW = 1000  # block hashes of the new publisher's batches: NEW + its sequence number


def _unaccounted(got: list[Any], published: int) -> tuple[list[int], list[int]]:
    """The new publisher's sequence numbers neither delivered nor reported lost; and those delivered
    twice. A delivered batch must carry its own sequence number (hash NEW + seq)."""
    delivered: list[int] = []
    lost: set[int] = set()
    for b in got:
        for loss in b.losses:
            lost.update(range(loss.first_seq, loss.last_seq + 1))
        for event in b.events:
            h = event.block_hashes[0]
            if h >= NEW:
                assert b.seq == h - NEW, f"batch {h - NEW} of the new publisher delivered as seq {b.seq}"
                delivered.append(b.seq)
    missing = sorted(set(range(published)) - set(delivered) - lost)
    twice = sorted({s for s in delivered if delivered.count(s) > 1})
    return missing, twice


def _endpoints() -> tuple[dict[str, str], dict[str, str]]:
    port, replay = _free_port(), _free_port()
    pub_kw = {"endpoint": f"tcp://*:{port}", "replay_endpoint": f"tcp://*:{replay}"}
    sub_kw = {"endpoint": f"tcp://{HOST}:{port}", "replay_endpoint": f"tcp://{HOST}:{replay}"}
    return pub_kw, sub_kw


def _restart(pub: Any, publishers: Callable[..., Any], pub_kw: dict[str, str]) -> Any:
    pub.shutdown()
    ports = [int(pub_kw[k].rsplit(":", 1)[1]) for k in ("endpoint", "replay_endpoint")]
    _wait_until_bindable(*ports)
    return publishers(**pub_kw)


def test_a_restart_whose_first_batches_were_missed_is_reported(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    """The old publisher got to seq 15; the new one sends 30 batches before the subscriber reconnects,
    then 5 it sees: a live seq above the old one's, so no lower number betrays the restart."""
    from vllm_devclient.kv_events import KVEventSubscriber

    pub_kw, sub_kw = _endpoints()
    pub = publishers(**pub_kw)
    with KVEventSubscriber(sub_kw["endpoint"], replay_endpoint=sub_kw["replay_endpoint"]) as sub:
        before = _connect(sub, pub, vkv)
        for i in range(15 - len(before)):
            pub.publish(_batch(vkv, 100 + i))
        before += _drain(sub, 0.3)
        pub2 = _restart(pub, publishers, pub_kw)
        for i in range(30):
            pub2.publish(_batch(vkv, NEW + i))
        time.sleep(0.5)
        for i in range(30, 35):
            pub2.publish(_batch(vkv, NEW + i))
        got = _drain(sub)
        missing, twice = _unaccounted(got, 35)
        assert not missing, f"{len(missing)} batches of the new publisher vanished silently: {missing}"
        assert not twice, f"delivered twice: {twice}"
        assert sub.restarts, "the restart was not reported"


def test_a_restart_while_the_subscriber_is_busy_loses_nothing_silently(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    """The subscriber reads nothing while the old publisher sends 20 more and stops, and the new one
    sends 40: once it reads again, every batch of both is delivered or reported."""
    from vllm_devclient.kv_events import KVEventSubscriber

    pub_kw, sub_kw = _endpoints()
    pub = publishers(**pub_kw)
    with KVEventSubscriber(sub_kw["endpoint"], replay_endpoint=sub_kw["replay_endpoint"]) as sub:
        before = _connect(sub, pub, vkv)
        first_old = before[-1].seq + 1
        for i in range(20):  # busy: nothing is read
            pub.publish(_batch(vkv, 500 + i))
        time.sleep(0.2)
        pub2 = _restart(pub, publishers, pub_kw)
        for i in range(40):
            pub2.publish(_batch(vkv, NEW + i))
            time.sleep(0.01)
        time.sleep(0.3)
        got = _drain(sub)
        old = [b.seq for b in got if b.events and 500 <= b.events[0].block_hashes[0] < NEW]
        old_lost = {s for b in got for x in b.losses for s in range(x.first_seq, x.last_seq + 1)}
        old_missing = sorted(set(range(first_old, first_old + 20)) - set(old) - old_lost)
        assert not old_missing, f"old publisher's batches vanished: {old_missing}"
        missing, twice = _unaccounted(got, 40)
        assert not missing, f"{len(missing)} batches of the new publisher vanished silently: {missing}"
        assert not twice, f"delivered twice: {twice}"
        assert sub.restarts, "the restart was not reported"


def test_a_new_publisher_denied_replay_by_an_old_backoff_reports_replay_unavailable(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    """The old publisher's replay timed out (it was gone), so replay backs off; the new publisher
    restarts within the backoff. Its missed first batches must be replayed (the backoff belonged to the
    old publisher) or reported as `replay_unavailable`: the new one was never asked, so never timed out."""
    from vllm_devclient.kv_events import KVEventSubscriber

    pub_kw, sub_kw = _endpoints()
    pub = publishers(**pub_kw)
    with KVEventSubscriber(
        sub_kw["endpoint"], replay_endpoint=sub_kw["replay_endpoint"], replay_timeout=1.5, probe_interval=0.2
    ) as sub:
        before = _connect(sub, pub, vkv)
        for i in range(50 - len(before)):
            pub.publish(_batch(vkv, 100 + i))
        _drain(sub, 0.3)
        pub.shutdown()
        start = time.monotonic()
        while sub.stats.replay_timeouts == 0 and time.monotonic() - start < 5:
            sub.poll(0.05)  # the idle probe asks the gone publisher, and times out
        assert sub.stats.replay_timeouts >= 1, "setup: the probe of the gone publisher did not time out"
        pub2 = _restart(pub, publishers, pub_kw)
        for i in range(10):
            pub2.publish(_batch(vkv, NEW + i))
        time.sleep(0.4)
        pub2.publish(_batch(vkv, NEW + 10))
        got = _drain(sub, 0.5)
        missing, twice = _unaccounted(got, 11)
        assert not missing and not twice, f"vanished {missing}, twice {twice}"
        reasons = {loss.reason for b in got for loss in b.losses}
        assert "replay_timeout" not in reasons, (
            f"losses reported as {reasons}: the new publisher never timed out"
        )


# ================================================================================================
# 9. The frontend label
# ================================================================================================


@pytest.mark.parametrize(
    "answer",
    [
        Answer(500, body="Internal Server Error"),
        Answer(502, body="<html><body>Bad Gateway</body></html>", headers={"content-type": "text/html"}),
        Answer(500, json={"error": {"message": "boom", "type": "InternalServerError"}}),
        Answer(503, json={"detail": "overloaded"}),
    ],
    ids=["plain-500", "html-502", "json-500", "json-503"],
)
def test_a_server_without_a_server_header_is_not_labelled_rust(
    server: MisbehavingServer, answer: Answer
) -> None:
    server.script("/reset_mm_cache", answer)
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(APIStatusError) as info:
        client.reset_mm_cache()
    assert info.value.frontend == "unknown", f"labelled {info.value.frontend!r} without evidence"


def test_uvicorn_is_labelled_python(server: MisbehavingServer) -> None:
    server.script("/reset_mm_cache", Answer(500, body="Internal Server Error", server="uvicorn"))
    with DevClient(server.base_url, max_retries=0) as client, pytest.raises(APIStatusError) as info:
        client.reset_mm_cache()
    assert info.value.frontend == "python"


def test_each_real_frontend_is_labelled_as_itself(frontend: Any) -> None:
    frontend.engine.script("reset_prefix_cache", Raise("boom"))
    with DevClient(frontend.base_url) as client, pytest.raises(EngineCallError) as info:
        client.reset_prefix_cache()
    assert info.value.frontend == frontend.frontend
