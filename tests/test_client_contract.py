"""The user's contract: one meaning per argument, per-call options, raw responses, flows, pickling, event
loops, closed clients, and answers of known-newer or unknown shapes (respx; both clients)."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import re
import subprocess
import sys
from typing import Any

import httpx
import pytest
import respx

from vllm_devclient import (
    APIConnectionError,
    AsyncDevClient,
    ClientClosedError,
    DevClient,
    DevClientError,
    DevModeDisabledError,
    InvalidParameterError,
    NotFoundError,
    RawResponse,
    ResponseValidationError,
)
from vllm_devclient.fleet import AsyncFleet, Fleet

from .conftest import BASE, Either, python, rust

# ---- one meaning per argument -------------------------------------------------------------------------


def test_boolean_flags_are_keyword_only() -> None:
    client = DevClient(BASE)
    with pytest.raises(TypeError):
        client.reset_prefix_cache(True)  # type: ignore[misc]
    with pytest.raises(TypeError):
        client.get_world_size(False)  # type: ignore[misc]
    with pytest.raises(TypeError):
        client.reset_prefix_cache_until_success(30.0)  # type: ignore[misc]
    client.close()


async def test_waits_and_barrier_take_deadline_and_request_timeout(
    dc: Either, mock: respx.MockRouter
) -> None:
    mock.get("/health").mock(return_value=python(200))
    mock.get("/is_paused").mock(return_value=python(200, json={"is_paused": True}))
    mock.post("/reset_prefix_cache").mock(return_value=python(200, json={"success": True}))
    await dc.wait_until_ready(deadline=5.0, request_timeout=0.5)
    await dc.wait_until_paused(deadline=5.0, request_timeout=0.5)
    done = await dc.reset_prefix_cache_until_success(deadline=5.0, request_timeout=0.5)
    assert done.attempts == 1


async def test_waits_and_the_barrier_refuse_timeout(dc: Either, mock: respx.MockRouter) -> None:
    # timeout= bounds one HTTP try everywhere; a whole wait is deadline=, each of its tries request_timeout=.
    route = mock.get("/health").mock(return_value=python(200))
    with pytest.raises(TypeError, match="timeout"):
        await dc.wait_until_ready(timeout=5.0)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="timeout"):
        await dc.reset_prefix_cache_until_success(timeout=5.0)  # type: ignore[call-arg]
    assert route.call_count == 0


def test_long_routes_have_no_read_bound_by_default() -> None:
    seen: dict[str, Any] = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen[request.url.path] = request.extensions["timeout"]
        return httpx.Response(200, json={"message": "ok", "results": [None], "is_paused": False})

    with DevClient(BASE, http_client=httpx.Client(transport=httpx.MockTransport(handler))) as client:
        client.update_weights({"names": ["w"]})
        client.collective_rpc("m")
        client.is_paused()
        client.update_weights({"names": ["w"]}, timeout=2.0)
    assert seen["/collective_rpc"]["read"] is None
    assert seen["/is_paused"]["read"] is not None and seen["/is_paused"]["read"] <= 30
    assert seen["/update_weights"]["read"] <= 2.0  # the last call's own timeout


# ---- per-call options, raw responses, with_options ---------------------------------------------------------


async def test_extra_headers_query_and_body_reach_the_request(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.post("/collective_rpc").mock(return_value=python(200, json={"results": [1]}))
    await dc.collective_rpc(
        "m", extra_headers={"X-Trace": "t1"}, extra_query={"debug": "1"}, extra_body={"timeout": 3}
    )
    request = route.calls.last.request
    assert request.headers["x-trace"] == "t1"
    assert request.url.params["debug"] == "1"
    assert json.loads(request.content) == {"method": "m", "args": [], "kwargs": {}, "timeout": 3}


async def test_with_raw_response_gives_the_answer_and_the_http_response(
    dc: Either, mock: respx.MockRouter
) -> None:
    mock.post("/reset_prefix_cache").mock(
        return_value=rust(200, json={"success": True}, headers={"x-id": "7"})
    )
    raw = await Either(dc.client.with_raw_response).reset_prefix_cache(reset_external=True)
    assert isinstance(raw, RawResponse)
    assert raw.parsed.success is True
    assert isinstance(raw.http_response, httpx.Response)
    assert raw.status_code == 200 and raw.headers["x-id"] == "7"
    assert raw.http_response.request.url.params["reset_external"] == "true"


def test_with_options_changes_key_and_headers_over_the_same_pool() -> None:
    with respx.mock(base_url=BASE) as router:
        route = router.get("/v1/models").mock(return_value=httpx.Response(200, json={"data": []}))
        client = DevClient(BASE, api_key="sk-one", http_client=httpx.Client())
        other = client.with_options(api_key="sk-two", default_headers={"X-Team": "rl"})
        other.models()
        client.models()
        assert other._transport is client._transport
        first, second = (c.request for c in route.calls)
        assert first.headers["authorization"] == "Bearer sk-two" and first.headers["x-team"] == "rl"
        assert second.headers["authorization"] == "Bearer sk-one" and "x-team" not in second.headers
        client.close()


def test_the_log_switch_sends_the_sdk_log_to_stderr() -> None:
    code = (
        "import logging, respx, httpx\n"
        "from vllm_devclient import DevClient\n"
        "with respx.mock(base_url='http://vllm.test') as r:\n"
        "    r.get('/health').mock(return_value=httpx.Response(503))\n"
        "    c = DevClient('http://vllm.test', api_key='sk-hidden', transport='httpx')\n"
        "    try: c.wait_until_ready(deadline=0.3)\n"
        "    except Exception as e: print(type(e).__name__)\n"
        "    print(logging.getLogger('vllm_devclient').level)\n"
    )
    env = {"VLLM_DEVCLIENT_LOG": "debug", "PATH": ""}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == ["EngineDeadError", str(logging.DEBUG)]
    assert "sk-hidden" not in out.stderr


async def test_every_request_leaves_one_debug_line_with_method_path_status_and_time(
    dc: Either, mock: respx.MockRouter, caplog: pytest.LogCaptureFixture
) -> None:
    mock.get("/health").mock(return_value=python(200))
    mock.get("/tokens/sk-secret-123").mock(return_value=python(404, json={"detail": "Not Found"}))
    mock.get("/load").mock(side_effect=httpx.ConnectError("refused by sk-secret-123"))
    with caplog.at_level(logging.DEBUG, logger="vllm_devclient"):
        await dc.health()
        with pytest.raises(NotFoundError):
            await dc.request("GET", "/tokens/sk-secret-123")
        with pytest.raises(APIConnectionError):
            await dc.load()
    lines = [r.getMessage() for r in caplog.records if " -> " in r.getMessage()]
    assert re.fullmatch(r"GET /health -> 200 in \d+\.\d ms", lines[0]), lines
    assert re.fullmatch(r"GET /tokens/\*\*\* -> 404 in \d+\.\d ms", lines[1]), lines
    assert re.fullmatch(r"GET /load -> failed \(.*\*\*\*.*\) in \d+\.\d ms", lines[2]), lines
    assert len([line for line in lines if line.startswith("GET /load")]) == 3  # the first try and 2 retries
    assert not any("sk-secret-123" in r.getMessage() for r in caplog.records)


# ---- flows -----------------------------------------------------------------------------------------


async def test_paused_resumes_even_when_the_block_fails(dc: Either, mock: respx.MockRouter) -> None:
    pause = mock.post("/pause").mock(return_value=python(200, json={"status": "paused"}))
    mock.get("/is_paused").mock(return_value=python(200, json={"is_paused": True}))
    resume = mock.post("/resume").mock(return_value=python(200, json={"status": "resumed"}))
    client = dc.client
    with pytest.raises(KeyError):
        if isinstance(client, AsyncDevClient):
            async with client.paused():
                raise KeyError("trainer failed")
        else:
            with client.paused():
                raise KeyError("trainer failed")
    assert pause.call_count == 1 and resume.call_count == 1


async def test_weight_update_runs_a_batch_beside_the_caller_and_finishes_with_the_version(
    dc: Either, mock: respx.MockRouter
) -> None:
    for path, body in {
        "/pause": {"status": "paused"},
        "/resume": {"status": "resumed"},
        "/start_weight_update": {"message": "started"},
        "/update_weights": {"message": "Weights updated"},
        "/finish_weight_update": {"message": "finished"},
    }.items():
        mock.post(path).mock(return_value=python(200, json=body))
    mock.get("/is_paused").mock(return_value=python(200, json={"is_paused": True}))
    client = dc.client
    if isinstance(client, AsyncDevClient):
        async with client.weight_update(weight_version="v5") as update:
            pending = update.start({"names": ["w"]})
            assert (await pending).message == "Weights updated"
    else:
        with client.weight_update(weight_version="v5") as sync_update:
            assert sync_update.start({"names": ["w"]}).result(timeout=5).message == "Weights updated"
    finish = [c for c in mock.calls if c.request.url.path == "/finish_weight_update"]
    assert json.loads(finish[0].request.content) == {"weight_version": "v5"}
    assert [c.request.url.path for c in mock.calls][-1] == "/resume"


async def _failing_update(client: DevClient | AsyncDevClient) -> None:
    if isinstance(client, AsyncDevClient):
        async with client.weight_update(weight_version="v5"):
            raise RuntimeError("NCCL send failed")
    else:
        with client.weight_update(weight_version="v5"):
            raise RuntimeError("NCCL send failed")


def _update_routes(mock: respx.MockRouter) -> None:
    for path, body in {
        "/pause": {"status": "paused"},
        "/resume": {"status": "resumed"},
        "/start_weight_update": {"message": "s"},
    }.items():
        mock.post(path).mock(return_value=python(200, json=body))
    mock.get("/is_paused").mock(return_value=python(200, json={"is_paused": True}))


async def test_a_failed_weight_update_is_finished_without_its_version_then_resumed(
    dc: Either, mock: respx.MockRouter
) -> None:
    """vLLM puts the served weights back only at the finish (0.26 with IPC: an unfinished update made the
    next request kill the engine, gpu_tests/results/rl-2026-12-01): the failed update is finished, without
    the version, before the resume, and the block's own error is what the caller gets."""
    _update_routes(mock)
    finish = mock.post("/finish_weight_update").mock(return_value=python(200, json={"message": "f"}))
    with pytest.raises(RuntimeError, match="NCCL send failed"):
        await _failing_update(dc.client)
    assert finish.call_count == 1
    assert "v5" not in finish.calls[0].request.content.decode()
    paths = [c.request.url.path for c in mock.calls]
    assert paths[-2:] == ["/finish_weight_update", "/resume"]


