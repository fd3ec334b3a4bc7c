"""A dev route the served release lacks, on both real frontends in dev mode: `RouteNotServedError`, named by
its path, after one probe (`GET /reset_prefix_cache`) that never reaches the engine. With dev mode off the
same 404 is `DevModeDisabledError` (the `dev_off_*` scenarios); the routes vLLM 0.25.1 and 0.28.0 really lack
are in their recorded fixtures (`rust_fixtures/`, replayed by tests/test_replay.py).
"""

from __future__ import annotations

import logging

import pytest

from vllm_devclient import AsyncDevClient, DevClient, DevModeDisabledError, RouteNotServedError
from vllm_devclient.answers import raw_answer
from vllm_devclient.endpoints import Endpoint
from vllm_devclient.testing.frontends import Frontend

pytestmark = pytest.mark.frontend

# 0.33.0 serves every route the SDK has a method for: a dev-route exchange of a path no release serves stands
# in for a route of a newer vLLM that this one lacks.
LACKED = Endpoint("POST", "/abort_weight_update", raw_answer)


def _check(error: RouteNotServedError, frontend: Frontend) -> None:
    assert not isinstance(error, DevModeDisabledError)
    assert (error.status_code, error.http_method, error.path) == (404, "POST", "/abort_weight_update")
    assert "the route /abort_weight_update is missing from this server" in str(error)
    assert "VLLM_SERVER_DEV_MODE" not in str(error)
    assert frontend.engine.calls == []


def test_a_route_the_release_lacks_is_named_missing(
    frontend: Frontend, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="vllm_devclient"), DevClient(frontend.base_url) as client:
        with pytest.raises(RouteNotServedError) as info:
            client._send(LACKED, {})
        _check(info.value, frontend)
        assert client.is_sleeping() is False  # dev mode is on indeed
    sent = [r.getMessage().split(" -> ")[0] for r in caplog.records if " -> " in r.getMessage()]
    assert sent == ["POST /abort_weight_update", "GET /reset_prefix_cache", "GET /is_sleeping"]


async def test_the_async_client_names_it_the_same_way(frontend: Frontend) -> None:
    async with AsyncDevClient(frontend.base_url) as client:
        with pytest.raises(RouteNotServedError) as info:
            await client._send(LACKED, {})
    _check(info.value, frontend)
