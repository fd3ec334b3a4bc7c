"""The one place the test harness builds SDK clients: the runner, the parity report, the recorder and the
replay all come through :func:`make_client`.

`transport` is where the requests go instead of the network's default (a :class:`RecordingTransport`,
a replay `MockTransport`). The caller owns it and closes it after the client (closing the transport is all
that closing the HTTP client around it would do); without one, the client owns its own pool.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, TypeVar, overload

import httpx

from ...client import AsyncDevClient, DevClient
from .transport import RecordingTransport, record_wire

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["ClientKind", "ClientOptions", "HasBaseUrl", "make_client"]

ClientKind = Literal["sync", "async"]


class HasBaseUrl(Protocol):
    @property
    def base_url(self) -> str: ...


Transport = httpx.BaseTransport | httpx.AsyncBaseTransport


class ClientOptions(TypedDict, total=False):
    """How the client is set up: `transport` (see the module docstring), `api_key` ("" by default: no key,
    not even $VLLM_API_KEY's), `timeout` (10 s), `max_retries` (0), `http_client` (live only: an httpx or
    httpx2 client of the user's to send with instead of the default transport, recorded the same way)."""

    transport: Transport | None
    api_key: str
    timeout: float
    max_retries: int
    http_client: Any


@overload
def make_client(
    target: str | HasBaseUrl, *, kind: Literal["sync"], **options: Unpack[ClientOptions]
) -> DevClient: ...
@overload
def make_client(
    target: str | HasBaseUrl, *, kind: Literal["async"], **options: Unpack[ClientOptions]
) -> AsyncDevClient: ...


def make_client(
    target: str | HasBaseUrl, *, kind: ClientKind, **options: Unpack[ClientOptions]
) -> DevClient | AsyncDevClient:
    """A `DevClient` (`kind="sync"`) or `AsyncDevClient` (`kind="async"`) for `target` (a base URL or
    anything with a `base_url`), set up by `options` (see :class:`ClientOptions`)."""
    base_url = target if isinstance(target, str) else target.base_url
    transport = options.get("transport")
    timeout = options.get("timeout", 10.0)
    settings: dict[str, Any] = {
        "api_key": options.get("api_key", ""),
        "timeout": timeout,
        "max_retries": options.get("max_retries", 0),
    }
    if kind not in ("sync", "async"):
        raise ValueError(f"kind must be 'sync' or 'async', got {kind!r}")
    if isinstance(transport, RecordingTransport) and transport.inner is None:
        # Live: the client's own default transport (what users get), or the user's http_client, recorded
        # underneath.
        client: DevClient | AsyncDevClient = (DevClient if kind == "sync" else AsyncDevClient)(
            base_url, transport="auto", http_client=options.get("http_client"), **settings
        )
        record_wire(client, transport)
        return client
    if kind == "sync":
        http = None
        if transport is not None:
            http = httpx.Client(transport=_as(transport, httpx.BaseTransport), timeout=timeout)
        return DevClient(base_url, http_client=http, **settings)
    ahttp = None
    if transport is not None:
        ahttp = httpx.AsyncClient(transport=_as(transport, httpx.AsyncBaseTransport), timeout=timeout)
    return AsyncDevClient(base_url, http_client=ahttp, **settings)


_T = TypeVar("_T")


def _as(transport: Transport, base: type[_T]) -> _T:
    if not isinstance(transport, base):
        raise TypeError(f"{type(transport).__name__} is not an {base.__name__}: it cannot serve this client")
    return transport