async def test_a_finish_that_fails_after_a_failed_update_is_a_note_on_the_block_error(
    dc: Either, mock: respx.MockRouter
) -> None:
    _update_routes(mock)
    gone = python(500, json={"error": {"message": "engine gone"}})
    mock.post("/finish_weight_update").mock(return_value=gone)
    with pytest.raises(RuntimeError, match="NCCL send failed") as raised:
        await _failing_update(dc.client)
    notes = getattr(raised.value, "__notes__", [])
    assert len(notes) == 1 and "finishing the failed update" in notes[0] and "engine gone" in notes[0]
    assert [c.request.url.path for c in mock.calls][-1] == "/resume"


# ---- Ray and event loops, closed clients -------------------------------------------------------------------


def test_clients_and_fleets_pickle_by_configuration_and_the_copies_make_calls() -> None:
    with respx.mock(base_url=BASE) as router:
        router.get("/version").mock(return_value=httpx.Response(200, json={"version": "0.33.0"}))
        for client in (
            DevClient(BASE, api_key="sk-k", transport="httpx", timeout=3.0),
            AsyncDevClient(BASE, transport="httpx"),
        ):
            copy = pickle.loads(pickle.dumps(client))
            assert (
                type(copy) is type(client)
                and copy.base_url == client.base_url
                and copy.timeout == client.timeout
            )
            result = copy.version()
            version = asyncio.run(result) if asyncio.iscoroutine(result) else result
            assert version.version == "0.33.0"
        fleet = Fleet([BASE], api_key="sk-k")
        fleet_copy = pickle.loads(pickle.dumps(fleet))
        assert fleet_copy.urls == fleet.urls and fleet_copy.version().all_ok
        fleet.close()
        fleet_copy.close()
        assert pickle.loads(pickle.dumps(AsyncFleet([BASE]))).urls == (BASE,)


