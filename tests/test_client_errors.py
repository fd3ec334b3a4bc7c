"""Every error row of both frontends, retries and timeouts."""

from __future__ import annotations

import httpx
import pytest
import respx

from vllm_devclient import (
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AsyncDevClient,
    AuthenticationError,
    BadRequestError,
    DevClient,
    DevModeDisabledError,
    EngineCallError,
    EngineDeadError,
    InternalServerError,
    MethodNotAllowedError,
    NotFoundError,
    RouteNotServedError,
    ServiceUnavailableError,
)

from .conftest import BASE, Either, python, rust

RUST_ENGINE_MSG = (
    "failed to call /reset_prefix_cache: utility call `reset_prefix_cache` failed (call_id=3): "
    "Call to reset_prefix_cache method failed: blocks still held"
)


@pytest.mark.parametrize(
    ("response", "error", "frontend", "param"),
    [
        (
            python(
                400,
                json={
                    "error": {
                        "message": "Input should be 0, 1 or 2",
                        "type": "Bad Request",
                        "param": "level",
                    }
                },
            ),
            BadRequestError,
            "python",
            "level",
        ),
        (
            rust(
                400,
                json={
                    "error": {
                        "message": "Failed to deserialize query string: level: invalid digit",
                        "type": "BadRequestError",
                        "param": None,
                        "code": 400,
                    }
                },
            ),
            BadRequestError,
            "rust",
            "level",
        ),
        (
            rust(
                400, text="Failed to deserialize query string: reset_external: provided string was not `true`"
            ),
            BadRequestError,
            "rust",
            "reset_external",
        ),
        (
            python(422, json={"detail": [{"loc": ["query", "mode"], "msg": "bad mode"}]}),
            BadRequestError,
            "python",
            "mode",
        ),
        (python(401, json={"error": "Unauthorized"}), AuthenticationError, "python", None),
        (python(404, json={"detail": "Not Found"}), DevModeDisabledError, "python", None),
        # No server header and an empty body: nothing says which frontend answered.
        (rust(404), DevModeDisabledError, "unknown", None),
        (
            python(405, json={"detail": "Method Not Allowed"}, headers={"allow": "POST"}),
            MethodNotAllowedError,
            "python",
            None,
        ),
        (rust(405), MethodNotAllowedError, "unknown", None),
        (
            rust(500, text="<html><body><h1>500 Internal Server Error</h1></body></html>"),
            InternalServerError,
            "unknown",
            None,
        ),
    ],
)
async def test_status_errors(
    dc: Either,
    mock: respx.MockRouter,
    response: httpx.Response,
    error: type[APIStatusError],
    frontend: str,
    param: str | None,
) -> None:
    mock.post("/sleep").mock(return_value=response)
    mock.get("/reset_prefix_cache").mock(return_value=rust(404))  # asked after a 404: dev mode is off
    with pytest.raises(error) as info:
        await dc.sleep()
    exc = info.value
    assert type(exc) is error
    assert exc.status_code == response.status_code
    assert exc.http_method == "POST"
    assert exc.path == "/sleep"
    assert exc.frontend == frontend
    assert exc.param == param
    assert exc.body == response.text
    if error is DevModeDisabledError:
        assert "VLLM_SERVER_DEV_MODE=1" in str(exc)


async def test_404_off_the_dev_surface_is_plain_not_found(dc: Either, mock: respx.MockRouter) -> None:
    mock.get("/version").mock(return_value=python(404, json={"detail": "Not Found"}))
    probe = mock.get("/reset_prefix_cache").mock(return_value=python(405))
    with pytest.raises(NotFoundError) as info:
        await dc.version()
    assert type(info.value) is NotFoundError and probe.call_count == 0


# ---- a dev route's 404: dev mode off, or a release without the route ---------------------------------------
# Both frontends answer both the same way (the recorded 0.25.1/0.28.0 fixtures: Python {"detail": "Not
# Found"}, Rust an empty 404), so the client asks once: GET /reset_prefix_cache, 405 while dev routes are
# served and 404 when they are not.

_NOT_FOUND = {"python": python(404, json={"detail": "Not Found"}), "rust": rust(404)}


@pytest.mark.parametrize("frontend", ["python", "rust"])
async def test_a_route_the_release_lacks_is_named_missing(
    dc: Either, mock: respx.MockRouter, frontend: str
) -> None:
    route = mock.get("/weight_info").mock(return_value=_NOT_FOUND[frontend])
    probe = mock.get("/reset_prefix_cache").mock(
        return_value=python(405, headers={"allow": "POST"}) if frontend == "python" else rust(405)
    )
    with pytest.raises(RouteNotServedError) as info:
        await dc.weight_info()
    exc = info.value
    assert isinstance(exc, NotFoundError) and not isinstance(exc, DevModeDisabledError)
    assert (exc.status_code, exc.http_method, exc.path) == (404, "GET", "/weight_info")
    assert "route /weight_info is missing" in str(exc) and "release" in str(exc)
    assert "VLLM_SERVER_DEV_MODE" not in str(exc)
    assert exc.body == _NOT_FOUND[frontend].text
    assert exc.frontend == ("python" if frontend == "python" else "unknown")
    # One try of each (a 404 is not retried), the probe never reaches the engine's routes.
    assert (route.call_count, probe.call_count) == (1, 1)


