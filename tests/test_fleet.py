"""Fleet / AsyncFleet logic against in-process mock transports (the live fleet is in contract_tests)."""

from __future__ import annotations

import asyncio
import inspect
import pydoc
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
import respx

from vllm_devclient import (
    APIConnectionError,
    AsyncDevClient,
    BarrierTimeoutError,
    ClientClosedError,
    DevClientError,
    DevModeDisabledError,
    EngineCallError,
    InvalidParameterError,
    ResetPrefixCacheResult,
)
from vllm_devclient.fleet import CLIENT_METHODS, AsyncFleet, Fleet, FleetError, FleetResult, TargetOutcome

URLS = [f"http://node{i}.test" for i in range(4)]
Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def fleet_over(handler: Handler, urls: list[str] = URLS, **kw: Any) -> AsyncFleet:
    """An AsyncFleet whose shared pool answers through `handler` (an async function of the request)."""
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return AsyncFleet(urls, http_client=http, max_retries=0, **kw)


def engine_failure(method: str, message: str) -> httpx.Response:
    body = {"error": {"message": f"Call to {method} method failed: {message}", "type": "InternalServerError"}}
    return httpx.Response(500, json=body, headers={"server": "uvicorn"})


class Recorder:
    """Answers per host from a table, and records which host saw which path."""

    def __init__(self, answers: dict[tuple[str, str], httpx.Response | Exception]) -> None:
        self.answers = answers
        self.seen: list[tuple[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay = 0.0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        key = (request.url.host, request.url.path)
        self.seen.append(key)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            answer = self.answers.get(key, httpx.Response(200, json={"status": "ok"}))
        finally:
            self.in_flight -= 1
        if isinstance(answer, Exception):
            raise answer
        return answer


async def test_every_target_gets_an_outcome_in_fleet_order() -> None:
    rec = Recorder(
        {
            ("node0.test", "/reset_prefix_cache"): httpx.Response(200, json={"success": True}),
            ("node1.test", "/reset_prefix_cache"): httpx.Response(404),
            ("node2.test", "/reset_prefix_cache"): httpx.ConnectError("refused"),
            ("node3.test", "/reset_prefix_cache"): engine_failure("reset_prefix_cache", "boom"),
        }
    )
    async with fleet_over(rec, raise_on_error=False) as fleet:
        result = await fleet.reset_prefix_cache(reset_external=True)
    assert list(result) == URLS
    assert result.ok == {URLS[0]: ResetPrefixCacheResult(success=True)}
    assert isinstance(result.failed[URLS[1]], DevModeDisabledError)
    assert isinstance(result.failed[URLS[2]], APIConnectionError)
    err = result.failed[URLS[3]]
    assert isinstance(err, EngineCallError) and err.engine_message == "boom"
    assert not result.all_ok
    assert result.operation == "reset_prefix_cache"
    # A trailing slash finds the same target.
    assert result[URLS[0] + "/"].ok
    assert result[URLS[0]].unwrap() == ResetPrefixCacheResult(success=True)
    with pytest.raises(DevModeDisabledError):
        result[URLS[1]].unwrap()


async def test_raise_for_errors_names_every_failed_target() -> None:
    rec = Recorder(
        {
            ("node1.test", "/health"): httpx.ConnectError("refused"),
            ("node3.test", "/health"): httpx.Response(503, text="dead"),
        }
    )
    async with fleet_over(rec, raise_on_error=False) as fleet:
        result = await fleet.health()
    with pytest.raises(FleetError) as caught:
        result.raise_for_errors()
    error = caught.value
    assert isinstance(error, DevClientError)
    assert set(error.errors) == {URLS[1], URLS[3]}
    text = str(error)
    assert "health failed on 2 of 4 targets" in text
    assert f"{URLS[1]}: APIConnectionError" in text and f"{URLS[3]}: EngineDeadError" in text
    assert f"ok on 2 of 4 targets: {URLS[0]}, {URLS[2]}" in text


async def test_a_fleet_call_is_all_or_nothing_by_default_with_every_outcome_on_the_error() -> None:
    rec = Recorder({(f"node{i}.test", "/is_paused"): _paused(False) for i in range(4)})
    rec.answers[("node2.test", "/is_paused")] = httpx.Response(404)
    async with fleet_over(rec) as fleet:
        assert fleet.raise_on_error
        with pytest.raises(FleetError) as caught:
            await fleet.is_paused()
        assert list(caught.value.errors) == [URLS[2]]
        # Every target's outcome is on the error: the values where the call went through too.
        assert list(caught.value.result) == URLS
        assert caught.value.result.ok == {u: False for u in URLS if u != URLS[2]}
        rec.answers[("node2.test", "/is_paused")] = _paused(False)
        result = await fleet.is_paused()
    assert result.raise_for_errors() is result
    assert result.ok == dict.fromkeys(URLS, False)
    # raise_on_error=False: the FleetResult comes back, the failure inside.
    rec.answers[("node2.test", "/is_paused")] = httpx.Response(404)
    async with fleet_over(rec, raise_on_error=False) as fleet:
        partial = await fleet.is_paused()
    assert list(partial.failed) == [URLS[2]] and len(partial.ok) == 3


def _paused(value: bool) -> httpx.Response:
    return httpx.Response(200, json={"is_paused": value})


async def test_concurrency_is_bounded_and_real() -> None:
    urls = [f"http://n{i}.test" for i in range(10)]
    rec = Recorder({})
    rec.delay = 0.05
    async with fleet_over(rec, urls, max_concurrency=3) as fleet:
        await fleet.reset_mm_cache()
        assert rec.max_in_flight == 3
        rec.max_in_flight = 0
    async with fleet_over(rec, urls) as fleet:
        await fleet.reset_mm_cache()
    # Unbounded by the default (64): every target in flight at once, not one after the other.
    assert rec.max_in_flight == 10


async def test_pause_rollback_resumes_only_the_targets_it_paused() -> None:
    rec = Recorder(
        {
            ("node1.test", "/pause"): httpx.Response(404),
            ("node3.test", "/pause"): httpx.ReadTimeout("slow"),
            ("node2.test", "/resume"): engine_failure("resume_scheduler", "stuck"),
        }
    )
    async with fleet_over(rec) as fleet:
        with pytest.raises(FleetError) as raised:  # by default: the rollback's outcomes are on the error
            await fleet.pause(mode="keep", rollback=True)
    result = raised.value.result
    resumed = sorted(host for host, path in rec.seen if path == "/resume")
    # node1 refused and node3 timed out (state unknown): neither is touched by the rollback.
    assert resumed == ["node0.test", "node2.test"]
    assert result.rollback is not None
    assert list(result.rollback.ok) == [URLS[0]]
    assert isinstance(result.rollback.failed[URLS[2]], EngineCallError)
    assert set(result.failed) == {URLS[1], URLS[3]}
    with pytest.raises(FleetError) as caught:
        result.raise_for_errors()
    text = str(caught.value)
    assert "rolled back with resume on 2 targets" in text and "stuck" in text


async def test_a_failed_fleet_update_finishes_without_its_version_where_it_started_then_resumes() -> None:
    """One target refuses the start: the target whose start went through is finished without the version
    (vLLM puts the served weights back only at the finish), none with it, every target is resumed, and the
    caller gets the start's FleetError with the failed finish noted on it."""
    rec = Recorder(
        {
            ("node0.test", "/is_paused"): httpx.Response(200, json={"is_paused": True}),
            ("node1.test", "/is_paused"): httpx.Response(200, json={"is_paused": True}),
            ("node0.test", "/start_weight_update"): httpx.Response(200, json={"message": "started"}),
            ("node1.test", "/start_weight_update"): engine_failure("start_weight_update", "no engine"),
            ("node0.test", "/finish_weight_update"): engine_failure("finish_weight_update", "gone"),
        }
    )
    bodies: list[tuple[str, bytes]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/finish_weight_update":
            bodies.append((request.url.host, request.content))
        return await rec(request)

    async with fleet_over(handler, URLS[:2]) as fleet:
        with pytest.raises(FleetError, match="start_weight_update") as caught:
            async with fleet.weight_update(weight_version="v9"):
                raise AssertionError("the block never runs: a start failed")
    assert sorted(host for host, _ in bodies) == ["node0.test"]
    assert all(b"v9" not in body for _, body in bodies)
    assert sorted(host for host, path in rec.seen if path == "/resume") == ["node0.test", "node1.test"]
    notes = getattr(caught.value, "__notes__", [])
    assert len(notes) == 1 and "finishing the failed update" in notes[0]


async def test_sleeping_wakes_the_targets_that_slept_when_another_could_not_and_runs_no_block() -> None:
    rec = Recorder({("node1.test", "/sleep"): httpx.Response(400, json={"error": "sleep mode is off"})})
    async with fleet_over(rec) as fleet:
        with pytest.raises(FleetError) as raised:
            async with fleet.sleeping(wait=False):
                pytest.fail("the block ran though a target could not sleep")
    result = raised.value.result
    woken = sorted(host for host, path in rec.seen if path == "/wake_up")
    assert woken == ["node0.test", "node2.test", "node3.test"]
    assert list(result.failed) == [URLS[1]] and result.rollback is not None
    assert sorted(result.rollback.ok) == [URLS[0], URLS[2], URLS[3]]


async def test_pause_without_rollback_or_without_failure_resumes_nothing() -> None:
    rec = Recorder({("node1.test", "/pause"): httpx.Response(404)})
    async with fleet_over(rec, raise_on_error=False) as fleet:
        partial = await fleet.pause()
        rec.answers.clear()
        full = await fleet.pause(rollback=True)
    assert not any(path == "/resume" for _, path in rec.seen)
    assert partial.rollback is None and not partial.all_ok
    assert full.all_ok and full.rollback is None
    assert sum(path == "/pause" for _, path in rec.seen) == 8


async def test_pause_rollback_when_every_target_failed_has_nothing_to_undo() -> None:
    rec = Recorder({(f"node{i}.test", "/pause"): httpx.Response(404) for i in range(4)})
    async with fleet_over(rec, raise_on_error=True) as fleet:
        with pytest.raises(FleetError) as caught:
            await fleet.pause(rollback=True)
    assert caught.value.result.rollback is None
    assert len(caught.value.errors) == 4
    assert not any(path == "/resume" for _, path in rec.seen)


async def test_barrier_over_a_fleet_succeeds_only_when_every_target_did() -> None:
    answers: dict[str, list[bool]] = {"node0.test": [False, True], "node1.test": [True]}

    async def handler(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if request.url.path == "/reset_prefix_cache":
            queue = answers.get(host, [False])  # node2/node3 never succeed
            value = queue.pop(0) if len(queue) > 1 else queue[0]
            return httpx.Response(200, json={"success": value})
        if request.url.path == "/v1/models":
            return httpx.Response(200, json={"data": [{"id": "m"}]})
        return httpx.Response(200, json={"choices": [{"text": "x"}]})

    async with fleet_over(handler, raise_on_error=False) as fleet:
        result = await fleet.barrier(deadline=0.3, step_engine=True, interval=0.01)
        assert result.operation == "reset_prefix_cache_until_success"
        assert result[URLS[0]].unwrap().attempts == 2
        assert result[URLS[0]].unwrap().engine_steps == 1
        assert result[URLS[1]].unwrap().attempts == 1
        assert all(isinstance(e, BarrierTimeoutError) for e in result.failed.values())
        assert set(result.failed) == {URLS[2], URLS[3]}
        answers.update({"node2.test": [True], "node3.test": [True]})
        again = await fleet.reset_prefix_cache_until_success(deadline=0.3)
    assert again.all_ok


async def test_invalid_arguments_raise_at_once_and_send_nothing() -> None:
    rec = Recorder({})
    async with fleet_over(rec) as fleet:
        with pytest.raises(InvalidParameterError, match="sleep level"):
            await fleet.sleep(level=5)
        with pytest.raises(InvalidParameterError, match="not a client method"):
            await fleet.call("reset_everything")
        with pytest.raises(InvalidParameterError, match="not in this fleet"):
            await fleet.map(lambda c: c.health(), urls=["http://elsewhere.test"])
    assert rec.seen == []


@pytest.mark.parametrize(
    ("urls", "message"),
    [
        ([], "at least one"),
        (["node0.test"], "http:// or https://"),
        (["http://a.test", "http://a.test/"], "listed twice"),
        ("http://a.test", "not a single string"),
    ],
)
def test_bad_target_lists_are_refused(urls: Any, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        AsyncFleet(urls)


def test_bad_concurrency_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="max_concurrency"):
        AsyncFleet(URLS, max_concurrency=0)


async def test_call_by_name_and_map_reach_every_target_with_arguments() -> None:
    rec = Recorder({})
    params: list[str] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        params.append(str(request.url.params))
        return httpx.Response(200, json={"success": True})

    async with fleet_over(handler) as fleet:
        by_name = await fleet.call("reset_prefix_cache", reset_external=True)
        mapped = await fleet.map(lambda c: c.reset_prefix_cache(reset_running_requests=True), urls=URLS[:2])
    assert by_name.all_ok and len(by_name) == 4
    assert list(mapped) == URLS[:2] and mapped.operation == "map"
    assert params[:4] == ["reset_running_requests=false&reset_external=true"] * 4
    assert params[4:] == ["reset_running_requests=true&reset_external=false"] * 2
    assert rec.seen == []


async def test_a_bug_in_the_callable_propagates_and_cancels_the_rest() -> None:
    started: list[str] = []
    cancelled: list[str] = []

    async def work(client: AsyncDevClient) -> int:
        started.append(client.base_url)
        if client.base_url == URLS[0]:
            raise KeyError("bug")
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(client.base_url)
            raise
        return 1

    async with fleet_over(Recorder({})) as fleet:
        with pytest.raises(KeyError):
            await fleet.map(work)
    assert sorted(cancelled) == URLS[1:]


async def test_on_result_sees_each_target_once() -> None:
    seen: list[TargetOutcome[Any]] = []
    rec = Recorder({("node2.test", "/health"): httpx.Response(503)})
    async with fleet_over(rec, on_result=seen.append, raise_on_error=False) as fleet:
        result = await fleet.health()
    assert sorted(o.url for o in seen) == URLS
    assert [o.ok for o in seen if o.url == URLS[2]] == [False]
    assert all(o.elapsed_s >= 0 for o in seen)
    assert repr(result) == "FleetResult(health: 3 ok, 1 failed)"


async def test_api_key_goes_to_every_target_and_a_given_pool_is_used() -> None:
    keys: list[str | None] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers.get("authorization"))
        return httpx.Response(200, json={"version": "0.33.0"})

    async with fleet_over(handler, api_key="sk-fleet") as fleet:
        await fleet.version()
        assert len({id(c._transport) for c in fleet.clients.values()}) == 1
    assert keys == ["Bearer sk-fleet"] * 4


async def test_one_shared_pool_closed_with_the_fleet_but_a_given_one_left_open() -> None:
    fleet = AsyncFleet(URLS)
    # One aiohttp pool for every target (it keys connections by host): one bookkeeping for all of them.
    assert len({id(c._transport) for c in fleet.clients.values()}) == 1
    await fleet.close()
    with pytest.raises(ClientClosedError):
        await fleet.clients[URLS[0]].health()
    given = httpx.AsyncClient()
    async with AsyncFleet(URLS, http_client=given):
        pass
    assert not given.is_closed  # not ours to close
    await given.aclose()


async def test_every_client_method_is_on_both_fleets() -> None:
    assert "reset_prefix_cache" in CLIENT_METHODS and "close" not in CLIENT_METHODS
    with Fleet(URLS) as sync_fleet:
        async with AsyncFleet(URLS) as async_fleet:
            for name in CLIENT_METHODS:
                assert callable(getattr(async_fleet, name, None)), f"AsyncFleet lacks {name}"
                assert callable(getattr(sync_fleet, name, None)), f"Fleet lacks {name}"
            # Each wrapper carries the client method's name and documentation.
            assert async_fleet.barrier.__name__ == "reset_prefix_cache_until_success"
            assert AsyncDevClient.collective_rpc.__doc__.split("\n")[0] in sync_fleet.collective_rpc.__doc__


def _parameters(fn: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of each parameter but self; a client's `**wait` is spelled out."""
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self":
            continue
        if p.name == "wait" and p.kind is p.VAR_KEYWORD:
            continue
        out.append((p.name, p.kind, p.default))
    return out


@pytest.mark.parametrize("fleet_cls", [Fleet, AsyncFleet])
def test_fleet_methods_are_real_methods_with_the_clients_signature(fleet_cls: type) -> None:
    """inspect, help() and IDEs see each fleet method's parameters, defaults and docstring (the issue: on main
    `inspect.signature(Fleet.barrier)` raised TypeError and an instance showed `(*args, **kwargs)`)."""
    for name in sorted(CLIENT_METHODS - {"pause"}):
        method = getattr(fleet_cls, name)
        assert inspect.isfunction(method), f"{fleet_cls.__name__}.{name} is {type(method).__name__}"
        client = getattr(AsyncDevClient, name)
        ours = _parameters(method)
        theirs = _parameters(client)
        assert ours[: len(theirs)] == theirs, f"{fleet_cls.__name__}.{name}: {ours} != {theirs}"
        assert str(inspect.signature(method).return_annotation).startswith("FleetResult["), name
        assert client.__doc__.split("\n")[0] in method.__doc__
    assert inspect.iscoroutinefunction(AsyncFleet.sleep) and not inspect.iscoroutinefunction(Fleet.sleep)
    text = pydoc.render_doc(fleet_cls, renderer=pydoc.plaintext)
    assert "reset_prefix_cache_until_success(self, *, deadline: 'float' = 60.0" in text
    assert "sleep(self, level: 'int' = 1, *, mode:" in text


def _fleet_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "vllm-devclient-fleet"]


def test_sync_fleet_same_results_and_no_thread_left() -> None:
    before = len(_fleet_threads())
    with respx.mock(assert_all_called=False) as mock:
        mock.post("http://a.test/pause").respond(200, json={"status": "paused"})
        mock.post("http://b.test/pause").respond(404)
        mock.get("http://b.test/reset_prefix_cache").respond(404)
        resume_a = mock.post("http://a.test/resume").respond(200, json={"status": "resumed"})
        resume_b = mock.post("http://b.test/resume").respond(200, json={"status": "resumed"})
        mock.get("http://a.test/is_sleeping").respond(200, json={"is_sleeping": True})
        mock.get("http://b.test/is_sleeping").respond(200, json={"is_sleeping": False})
        with Fleet(["http://a.test", "http://b.test"], max_retries=0, raise_on_error=False) as fleet:
            assert len(_fleet_threads()) == before + 1
            sleeping = fleet.is_sleeping()
            by_name = fleet.call("is_sleeping")
            paused = fleet.pause(rollback=True)
            mapped = fleet.map(lambda c: c.is_sleeping(), urls=["http://b.test"])
        assert isinstance(sleeping, FleetResult)
        assert sleeping.ok == {"http://a.test": True, "http://b.test": False}
        assert by_name.ok == sleeping.ok and mapped.ok == {"http://b.test": False}
        assert resume_a.call_count == 1 and resume_b.call_count == 0
        assert paused.rollback is not None and paused.rollback.all_ok
    assert len(_fleet_threads()) == before
    with pytest.raises(DevClientError, match="closed"):
        fleet.health()


def test_sync_fleet_raises_by_default_and_returns_failures_when_asked() -> None:
    with respx.mock(assert_all_called=False) as mock:
        mock.get("http://a.test/health").respond(200)
        mock.get("http://b.test/health").mock(side_effect=httpx.ConnectError("refused"))
        with Fleet(["http://a.test", "http://b.test"], max_retries=0) as fleet:
            assert fleet.raise_on_error
            with pytest.raises(FleetError, match=r"http://b\.test: APIConnectionError") as caught:
                fleet.health()
            assert caught.value.result.ok == {"http://a.test": True}
        with Fleet(["http://a.test", "http://b.test"], max_retries=0, raise_on_error=False) as fleet:
            result = fleet.health()
        assert result.ok == {"http://a.test": True} and list(result.failed) == ["http://b.test"]


def test_sync_fleet_closed_by_garbage_collection() -> None:
    import gc

    before = len(_fleet_threads())
    fleet = Fleet(["http://a.test"])
    assert len(_fleet_threads()) == before + 1
    del fleet
    gc.collect()
    assert len(_fleet_threads()) == before


async def test_a_fleet_wait_takes_deadline_and_refuses_timeout_as_the_client_does() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200)

    async with fleet_over(handler) as fleet:
        with pytest.raises(TypeError, match="timeout"):
            await fleet.wait_until_ready(deadline=1.0, timeout=2.0)  # type: ignore[call-arg]
        with pytest.raises(InvalidParameterError, match="deadline"):
            await fleet.wait_until_ready(deadline=-1.0)
        result = await fleet.wait_until_ready(deadline=2.0)
    assert result.all_ok
