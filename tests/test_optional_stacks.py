"""The HTTP packages are optional: the default path needs only h11; httpx and httpx2 clients are taken alike.

- a process where httpx, httpx2 and aiohttp cannot be imported runs both clients and a fleet on the SDK's
  own pools, raw responses included; a plain process imports none of them until one is asked for;
- a transport asked for whose package is missing is a `MissingExtraError` naming the extra;
- `http_client=` takes an httpx or an httpx2 client (each of the right kind) and nothing else;
- an httpx2 client carries every call (`httpx2.MockTransport`, which respx, an httpx-only mock, cannot
  replace): typed answers, raw responses that are httpx2's own, typed errors, its Timeout;
- `Timeout`, the package's own, is what httpx's and httpx2's are to `timeout=`.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import pickle
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from vllm_devclient import (
    APIConnectionError,
    APITimeoutError,
    AsyncDevClient,
    DevClient,
    InternalServerError,
    InvalidParameterError,
    MissingExtraError,
    Timeout,
)
from vllm_devclient import arguments as check
from vllm_devclient.fleet import AsyncFleet
from vllm_devclient.testing.bounds import timeout_bound
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer, Trickle
from vllm_devclient.transports import WireResponse
from vllm_devclient.transports.asyncio_pool import AsyncioPool
from vllm_devclient.transports.httpx_adapter import HttpxTransport

ROOT = Path(__file__).resolve().parents[1]
BASE = "http://vllm-0.example:8000"
OPTIONAL = ("httpx", "httpx2", "aiohttp")
needs_httpx2 = pytest.mark.skipif(
    importlib.util.find_spec("httpx2") is None,
    reason="httpx2 is not installed (the [httpx2] extra, Python 3.11+; `make setup` installs it)",
)


@pytest.fixture
def server() -> Iterator[MisbehavingServer]:
    with MisbehavingServer() as srv:
        srv.script("/is_paused", Answer(200, json={"is_paused": False}))
        yield srv


def _python(code: str, *args: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("VLLM_DEVCLIENT_TRANSPORT", None)
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


# ---- the default path --------------------------------------------------------------------------------------

WITHOUT_STACKS = """
import asyncio, json, sys
for name in ("httpx", "httpx2", "aiohttp", "httpcore", "httpcore2", "anyio"):
    sys.modules[name] = None  # `import name` fails as if it were not installed
from vllm_devclient import AsyncDevClient, DevClient, MissingExtraError
from vllm_devclient.fleet import AsyncFleet, Fleet
from vllm_devclient.transports import WireResponse

url, out = sys.argv[1], {}
with DevClient(url) as client:
    raw = client.with_raw_response.is_paused()
    out["sync"] = [type(client._transport).__name__, raw.parsed, type(raw.http_response).__name__,
                   raw.http_response.request.target]

async def main():
    async with AsyncDevClient(url) as client:
        raw = await client.with_raw_response.is_paused()
        out["async"] = [type(client._transport).__name__, raw.parsed, type(raw.http_response).__name__,
                        raw.http_response.request.target]
    async with AsyncFleet([url]) as fleet:
        out["fleet"] = [type(fleet._transport).__name__, list((await fleet.is_paused()).ok.values())]

asyncio.run(main())
with Fleet([url]) as fleet:
    out["sync fleet"] = list(fleet.is_paused().ok.values())
for kind in ("httpx", "httpx2", "aiohttp"):
    try:
        AsyncDevClient(url, transport=kind)
    except MissingExtraError as exc:
        out[kind] = [exc.extra, exc.name, str(exc)]
print(json.dumps(out, default=list))
"""


def test_without_httpx_httpx2_or_aiohttp_both_clients_and_fleets_run_on_the_sdks_pools(
    server: MisbehavingServer,
) -> None:
    out = _python(WITHOUT_STACKS, server.base_url)
    assert out["sync"] == ["H11Pool", False, "WireResponse", "/is_paused"]
    assert out["async"] == ["AsyncioPool", False, "WireResponse", "/is_paused"]
    assert out["fleet"] == ["AsyncioPool", [False]]
    assert out["sync fleet"] == [False]
    for kind in ("httpx", "httpx2", "aiohttp"):
        extra, name, message = out[kind]
        assert (extra, name) == (kind, kind)
        assert f"transport='{kind}' needs {kind}" in message
        assert f"pip install 'vllm-devclient[{kind}]'" in message
    assert server.count("/is_paused") == 4


PLAIN = """
import json, sys
import vllm_devclient
after_import = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2:]))
from vllm_devclient import DevClient
with DevClient(sys.argv[1]) as client:
    client.is_paused()
