from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import respx

from vllm_devclient import AsyncDevClient, DevClient

BASE = "http://vllm.test"

PY = {"server": "uvicorn"}  # what the Python frontend always sends; the Rust one sends no server header


class Either:
    """Calls a DevClient or an AsyncDevClient the same way, so each test runs against both."""

    def __init__(self, client: DevClient | AsyncDevClient) -> None:
        self.client = client
        self.kind = "async" if isinstance(client, AsyncDevClient) else "sync"

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)

        async def invoke(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result

        return invoke


@pytest.fixture(autouse=True)
def _httpx_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    # respx mocks httpx: the unit tests here send through httpx (the default transports meet real sockets in
    # tests/test_transports.py and contract_tests/).
    monkeypatch.setenv("VLLM_DEVCLIENT_TRANSPORT", "httpx")


@pytest.fixture
def mock() -> respx.MockRouter:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture(params=["sync", "async"])
async def dc(request: pytest.FixtureRequest, mock: respx.MockRouter) -> AsyncIterator[Either]:
    kw: dict[str, Any] = {"api_key": "sk-secret-123", "max_retries": 2, "timeout": 2.0}
    if request.param == "sync":
        client: DevClient | AsyncDevClient = DevClient(BASE, **kw)
    else:
        client = AsyncDevClient(BASE, **kw)
    yield Either(client)
    if isinstance(client, AsyncDevClient):
        await client.close()
    else:
        client.close()


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    # Retries sleep for real; keep the unit suite quick without changing the policy's shape.
    from vllm_devclient.operations import RetryPolicy

    monkeypatch.setattr(RetryPolicy, "delay", lambda self, retry: 0.001)


def rust(status: int, **kw: Any) -> httpx.Response:
    return httpx.Response(status, **kw)


def python(status: int, **kw: Any) -> httpx.Response:
    headers = {**PY, **kw.pop("headers", {})}
    return httpx.Response(status, headers=headers, **kw)
