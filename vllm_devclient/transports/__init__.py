"""How requests travel: the default transports (h11 sync pool, aiohttp async pool) or a user's httpx client.

`transport="auto"` (the default) picks the fast transports, unless a proxy from the environment applies to
the server (httpx honours those; ours do not) or the user passed `http_client=`. `transport="httpx"`
makes an httpx client of our own (for respx in tests: set `VLLM_DEVCLIENT_TRANSPORT=httpx`).
"""

from __future__ import annotations

import urllib.request
from typing import Literal, Protocol

import httpx

from ..errors import InvalidParameterError
from .base import (
    ConnectFailed,
    ConnectionDropped,
    Origin,
    ProtocolViolation,
    TransportError,
    TransportTimeout,
    WireRequest,
    WireResponse,
)
from .tls import CertArg, TLSConfig, TLSFailure, VerifyArg

__all__ = [
    "AsyncTransport",
    "CertArg",
    "ConnectFailed",
    "ConnectionDropped",
    "Origin",
    "ProtocolViolation",
    "SyncTransport",
    "TLSConfig",
    "TLSFailure",
    "TransportError",
    "TransportKind",
    "TransportTimeout",
    "VerifyArg",
    "WireRequest",
    "WireResponse",
    "make_async_transport",
    "make_sync_transport",
    "transport_kind",
]

TransportKind = Literal["auto", "httpx"]
TRANSPORT_KINDS = ("auto", "httpx")


class SyncTransport(Protocol):
    def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> WireResponse: ...
    def close(self) -> None: ...


class AsyncTransport(Protocol):
    async def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> WireResponse: ...
    async def aclose(self) -> None: ...


def _proxied(origin: Origin) -> bool:
    proxies = urllib.request.getproxies_environment()
    if origin.scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass_environment(origin.host, proxies)  # type: ignore[attr-defined]


def transport_kind(value: object) -> TransportKind:
    """`value` as a transport kind; InvalidParameterError naming the kinds when it is none."""
    if value not in TRANSPORT_KINDS:
        raise InvalidParameterError(f"transport must be one of {', '.join(TRANSPORT_KINDS)}, got {value!r}")
    return value  # type: ignore[return-value]  # one of TRANSPORT_KINDS


def _use_httpx(kind: TransportKind, origin: Origin) -> bool:
    return transport_kind(kind) == "httpx" or _proxied(origin)


def make_sync_transport(
    kind: TransportKind, origin: Origin, http_client: httpx.Client | None, tls: TLSConfig
) -> SyncTransport:
    from .httpx_adapter import HttpxTransport

    if http_client is not None:
        return HttpxTransport(http_client, owned=False)
    if _use_httpx(kind, origin):
        return HttpxTransport(httpx.Client(verify=tls.context()), owned=True, tls=tls)
    from .h11_pool import H11Pool

    return H11Pool(tls=tls)


def make_async_transport(
    kind: TransportKind, origin: Origin, http_client: httpx.AsyncClient | None, tls: TLSConfig
) -> AsyncTransport:
    from .httpx_adapter import AsyncHttpxTransport

    if http_client is not None:
        return AsyncHttpxTransport(http_client, owned=False)
    if _use_httpx(kind, origin):
        return AsyncHttpxTransport(httpx.AsyncClient(verify=tls.context()), owned=True, tls=tls)
    from .aiohttp_pool import AiohttpPool

    return AiohttpPool(tls=tls)
