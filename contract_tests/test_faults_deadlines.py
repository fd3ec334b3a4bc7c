"""The fault suite, deadlines (issue 11, classes 1 and 7): the barrier, the waits and the fleet barrier
return within their deadline plus one short last try with every try hanging or a slow-loris server; a
per-call `timeout` bounds a whole try (connect, head, body); with a dead engine, wait_until_ready raises
EngineDeadError at once. The bounds are README's, from `vllm_devclient.testing.bounds` (which says what
the scheduling allowance on top of them is for).

Against the real vLLM frontends (the plugin's `frontend`, `python_frontend` and `rust_frontend` fixtures,
driven by the scripted engine) where the class applies, and against `MisbehavingServer`
(vllm_devclient/testing/misbehaving.py, the `server` fixture of conftest.py). The whole suite's classes are
listed in fault_answers.py.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fault_answers import COMPLETION, MODELS

from vllm_devclient import (
    APITimeoutError,
    AsyncDevClient,
    BarrierTimeoutError,
    DevClient,
    EngineDeadError,
    Fleet,
    WaitTimeoutError,
)
from vllm_devclient.testing import Hang as EngineHang
from vllm_devclient.testing import Return, RustFrontend
from vllm_devclient.testing.bounds import deadline_bound, timeout_bound
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer, Behaviour, Trickle


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


# The clients: sync (the h11 socket pool), async (aiohttp's pool, installed here) and async on the SDK's own
# asyncio pool (what an install without aiohttp uses).
KINDS = ["sync", "async", "async-h11"]


def _run(kind: str, url: str, call: Callable[[Any], Any], **client_kw: Any) -> Any:
    """call(client) on a DevClient ("sync") or an AsyncDevClient ("async", "async-h11": on the asyncio pool;
    awaited), closed afterwards."""
    if kind == "async-h11":
        client_kw["transport"] = "h11"
    if kind == "sync":
        with DevClient(url, **client_kw) as client:
            return call(client)

    async def go() -> Any:
        async with AsyncDevClient(url, **client_kw) as client:
            return await call(client)

    return asyncio.run(go())


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


@pytest.mark.parametrize("kind", KINDS)
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


@pytest.mark.parametrize("transport", ["auto", "h11"])
def test_fleet_barrier_deadline_holds_over_black_holes_and_slow_lorises(
    transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """50 targets that accept TCP and never answer, 2 that trickle: every target fails with
    BarrierTimeoutError, and the fleet call returns within the deadline (on aiohttp's pool and on the
    SDK's asyncio pool)."""
    monkeypatch.setenv("VLLM_DEVCLIENT_TRANSPORT", transport)
    holes = [MisbehavingServer(mode="never_accept").start() for _ in range(48)]
    holes += [MisbehavingServer(mode="never_read").start() for _ in range(2)]
    lorises = [MisbehavingServer(default=SLOW_RESET).start() for _ in range(2)]
    try:
        with Fleet([s.base_url for s in holes + lorises], raise_on_error=False) as fleet:
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


@pytest.mark.parametrize("kind", KINDS)
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
# A dead engine
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