after_call = sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[2:]))
print(json.dumps([after_import, after_call]))
"""


def test_importing_the_package_and_a_sync_call_load_no_optional_http_stack(server: MisbehavingServer) -> None:
    assert _python(PLAIN, server.base_url, *OPTIONAL) == [[], []]


# ---- a package asked for and missing -----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _auto_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite's conftest sends through httpx (for respx); "auto" is what is tested here.
    monkeypatch.delenv("VLLM_DEVCLIENT_TRANSPORT", raising=False)


@pytest.fixture
def missing(monkeypatch: pytest.MonkeyPatch) -> Any:
    def hide(*names: str) -> None:
        for name in names:
            monkeypatch.setitem(sys.modules, name, None)

    return hide


@pytest.mark.parametrize("kind", ["httpx", "httpx2"])
def test_an_httpx_transport_without_its_package_names_the_extra(kind: str, missing: Any) -> None:
    missing(kind)
    for make in (DevClient, AsyncDevClient):
        with pytest.raises(MissingExtraError) as info:
            make(BASE, transport=kind)  # type: ignore[arg-type]
        assert info.value.extra == kind and isinstance(info.value, ImportError)
        assert f"pip install 'vllm-devclient[{kind}]'" in str(info.value)


def test_aiohttp_asked_for_and_missing_names_its_extra_and_auto_falls_back_to_the_asyncio_pool(
    missing: Any,
) -> None:
    missing("aiohttp")
    with pytest.raises(MissingExtraError, match=r"pip install 'vllm-devclient\[aiohttp\]'"):
        AsyncDevClient(BASE, transport="aiohttp")
    assert isinstance(AsyncDevClient(BASE)._transport, AsyncioPool)
    assert type(DevClient(BASE, transport="aiohttp")._transport).__name__ == "H11Pool"  # aiohttp is async


def test_a_proxy_goes_through_an_httpx_client_and_without_one_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, missing: Any
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    transport = DevClient(BASE)._transport
    assert isinstance(transport, HttpxTransport) and transport.stack is httpx
    missing("httpx", "httpx2")
    with pytest.raises(MissingExtraError) as info:
        DevClient(BASE)
    assert "a proxy from the environment applies to vllm-0.example:8000" in str(info.value)
    assert "[httpx]" in str(info.value) and "NO_PROXY" in str(info.value)


# ---- http_client= ------------------------------------------------------------------------------------------


def test_http_client_takes_an_httpx_client_and_refuses_anything_else_naming_what_to_pass() -> None:
    with pytest.raises(InvalidParameterError) as info:
        DevClient(BASE, http_client=object())  # type: ignore[arg-type]
    assert "http_client must be an httpx.Client or an httpx2.Client, got builtins.object" in str(info.value)
    with pytest.raises(InvalidParameterError, match=r"\(an AsyncClient is for AsyncDevClient\)"):
        DevClient(BASE, http_client=httpx.AsyncClient())  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"must be an httpx.AsyncClient or an httpx2.AsyncClient"):
        AsyncDevClient(BASE, http_client=httpx.Client())  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"must be an httpx\.AsyncClient"):
        AsyncFleet([BASE], http_client=httpx.Client())  # type: ignore[arg-type]


# ---- an httpx2 client --------------------------------------------------------------------------------------


def _mock(handler: Any) -> Any:
    import httpx2

    return httpx2.MockTransport(handler)


def _answers(request: Any) -> Any:
    import httpx2

    if request.url.path == "/reset_prefix_cache":
        return httpx2.Response(200, json={"success": True}, headers={"x-id": "7"})
    if request.url.path == "/boom":
        return httpx2.Response(500, json={"error": "engine broke"})
    return httpx2.Response(200, json={"is_paused": True})


@needs_httpx2
def test_an_httpx2_client_carries_sync_calls_and_raw_responses_are_httpx2s() -> None:
    import httpx2

    http = httpx2.Client(transport=_mock(_answers))
    with DevClient(BASE, api_key="sk-two", http_client=http) as client:
        assert client.is_paused() is True
        raw = client.with_raw_response.reset_prefix_cache(reset_external=True)
        assert raw.parsed.success is True
        assert isinstance(raw.http_response, httpx2.Response)
        assert raw.status_code == 200 and raw.headers["X-Id"] == "7"
        sent = raw.http_response.request
        assert (
            sent.url.params["reset_external"] == "true" and sent.headers["authorization"] == "Bearer sk-two"
        )
        any_request = client.request("GET", "/is_paused")
        assert isinstance(any_request, httpx2.Response) and any_request.json() == {"is_paused": True}
        with pytest.raises(InternalServerError, match="engine broke"):
            client.request("GET", "/boom")
    assert not http.is_closed  # the SDK leaves your client open
    http.close()


@needs_httpx2
async def test_an_httpx2_async_client_carries_calls_and_fleets() -> None:
    import httpx2

    async with httpx2.AsyncClient(transport=_mock(_answers)) as http:
        async with AsyncDevClient(BASE, http_client=http) as client:
            raw = await client.with_raw_response.is_paused()
            assert raw.parsed is True and isinstance(raw.http_response, httpx2.Response)
            assert raw.http_response.request.url == f"{BASE}/is_paused"
        async with AsyncFleet([BASE, "http://vllm-1.example:8000"], http_client=http) as fleet:
            assert list((await fleet.is_paused()).ok.values()) == [True, True]


@needs_httpx2
@pytest.mark.parametrize(
    ("failure", "error", "words"),
    [
        ("ConnectError", APIConnectionError, "cannot connect to vllm-0.example:8000"),
        ("ReadTimeout", APITimeoutError, "no complete answer in time"),
    ],
)
def test_an_httpx2_client_failure_is_the_sdks_typed_error(failure: str, error: type, words: str) -> None:
    import httpx2

    def fail(request: Any) -> Any:
        raise getattr(httpx2, failure)("down", request=request)

    with DevClient(BASE, http_client=httpx2.Client(transport=_mock(fail)), max_retries=0) as client:
        with pytest.raises(error) as info:
            client.is_paused()
    assert words in str(info.value)


@needs_httpx2
def test_an_httpx2_timeout_is_a_timeout() -> None:
    import httpx2

    given = httpx2.Timeout(3.0, connect=1.0)
    client = DevClient(BASE, timeout=given, transport="h11")
    assert client.timeout is given and client._config.timeout == check.Timeouts(1.0, 3.0)


@needs_httpx2
def test_transport_httpx2_makes_an_httpx2_client_of_the_sdks_own() -> None:
    import httpx2

    transport = DevClient(BASE, transport="httpx2")._transport
    assert isinstance(transport, HttpxTransport) and transport.stack is httpx2
    assert isinstance(transport.client, httpx2.Client)


@pytest.mark.parametrize("stack", ["httpx", pytest.param("httpx2", marks=needs_httpx2)])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_timeout_bounds_a_trickled_body_over_a_users_client(
    server: MisbehavingServer, stack: str, mode: str
) -> None:
    """The sync adapter reads the body through a stream that stops at the deadline (httpx bounds each read
    only); the async one runs the exchange under one wait_for. The same for httpx and httpx2."""
    server.script("/is_paused", Trickle(Answer(200, json={"is_paused": False, "pad": "x" * 60}), part="body"))
    module = importlib.import_module(stack)
    start = time.monotonic()
    with pytest.raises(APITimeoutError, match="no complete answer in time"):
        if mode == "sync":
            with DevClient(server.base_url, http_client=module.Client(), max_retries=0) as client:
                client.is_paused(timeout=0.5)
        else:

            async def go() -> None:
                async with AsyncDevClient(
                    server.base_url, http_client=module.AsyncClient(), max_retries=0
                ) as client:
                    await client.is_paused(timeout=0.5)

            asyncio.run(go())
    assert time.monotonic() - start <= timeout_bound(0.5)


# ---- the asyncio pool through a client ---------------------------------------------------------------------


def test_transport_h11_keeps_async_clients_on_the_sdks_asyncio_pool(server: MisbehavingServer) -> None:
    async def go() -> Any:
        async with AsyncDevClient(server.base_url, transport="h11") as client:
            assert isinstance(client._transport, AsyncioPool)
            return await asyncio.gather(*(client.with_raw_response.is_paused() for _ in range(20)))

    raws = asyncio.run(go())
    assert {(r.parsed, type(r.http_response)) for r in raws} == {(False, WireResponse)}
    assert server.connections <= 20


# ---- Timeout -----------------------------------------------------------------------------------------------


def test_timeout_is_httpxs_shape_without_httpx() -> None:
    ours = Timeout(30.0, connect=5.0)
    assert (ours.connect, ours.read, ours.write, ours.pool) == (5.0, 30.0, 30.0, 30.0)
    assert repr(ours) == "Timeout(30.0, connect=5.0)" and ours == Timeout(30, connect=5)
    assert pickle.loads(pickle.dumps(ours)) == ours and hash(ours) == hash(Timeout(30, connect=5))
    assert check.timeout(ours) == check.timeout(httpx.Timeout(30.0, connect=5.0)) == check.Timeouts(5.0, 30.0)
    assert check.timeout(Timeout(None, connect=2)) == check.Timeouts(2.0, None)
    with pytest.raises(AttributeError, match="immutable"):
        ours.read = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError, match="Timeout connect must be seconds or None, got str"):
        Timeout(1.0, connect="5")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match=r"timeout\.read must be a finite number"):
        check.timeout(Timeout(-1.0, connect=1.0))
    with pytest.raises(InvalidParameterError, match=r"timeout must be seconds, a Timeout .* got 'soon'"):
        check.timeout("soon")