async def test_dev_mode_off_is_said_without_doubt_when_the_probe_is_404(
    dc: Either, mock: respx.MockRouter
) -> None:
    mock.post("/collective_rpc").mock(return_value=rust(404))
    probe = mock.get("/reset_prefix_cache").mock(return_value=rust(404))
    with pytest.raises(DevModeDisabledError) as info:
        await dc.collective_rpc("ping")
    assert "start the server with VLLM_SERVER_DEV_MODE=1" in str(info.value)
    assert "this release has no such route" not in str(info.value)
    assert probe.call_count == 1


@pytest.mark.parametrize(
    "probe_answer",
    [httpx.ConnectError("refused"), rust(502), python(401, json={"error": "Unauthorized"})],
    ids=["no-answer", "gateway", "unauthorized"],
)
async def test_a_probe_without_evidence_names_both_causes(
    dc: Either, mock: respx.MockRouter, probe_answer: httpx.Response | Exception
) -> None:
    mock.post("/pause").mock(return_value=rust(404))
    probe = mock.get("/reset_prefix_cache")
    if isinstance(probe_answer, Exception):
        probe.mock(side_effect=probe_answer)
    else:
        probe.mock(return_value=probe_answer)
    with pytest.raises(DevModeDisabledError) as info:
        await dc.pause()
    assert "VLLM_SERVER_DEV_MODE=1" in str(info.value) and "this release has no such route" in str(info.value)
    assert probe.call_count == 1  # asked once, never retried


async def test_a_wait_on_a_missing_route_ends_with_the_missing_route(
    dc: Either, mock: respx.MockRouter
) -> None:
    mock.get("/is_paused").mock(return_value=rust(404))
    mock.get("/reset_prefix_cache").mock(return_value=rust(405))
    with pytest.raises(RouteNotServedError, match="/is_paused"):
        await dc.wait_until_paused(deadline=5)


async def test_weight_update_on_a_release_without_the_routes_resumes_and_names_the_route(
    dc: Either, mock: respx.MockRouter
) -> None:
    """vLLM 0.28.0's Rust frontend has no weight-transfer routes: the flow still resumes."""
    mock.post("/pause").mock(return_value=rust(200, json={"status": "paused"}))
    mock.get("/is_paused").mock(return_value=rust(200, json={"is_paused": True}))
    mock.post("/start_weight_update").mock(return_value=rust(404))
    mock.get("/reset_prefix_cache").mock(return_value=rust(405))
    resume = mock.post("/resume").mock(return_value=rust(200, json={"status": "resumed"}))
    finish = mock.post("/finish_weight_update")
    client = dc.client
    with pytest.raises(RouteNotServedError, match="/start_weight_update"):
        if isinstance(client, AsyncDevClient):
            async with client.weight_update(weight_version="v1"):
                pass
        else:
            with client.weight_update(weight_version="v1"):
                pass
    assert resume.call_count == 1 and finish.call_count == 0


@pytest.mark.parametrize(
    ("response", "frontend"),
    [
        (
            python(
                500,
                json={
                    "error": {
                        "message": "Call to reset_prefix_cache method failed: blocks still held",
                        "type": "InternalServerError",
                        "param": None,
                        "code": 500,
                    }
                },
            ),
            "python",
        ),
        (
            rust(
                500, json={"error": {"message": RUST_ENGINE_MSG, "type": "InternalServerError", "code": 500}}
            ),
            "rust",
        ),
        (
            python(
                500,
                json={
                    "error": "Failed to pause generation: "
                    "Call to reset_prefix_cache method failed: blocks still held"
                },
            ),
            "python",
        ),
    ],
)
async def test_engine_call_error_both_shapes(
    dc: Either, mock: respx.MockRouter, response: httpx.Response, frontend: str
) -> None:
    route = mock.post("/reset_prefix_cache").mock(return_value=response)
    with pytest.raises(EngineCallError) as info:
        await dc.reset_prefix_cache()
    assert info.value.engine_method == "reset_prefix_cache"
    assert not hasattr(info.value, "method")  # one name per meaning: engine_method, http_method
    assert info.value.engine_message == "blocks still held"
    assert info.value.http_method == "POST"
    assert info.value.frontend == frontend
    assert route.call_count == 1  # a 500 is never retried


