"""`client.with_raw_response.<route>()` on every route record, on both real frontends, sync and async, over
the default transport and over a user's httpx2 client (`http_client=httpx2.Client()` / `AsyncClient()`).

Each route's scenario runs again with every route call going through `with_raw_response`: the call must give
a `RawResponse` whose `parsed` is what the plain call gives (the scenario's expectation still holds) and
whose `http_response` is the answer it was read from, as the stack that answered made it (the SDK's own
`WireResponse`, an `httpx2.Response`). Where a frontend answers the route with an error (the Rust frontend's
501 on /tokenizer_info), the raw call raises that same typed error.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
from typing import Any

import pytest

from vllm_devclient import RawResponse
from vllm_devclient.records import Route
from vllm_devclient.routes import ROUTES
from vllm_devclient.testing.contract import Scenario, arun_scenario, run_scenario
from vllm_devclient.testing.pool import FrontendPool
from vllm_devclient.testing.scenarios import SCENARIOS
from vllm_devclient.transports import WireResponse

pytestmark = [pytest.mark.frontend, pytest.mark.frontend_pool]

Seen = list[tuple[str, Any]]


def _scenario_of(route: Route) -> Scenario:
    """The scenario that shows the route best: one that calls it (alone, if possible) and succeeds on both
    frontends, if any does."""
    calling = [
        sc for sc in SCENARIOS if route.name in sc.methods_called() and sc.setup in ("default", "extras")
    ]
    assert calling, f"no scenario calls {route.name}"

    def rank(sc: Scenario) -> tuple[int, int]:
        errors = sum(sc.expect_for(fe).error for fe in ("python", "rust"))
        return errors, len(sc.methods_called())

    return min(calling, key=rank)


CASES = [(route, _scenario_of(route)) for route in ROUTES]


class _RawFace:
    """The client, but each route method answers through `with_raw_response` (noted in `seen`) and hands
    the scenario `parsed`, as the plain call would. Passes for the client in isinstance checks."""

    def __init__(self, client: Any, seen: Seen) -> None:
        self._client = client
        self._seen = seen

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._client)

    def __getattr__(self, name: str) -> Any:
        raw = getattr(type(self._client.with_raw_response), name, None)
        if raw is None:
            return getattr(self._client, name)
        method = getattr(self._client.with_raw_response, name)
        seen = self._seen
        if inspect.iscoroutinefunction(method):

            async def araw(*args: Any, **kwargs: Any) -> Any:
                answer = await method(*args, **kwargs)
                seen.append((name, answer))
                return answer.parsed

            return araw

        def raw_call(*args: Any, **kwargs: Any) -> Any:
            answer = method(*args, **kwargs)
            seen.append((name, answer))
            return answer.parsed

        return raw_call


HTTPX2 = pytest.param(
    "httpx2",
    marks=pytest.mark.skipif(
        importlib.util.find_spec("httpx2") is None,
        reason="httpx2 is not installed (the [httpx2] extra, Python 3.11+; `make setup` installs it)",
    ),
)


def _http_client(stack: str, mode: str) -> Any:
    """The user's client for the run: None for the default transport, else an httpx2 one."""
    if stack == "default":
        return None
    import httpx2

    return httpx2.Client() if mode == "sync" else httpx2.AsyncClient()


@pytest.mark.parametrize("stack", ["default", HTTPX2])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("route", "scenario"), CASES, ids=[route.name for route, _ in CASES])
async def test_with_raw_response_answers_a_raw_response(
    route: Route, scenario: Scenario, mode: str, stack: str, frontend: Any, frontend_pool: FrontendPool
) -> None:
    target = frontend if scenario.setup == "default" else frontend_pool.get(frontend.frontend, scenario.setup)
    seen: Seen = []
    raw = dataclasses.replace(scenario, call=lambda c: scenario.call(_RawFace(c, seen)))
    http_client = _http_client(stack, mode)
    try:
        if mode == "sync":
            run = run_scenario(raw, target, http_client=http_client)
        else:
            run = await arun_scenario(raw, target, http_client=http_client)
    finally:
        if http_client is not None:  # the SDK leaves a client of yours open
            closed = http_client.close() if mode == "sync" else http_client.aclose()
            if inspect.isawaitable(closed):
                await closed
    assert run.problems() == [], run.describe()
    answers = [answer for name, answer in seen if name == route.name]
    if scenario.expect_for(run.frontend).error:
        assert answers == [] and run.raised  # a non-2xx raises in raw mode too
        return
    assert answers, f"{route.name} was not called through with_raw_response: {seen}"
    # One exchange per route call: each RawResponse carries the answer its own request got.
    assert len(seen) == len(run.exchanges), run.describe()
    for (name, answer), exchange in zip(seen, run.exchanges, strict=True):
        assert isinstance(answer, RawResponse), (name, answer)
        assert exchange.response is not None
        assert answer.status_code == exchange.response["status"], name
        assert isinstance(answer.http_response.content, bytes), name
        sent = answer.http_response.request
        if stack == "default":
            assert isinstance(answer.http_response, WireResponse), (name, answer.http_response)
            method, path = sent.method, sent.target.partition("?")[0]
        else:
            import httpx2

            assert isinstance(answer.http_response, httpx2.Response), (name, answer.http_response)
            method, path = sent.method, sent.url.path
        assert (method, path) == (exchange.request["method"], exchange.request["path"]), name