def test_a_client_made_with_an_http_client_refuses_to_pickle() -> None:
    client = DevClient(BASE, http_client=httpx.Client())
    with pytest.raises(TypeError, match="http_client"):
        pickle.dumps(client)


async def test_a_call_after_close_names_the_fix(dc: Either, mock: respx.MockRouter) -> None:
    mock.get("/health").mock(return_value=python(200))
    await dc.close()
    with pytest.raises(ClientClosedError, match="closed") as info:
        await dc.health()
    assert isinstance(info.value, DevClientError)
    assert mock.calls.call_count == 0


# ---- 404s and answer shapes --------------------------------------------------------------------------------


async def test_a_404_off_the_dev_surface_is_not_found_not_dev_mode(
    dc: Either, mock: respx.MockRouter
) -> None:
    mock.get("/v1/nonexistent").mock(return_value=python(404, json={"detail": "Not Found"}))
    mock.post("/sleep").mock(return_value=python(404, json={"detail": "Not Found"}))
    probe = mock.get("/reset_prefix_cache").mock(return_value=python(404, json={"detail": "Not Found"}))
    with pytest.raises(NotFoundError) as info:
        await dc.request("GET", "/v1/nonexistent")
    assert not isinstance(info.value, DevModeDisabledError)
    assert probe.call_count == 0  # only a dev route's 404 is looked into
    with pytest.raises(DevModeDisabledError):
        await dc.request("POST", "/sleep")
    assert probe.call_count == 1