async def test_health_503_is_engine_dead_and_not_retried(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.get("/health").mock(return_value=python(503))
    with pytest.raises(EngineDeadError, match="restart"):
        await dc.health()
    assert route.call_count == 1


async def test_idempotent_route_retries_gateway_errors(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.post("/reset_prefix_cache").mock(
        side_effect=[rust(502), rust(503), python(200, json={"success": True})]
    )
    assert (await dc.reset_prefix_cache()).success is True
    assert route.call_count == 3


async def test_retries_are_bounded(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.get("/is_paused").mock(return_value=rust(504))
    with pytest.raises(InternalServerError):
        await dc.is_paused()
    assert route.call_count == 3  # first try + max_retries=2


async def test_non_idempotent_route_is_never_resent_after_it_may_have_arrived(
    dc: Either, mock: respx.MockRouter
) -> None:
    route = mock.post("/collective_rpc").mock(side_effect=httpx.ReadError("connection reset"))
    with pytest.raises(APIConnectionError):
        await dc.collective_rpc("m")
    assert route.call_count == 1
    route.reset()
    route.mock(side_effect=[rust(503), rust(200, json={"results": [1]})])
    with pytest.raises(ServiceUnavailableError):
        await dc.collective_rpc("m")
    assert route.call_count == 1


async def test_connect_errors_are_retried_even_on_non_idempotent_routes(
    dc: Either, mock: respx.MockRouter
) -> None:
    route = mock.post("/update_weights").mock(
        side_effect=[httpx.ConnectError("refused"), python(200, json={"message": "Weights updated"})]
    )
    assert (await dc.update_weights({"names": []})).message == "Weights updated"
    assert route.call_count == 2


async def test_timeout_is_typed_and_not_resent_on_non_idempotent(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.post("/collective_rpc").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(APITimeoutError) as info:
        await dc.collective_rpc("m", timeout=0.1)
    assert isinstance(info.value, APIConnectionError)
    assert route.call_count == 1


async def test_timeout_on_idempotent_route_retries_then_raises(dc: Either, mock: respx.MockRouter) -> None:
    route = mock.get("/is_sleeping").mock(side_effect=httpx.ReadTimeout("slow"))
    with pytest.raises(APITimeoutError):
        await dc.is_sleeping()
    assert route.call_count == 3


def test_per_call_timeout_reaches_the_request() -> None:
    seen: list[object] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200, json={"is_paused": False})

    client = DevClient(BASE, timeout=7.0, http_client=httpx.Client(transport=httpx.MockTransport(handler)))
    client.is_paused()
    client.is_paused(timeout=0.25)
    # What is left of each try's whole-call budget when the request goes out.
    assert 6.5 < seen[0]["read"] <= 7.0  # type: ignore[index,operator]
    assert 0.0 < seen[1]["read"] <= 0.25  # type: ignore[index,operator]


def test_real_timeout_against_a_silent_server() -> None:
    """A socket that accepts and never answers, like a hung engine call: the client's timeout ends it."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with DevClient(f"http://127.0.0.1:{port}", max_retries=0) as client, pytest.raises(APITimeoutError):
            client.reset_prefix_cache(timeout=0.3)


def test_connection_refused_is_typed() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with (
        DevClient(f"http://127.0.0.1:{port}", max_retries=1) as client,
        pytest.raises(APIConnectionError) as info,
    ):
        client.health()
    assert not isinstance(info.value, APITimeoutError)


async def test_a_dropped_connection_resends_only_idempotent_routes(
    dc: Either, mock: respx.MockRouter
) -> None:
    # After an engine-error 500 the Python frontend closes the connection. An idempotent route meeting that
    # stale connection is resent once on a new one; a route that is not safe to repeat is never resent.
    mock.post("/reset_prefix_cache").mock(return_value=python(500, json={"error": {"message": "x"}}))
    rpc = mock.post("/collective_rpc").mock(
        side_effect=[httpx.RemoteProtocolError("Server disconnected without sending a response.")]
    )
    paused = mock.get("/is_paused").mock(
        side_effect=[
            httpx.RemoteProtocolError("Server disconnected without sending a response."),
            python(200, json={"is_paused": False}),
        ]
    )
    with pytest.raises(InternalServerError):
        await dc.reset_prefix_cache()
    with pytest.raises(APIConnectionError):
        await dc.collective_rpc("m")
    assert rpc.call_count == 1
    assert await Either(dc.client.with_options(max_retries=0)).is_paused() is False
    assert paused.call_count == 2


async def test_reset_without_a_preceding_500_is_not_resent(dc: Either, mock: respx.MockRouter) -> None:
    rpc = mock.post("/collective_rpc").mock(side_effect=httpx.ReadError("connection reset by peer"))
    with pytest.raises(APIConnectionError):
        await dc.collective_rpc("m")
    assert rpc.call_count == 1
