"""The fault suite, no unsafe resend (issue 11, classes 2 and 3): no route outside the idempotent set
reaches the server twice, after a 5xx or not, on fresh and reused connections, with max_retries=0 and the
default; 16 threads interleaving failing engine calls with collective_rpc on one client see no
stale-connection failure, and every collective_rpc reaches the engine exactly once.

Against the real vLLM frontends (the plugin's `frontend`, `python_frontend` and `rust_frontend` fixtures,
driven by the scripted engine) where the class applies, and against `MisbehavingServer`
(vllm_devclient/testing/misbehaving.py, the `server` fixture of conftest.py). The whole suite's classes are
listed in fault_answers.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from fault_answers import MODELS, engine_error

from vllm_devclient import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    DevClient,
    DevClientError,
    EngineCallError,
)
from vllm_devclient.testing import Hang as EngineHang
from vllm_devclient.testing import Raise
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer, Close, Reset

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
# Concurrency: failing engine calls interleaved with collective_rpc on one client
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
