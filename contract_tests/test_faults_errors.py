"""The fault suite, what a failure raises (issue 11, classes 5 and 9): every failure is a DevClientError;
its message quotes at most ERROR_TEXT_LIMIT characters of what the server sent, and `.body` keeps it all;
its frontend label is "rust" only with evidence.

Against the real vLLM frontends (the plugin's `frontend`, `python_frontend` and `rust_frontend` fixtures,
driven by the scripted engine) where the class applies, and against `MisbehavingServer`
(vllm_devclient/testing/misbehaving.py, the `server` fixture of conftest.py). The whole suite's classes are
listed in fault_answers.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from vllm_devclient import (
    APIStatusError,
    AsyncDevClient,
    AsyncFleet,
    DevClient,
    DevClientError,
    EngineCallError,
    InternalServerError,
    ResponseValidationError,
)
from vllm_devclient.testing import Raise
from vllm_devclient.testing.bounds import ERROR_TEXT_LIMIT
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer, DeepJSON, HugeBody

OWN_WORDS = 200  # what an error says besides the server's text: method, path, status, what was cut


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
# The frontend label
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
