"""The contract harness's own pieces, without a server: the one recording transport on both httpx bases, the
client factory, the scenario families and metric masking."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient.calls import CALLS
from vllm_devclient.routes import ROUTES
from vllm_devclient.testing.contract import (
    LiveServer,
    RecordingAsyncTransport,
    RecordingTransport,
    arun_scenario,
    make_client,
    mask_exchange,
    run_scenario,
)
from vllm_devclient.testing.scenarios import FAMILIES, SCENARIOS, get_scenario

URL = "http://harness.test"


def _answer(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/is_sleeping":
        raise httpx.ReadTimeout("hung", request=request)
    return httpx.Response(200, json={"success": True}, headers={"server": "uvicorn"})


def test_one_recording_transport_serves_both_bases() -> None:
    assert RecordingAsyncTransport is RecordingTransport
    recorder = RecordingTransport(httpx.MockTransport(_answer))
    with httpx.Client(transport=recorder) as http:
        http.post(URL + "/reset_prefix_cache", params={"reset_external": "false"}, json={"a": 1})
        with pytest.raises(httpx.ReadTimeout):
            http.get(URL + "/is_sleeping")

    async def post_async() -> None:
        async with httpx.AsyncClient(transport=recorder) as ahttp:
            await ahttp.post(URL + "/reset_prefix_cache")

    asyncio.run(post_async())
    assert [ex.as_json() for ex in recorder.exchanges] == [
        {
            "request": {
                "method": "POST",
                "path": "/reset_prefix_cache",
                "query": [["reset_external", "false"]],
                "auth": False,
                "json": {"a": 1},
            },
            "response": {
                "status": 200,
                "headers": {"content-type": "application/json", "server": "uvicorn"},
                "json": {"success": True},
            },
        },
        {
            "request": {"method": "GET", "path": "/is_sleeping", "query": [], "auth": False},
            "error": "ReadTimeout",
        },
        {
            "request": {"method": "POST", "path": "/reset_prefix_cache", "query": [], "auth": False},
            "response": {
                "status": 200,
                "headers": {"content-type": "application/json", "server": "uvicorn"},
                "json": {"success": True},
            },
        },
    ]


async def test_a_recorder_refuses_an_inner_transport_of_the_other_kind() -> None:
    recorder = RecordingTransport(httpx.HTTPTransport())
    async with httpx.AsyncClient(transport=recorder) as http:
        with pytest.raises(TypeError, match="AsyncBaseTransport"):
            await http.get(URL + "/health")
    recorder.close()


def test_make_client_builds_both_kinds_and_sends_no_key_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "from-the-environment")
    recorder = RecordingTransport(httpx.MockTransport(_answer))
    with make_client(LiveServer(URL), kind="sync", transport=recorder) as client:
        assert isinstance(client, DevClient) and client.base_url == URL
        client.reset_prefix_cache()
    with make_client(URL, kind="sync", transport=recorder, api_key="sk-x") as client:
        client.reset_prefix_cache()
    assert [ex.request["auth"] for ex in recorder.exchanges] == [False, True]
    assert isinstance(make_client(URL, kind="async"), AsyncDevClient)
    with pytest.raises(TypeError, match="AsyncBaseTransport"):
        make_client(URL, kind="async", transport=httpx.HTTPTransport())
    with pytest.raises(ValueError, match="kind"):
        make_client(URL, kind="threads")  # type: ignore[call-overload]


async def test_the_runner_records_sync_and_async_runs_alike() -> None:
    scenario = get_scenario("reset_prefix_cache")
    target = LiveServer(URL, "python")
    sync = run_scenario(scenario, target, transport=httpx.MockTransport(_answer))
    asynchronous = await arun_scenario(scenario, target, transport=httpx.MockTransport(_answer))
    assert (sync.mode, asynchronous.mode) == ("sync", "async")
    assert [e.as_json() for e in sync.exchanges] == [e.as_json() for e in asynchronous.exchanges]
    assert sync.outcome.success is True and asynchronous.outcome.success is True
    assert sync.engine_calls is None  # no scripted engine behind a live server


def test_every_record_has_a_scenario() -> None:
    """Adding a route is its record and a scenario: a record that no scenario calls fails here."""
    called = {name for sc in SCENARIOS for name in sc.methods_called()}
    missing = [record.name for record in (*ROUTES, *CALLS) if record.name not in called]
    assert missing == [], f"no contract scenario calls {missing}"


def test_every_family_holds_scenarios_and_names_are_unique() -> None:
    assert all(family.SCENARIOS for family in FAMILIES)
    assert sum(len(family.SCENARIOS) for family in FAMILIES) == len(SCENARIOS)
    assert len({sc.name for sc in SCENARIOS}) == len(SCENARIOS)


def test_a_parsed_metrics_answer_keeps_its_prefix_cache_samples_zeroed() -> None:
    text = (
        "# HELP vllm:prefix_cache_queries Prefix cache queries.\n"
        "# TYPE vllm:prefix_cache_queries counter\n"
        'vllm:prefix_cache_queries_total{model_name="/models/tiny",engine="0"} 12\n'
        "# TYPE vllm:prompt_tokens_by_source counter\n"
        'vllm:prompt_tokens_by_source_total{source="local_compute"} 3\n'
        "# EOF\n"
    )
    exchange = {
        "request": {"method": "GET", "path": "/metrics", "query": [], "auth": False},
        "response": {"status": 200, "headers": {}, "text": text},
    }
    typed = mask_exchange(exchange, "/models/tiny", metric_samples=True)["response"]["text"]
    assert typed == (
        "# TYPE vllm:prefix_cache_queries counter\n"
        'vllm:prefix_cache_queries_total{model_name="<model>",engine="0"} 0\n'
        "# EOF\n"
    )
    plain = mask_exchange(exchange, "/models/tiny")["response"]["text"]
    assert plain == "# TYPE vllm:prefix_cache_queries counter\n# TYPE vllm:prompt_tokens_by_source counter\n"