async def test_newer_answer_shapes_are_read(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/wake_up").mock(return_value=python(200, json={"status": "awake", "tags_woken": ["weights"]}))
    assert (await dc.wake_up(["weights"])).tags == ["weights"]
    sources = [{"endpoint": "tcp://*:5557", "topic": "kv"}, {"endpoint": "tcp://*:5567", "rank": 1}]
    mock.get("/kv_event_sources").mock(return_value=python(200, json={"sources": sources}))
    got = await dc.kv_event_sources()
    assert sorted(got) == [0, 1] and got[1].endpoint == "tcp://*:5567"


@pytest.mark.parametrize(
    ("path", "method", "body"),
    [
        ("/kv_event_sources", "kv_event_sources", {"0": None}),
        ("/kv_event_sources", "kv_event_sources", {"sources": "tcp://*:5557"}),
        ("/kv_event_sources", "kv_event_sources", ["tcp://*:5557"]),
        ("/pause", "pause", {"state": "paused"}),
        ("/weight_info", "weight_info", {}),
        ("/sleep", "sleep", {"zzz": True}),
    ],
)
async def test_unknown_answer_shapes_are_errors_never_empty(
    dc: Either, mock: respx.MockRouter, path: str, method: str, body: Any
) -> None:
    http_method = "GET" if path in ("/kv_event_sources", "/weight_info") else "POST"
    mock.route(method=http_method, path=path).mock(return_value=python(200, json=body))
    with pytest.raises(ResponseValidationError):
        await getattr(dc, method)()


def test_weight_checker_compare_without_a_baseline_is_refused_before_sending() -> None:
    with respx.mock(base_url=BASE) as router, DevClient(BASE, transport="httpx") as client:
        with pytest.raises(InvalidParameterError, match="baseline"):
            client.weight_checker("compare")
        assert router.calls.call_count == 0
