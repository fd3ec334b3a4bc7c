"""Every route, sync and async, against answers shaped like each frontend's."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from vllm_devclient import (
    AbortRequestsResult,
    DevClient,
    InvalidParameterError,
    ResponseValidationError,
    ServerInfo,
    VersionInfo,
)

from .conftest import BASE, Either, python, rust

FRONTENDS = {"python": python, "rust": rust}


@pytest.fixture(params=sorted(FRONTENDS))
def answer(request: pytest.FixtureRequest) -> Any:
    return FRONTENDS[request.param]


async def test_health_and_version(dc: Either, mock: respx.MockRouter, answer: Any) -> None:
    mock.get("/health").mock(return_value=answer(200))
    assert await dc.health() is True


@pytest.mark.parametrize(
    ("body", "frontend"),
    [({"version": "0.33.0"}, "python"), ({"version": "0.33.0", "rust_frontend_version": "0.1.0"}, "rust")],
)
async def test_version_names_the_frontend(
    dc: Either, mock: respx.MockRouter, body: dict[str, Any], frontend: str
) -> None:
    mock.get("/version").mock(return_value=httpx.Response(200, json=body))
    info = await dc.version()
    assert isinstance(info, VersionInfo)
    assert info.version == "0.33.0"
    assert info.frontend == frontend


def test_the_client_learns_the_frontend_from_a_version_answer_by_its_type() -> None:
    """Only a VersionInfo (a subclass too) tells the frontend; another class of that name does not."""

    class Answer(VersionInfo):
        pass

    class VersionInfoLookalike:  # an unrelated answer that happens to carry the attribute
        frontend = "rust"

    VersionInfoLookalike.__name__ = "VersionInfo"
    client = DevClient("http://vllm.test")
    client._learn(VersionInfoLookalike())
    assert client._frontend == "unknown"
    client._learn(Answer(version="0.33.0", rust_frontend_version="0.33.0"))
    assert client._frontend == "rust"
    client.close()


async def test_models(dc: Either, mock: respx.MockRouter) -> None:
    mock.get("/v1/models").mock(
        return_value=httpx.Response(
            200,
            json={
                "object": "list",
                "data": [{"id": "tiny", "object": "model", "max_model_len": 128, "new": 1}],
            },
        )
    )
    listing = await dc.models()
    assert [m.id for m in listing.data] == ["tiny"]
    assert listing.data[0].max_model_len == 128
    assert listing.data[0].model_extra == {"new": 1}  # unknown fields are kept, not rejected


@pytest.mark.parametrize("success", [True, False])
async def test_reset_prefix_cache(dc: Either, mock: respx.MockRouter, answer: Any, success: bool) -> None:
    route = mock.post("/reset_prefix_cache").mock(return_value=answer(200, json={"success": success}))
    result = await dc.reset_prefix_cache(reset_external=True)
    assert result.success is success
    params = route.calls.last.request.url.params
    assert params["reset_external"] == "true"  # lowercase: the Rust frontend rejects anything else
    assert params["reset_running_requests"] == "false"


async def test_reset_prefix_cache_legacy_bare_200(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/reset_prefix_cache").mock(return_value=python(200))
    assert (await dc.reset_prefix_cache()).success is None


async def test_reset_prefix_cache_conflict_is_a_refusal(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/reset_prefix_cache").mock(return_value=rust(409, text="prefix cache reset refused"))
    result = await dc.reset_prefix_cache()
    assert result.success is False
    assert result.status_code == 409


async def test_reset_prefix_cache_non_bool_success_is_not_success(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/reset_prefix_cache").mock(return_value=python(200, json={"success": "yes"}))
    with pytest.raises(ResponseValidationError):
        await dc.reset_prefix_cache()


@pytest.mark.parametrize("name", ["reset_mm_cache", "reset_encoder_cache"])
async def test_unit_resets(dc: Either, mock: respx.MockRouter, answer: Any, name: str) -> None:
    route = mock.post(f"/{name}").mock(return_value=answer(200))
    assert await getattr(dc, name)() is None
    assert route.called


async def test_sleep(dc: Either, mock: respx.MockRouter, answer: Any) -> None:
    route = mock.post("/sleep").mock(return_value=answer(200, json={"status": "sleeping", "level": 2}))
    result = await dc.sleep(level=2, mode="wait")
    assert (result.status, result.level) == ("sleeping", 2)
    assert dict(route.calls.last.request.url.params) == {"level": "2", "mode": "wait"}


@pytest.mark.parametrize(("status", "awake"), [("awake", True), ("sleeping", False)])
async def test_wake_up(dc: Either, mock: respx.MockRouter, answer: Any, status: str, awake: bool) -> None:
    route = mock.post("/wake_up").mock(return_value=answer(200, json={"status": status, "tags": ["weights"]}))
    result = await dc.wake_up(tags=["weights", "kv_cache"])
    assert result.awake is awake
    assert route.calls.last.request.url.params.get_list("tags") == ["weights", "kv_cache"]


async def test_wake_up_all_tags_sends_none(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.post("/wake_up").mock(return_value=python(200, json={"status": "awake", "tags": None}))
    assert (await dc.wake_up()).awake is True
    assert "tags" not in route.calls.last.request.url.params


@pytest.mark.parametrize(
    ("route_name", "field"), [("is_sleeping", "is_sleeping"), ("is_paused", "is_paused")]
)
@pytest.mark.parametrize("value", [True, False])
async def test_flags(
    dc: Either, mock: respx.MockRouter, answer: Any, route_name: str, field: str, value: bool
) -> None:
    mock.get(f"/{route_name}").mock(return_value=answer(200, json={field: value}))
    assert await getattr(dc, route_name)() is value


async def test_release_kv_cache_memory_bare_200_is_a_release_that_says_nothing(
    dc: Either, mock: respx.MockRouter, answer: Any
) -> None:
    """vLLM 0.31.0 answers a bare 200 once the memory is released: no error, and no status made up."""
    route = mock.post("/release_kv_cache_memory")
    route.mock(return_value=answer(200))
    assert (await dc.release_kv_cache_memory()).status is None
    route.mock(return_value=answer(200, json={"released": True}))  # a shape nobody sends: not empty
    with pytest.raises(ResponseValidationError, match="status"):
        await dc.release_kv_cache_memory()


async def test_flag_of_wrong_type_is_an_error(dc: Either, mock: respx.MockRouter) -> None:
    mock.get("/is_sleeping").mock(return_value=python(200, json={"is_sleeping": "false"}))
    with pytest.raises(ResponseValidationError, match="is_sleeping"):
        await dc.is_sleeping()


async def test_release_pause_resume(dc: Either, mock: respx.MockRouter, answer: Any) -> None:
    mock.post("/release_kv_cache_memory").mock(return_value=answer(200, json={"status": "kv_cache_released"}))
    pause = mock.post("/pause").mock(return_value=answer(200, json={"status": "paused"}))
    mock.post("/resume").mock(return_value=answer(200, json={"status": "resumed"}))
    assert (await dc.release_kv_cache_memory()).status == "kv_cache_released"
    assert (await dc.pause(mode="keep", clear_cache=False)).status == "paused"
    assert dict(pause.calls.last.request.url.params) == {"mode": "keep", "clear_cache": "false"}
    await dc.pause()
    assert dict(pause.calls.last.request.url.params) == {
        "mode": "abort"
    }  # deprecated flag left to the server
    assert (await dc.resume()).status == "resumed"


async def test_abort_requests(dc: Either, mock: respx.MockRouter, answer: Any) -> None:
    route = mock.post("/abort_requests").mock(
        return_value=answer(200, json={"status": "aborted", "aborted": 2})
    )
    result = await dc.abort_requests(["a", "b"])
    assert isinstance(result, AbortRequestsResult)
    assert result.aborted == 2
    assert json.loads(route.calls.last.request.content) == {"request_ids": ["a", "b"]}
    await dc.abort_requests()
    assert json.loads(route.calls.last.request.content) == {"request_ids": []}


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            python(200, json={"results": ["3", None, {"a": 1}]}),
            ["3", None, {"a": 1}],
        ),  # Python str()s scalars
        (rust(200, json={"results": [3]}), [3]),  # Rust wraps a scalar in a list
        (rust(200, json={"results": [None]}), [None]),
        (python(200), [None]),  # Python: engine returned None -> empty body
    ],
)
async def test_collective_rpc_shapes(
    dc: Either, mock: respx.MockRouter, response: httpx.Response, expected: Any
) -> None:
    route = mock.post("/collective_rpc").mock(return_value=response)
    assert await dc.collective_rpc("echo", args=["x"], kwargs={"k": "v"}, rpc_timeout=5.0) == expected
    assert json.loads(route.calls.last.request.content) == {
        "method": "echo",
        "args": ["x"],
        "kwargs": {"k": "v"},
        "timeout": 5.0,
    }


async def test_server_info(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.get("/server_info").mock(
        return_value=python(
            200, json={"vllm_config": {"model_config": {}}, "vllm_env": {"A": 1}, "system_env": {}}
        )
    )
    info = await dc.server_info()
    assert isinstance(info, ServerInfo)
    assert info.vllm_config == {"model_config": {}}
    assert route.calls.last.request.url.params["config_format"] == "json"


async def test_kv_event_sources(dc: Either, mock: respx.MockRouter) -> None:
    mock.get("/kv_event_sources").mock(
        return_value=python(
            200,
            json={
                "1": {"endpoint": "tcp://*:5558", "replay_endpoint": None, "topic": "kv"},
                "0": {"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:6000", "topic": "kv"},
            },
        )
    )
    sources = await dc.kv_event_sources()
    assert list(sources) == [0, 1]
    assert sources[0].replay_endpoint == "tcp://*:6000"
    assert sources[1].endpoint == "tcp://*:5558"


async def test_get_world_size(dc: Either, mock: respx.MockRouter, answer: Any) -> None:
    route = mock.get("/get_world_size").mock(return_value=answer(200, json={"world_size": 4}))
    assert await dc.get_world_size(include_dp=False) == 4
    assert route.calls.last.request.url.params["include_dp"] == "false"


async def test_weight_transfer_routes(dc: Either, mock: respx.MockRouter, answer: Any) -> None:
    init = mock.post("/init_weight_transfer_engine").mock(return_value=answer(200, json={"message": "ok"}))
    mock.post("/start_weight_update").mock(return_value=answer(200, json={"message": "started"}))
    upd = mock.post("/update_weights").mock(return_value=answer(200, json={"message": "Weights updated"}))
    fin = mock.post("/finish_weight_update").mock(return_value=answer(200, json={"message": "done"}))
    ver = mock.post("/update_weight_version").mock(
        return_value=answer(200, json={"success": True, "new_version": "v2"})
    )
    mock.get("/weight_info").mock(return_value=answer(200, json={"weight_version": "v2"}))

    assert (await dc.init_weight_transfer_engine({"master_port": 1})).message == "ok"
    assert json.loads(init.calls.last.request.content) == {"init_info": {"master_port": 1}}
    assert (await dc.start_weight_update()).message == "started"
    await dc.update_weights([{"names": ["w"]}])
    assert json.loads(upd.calls.last.request.content) == {"update_info": [{"names": ["w"]}]}
    await dc.finish_weight_update(weight_version="v2")
    assert json.loads(fin.calls.last.request.content) == {"weight_version": "v2"}
    assert (await dc.update_weight_version("v2")).new_version == "v2"
    assert json.loads(ver.calls.last.request.content) == {"new_version": "v2"}
    assert (await dc.weight_info()).weight_version == "v2"


async def test_step_engine_discovers_model_once(dc: Either, mock: respx.MockRouter) -> None:
    models = mock.get("/v1/models").mock(return_value=httpx.Response(200, json={"data": [{"id": "tiny"}]}))
    comp = mock.post("/v1/completions").mock(
        return_value=httpx.Response(200, json={"choices": [{"text": "a"}]})
    )
    assert await dc.step_engine() == "a"
    assert await dc.step_engine() == "a"
    assert models.call_count == 1
    assert comp.call_count == 2
    assert json.loads(comp.calls.last.request.content) == {
        "model": "tiny",
        "prompt": "0",
        "max_tokens": 1,
        "temperature": 0,
    }
    assert comp.calls.last.request.headers["authorization"] == "Bearer sk-secret-123"


@pytest.mark.parametrize("path", ["/a\x00b", "/a\r\nX: 1", "/a\tb", "/a\x7f", "/a b", "/a?b=1", "a"])
async def test_escape_hatch_refuses_a_path_that_is_not_one_plain_path(
    dc: Either, mock: respx.MockRouter, path: str
) -> None:
    route = mock.route().mock(return_value=python(200))
    with pytest.raises(InvalidParameterError, match="path must start with '/'"):
        await dc.request("GET", path)
    assert route.call_count == 0


async def test_escape_hatch_sends_values_as_given(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.post("/sleep").mock(return_value=python(200, json={"status": "sleeping", "level": 1}))
    response = await dc.request("post", "/sleep", params={"level": "5", "flag": True})
    assert response.status_code == 200
    assert dict(route.calls.last.request.url.params) == {"level": "5", "flag": "true"}


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("sleep", (), {"level": 3}),
        ("sleep", (), {"level": True}),
        ("sleep", (), {"mode": "bogus"}),
        ("pause", (), {"mode": "later"}),
        ("reset_prefix_cache", (), {"reset_external": 1}),
        ("wake_up", ("weights",), {}),
        ("abort_requests", ("req-1",), {}),
        ("collective_rpc", ("",), {}),
        ("collective_rpc", ("m",), {"args": [object()]}),
        ("server_info", ("yaml",), {}),
        ("get_world_size", (), {"include_dp": "yes"}),
        ("request", ("GET", "health"), {}),
    ],
)
async def test_bad_input_is_refused_before_sending(
    dc: Either, mock: respx.MockRouter, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    with pytest.raises(InvalidParameterError):
        await getattr(dc, name)(*args, **kwargs)
    assert not mock.calls


def test_constructor_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidParameterError, match="base_url"):
        DevClient("localhost:8000")
    with pytest.raises(InvalidParameterError, match="max_retries"):
        DevClient(BASE, max_retries=-1)
    monkeypatch.setenv("VLLM_API_KEY", "from-env")
    with respx.mock(base_url=BASE) as router:
        route = router.get("/health").mock(return_value=httpx.Response(200))
        with DevClient(BASE + "/") as client:
            assert client.base_url == BASE
            client.health()
        assert route.calls.last.request.headers["authorization"] == "Bearer from-env"


def test_api_key_never_in_repr_or_errors() -> None:
    secret = "sk-do-not-leak"
    with respx.mock(base_url=BASE) as router:
        router.post("/reset_prefix_cache").mock(return_value=python(500, json={"error": {"message": "boom"}}))
        client = DevClient(BASE, api_key=secret)
        assert secret not in repr(client)
        with pytest.raises(Exception) as info:
            client.reset_prefix_cache()
        assert secret not in str(info.value)
        assert secret not in repr(info.value)
        assert all(secret not in str(v) for v in vars(info.value).values())


def test_with_options_shares_the_pool() -> None:
    with respx.mock(base_url=BASE) as router:
        router.get("/health").mock(return_value=httpx.Response(200))
        client = DevClient(BASE, api_key="k", timeout=5.0)
        fast = client.with_options(timeout=0.5, max_retries=0)
        assert fast._transport is client._transport
        assert fast.timeout == 0.5
        assert fast.max_retries == 0
        assert fast.health()
        fast.close()  # does not own the pool
        assert client.health()
        client.close()


async def test_abort_requests_rust_empty_answer(dc: Either, mock: respx.MockRouter) -> None:
    mock.post("/abort_requests").mock(return_value=rust(200))
    given = await dc.abort_requests(["a", "b", "c"])
    assert (given.status, given.aborted) == ("aborted", 3)  # what Python reports for the same ids
    everything = await dc.abort_requests()
    assert (everything.status, everything.aborted) == ("aborted", None)  # Rust cannot say how many
