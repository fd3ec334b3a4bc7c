"""How requests travel: the SDK's own pools, aiohttp's, or an httpx / httpx2 client (the user's or ours).

`transport="auto"` (the default): sync clients send over the SDK's h11 pool; async ones over aiohttp's pool
when aiohttp is installed (the `[aiohttp]` extra: the fastest), else over the SDK's asyncio h11 pool. A user's
`http_client=` (an httpx or httpx2 client) is used instead of either, and a proxy from the environment that
applies to the server (the SDK's pools do not go through proxies) switches to an httpx client of our own
(httpx2 when only that is installed). `transport="h11"` keeps the SDK's pools, `"aiohttp"` asks for
aiohttp's (async; a sync client keeps the h11 pool), `"httpx"` and `"httpx2"` make a client of that package
(for respx in tests: `VLLM_DEVCLIENT_TRANSPORT=httpx`). Only the default path's packages (h11) are needed;
asking for another whose package is missing is a `MissingExtraError` naming the extra, when the client is
made.
"""

from __future__ import annotations

import importlib.util
import urllib.request
from types import ModuleType
from typing import TYPE_CHECKING, Literal, Protocol

from ..errors import InvalidParameterError, MissingExtraError
from ..responses import ResponseLike
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
from .stacks import HTTPX_STACKS, load, stack_of
from .tls import CertArg, TLSConfig, TLSFailure, VerifyArg

if TYPE_CHECKING:
    import httpx
    import httpx2

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

TransportKind = Literal["auto", "h11", "aiohttp", "httpx", "httpx2"]
TRANSPORT_KINDS = ("auto", "h11", "aiohttp", "httpx", "httpx2")


class SyncTransport(Protocol):
    def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> ResponseLike: ...
    def close(self) -> None: ...


class AsyncTransport(Protocol):
    async def send(
        self, request: WireRequest, *, connect_timeout: float | None, deadline: float | None
    ) -> ResponseLike: ...
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


def _own_httpx(kind: TransportKind, origin: Origin) -> ModuleType | None:
    """The module (httpx or httpx2) of the client the SDK makes for itself, or None for its own pools."""
    kind = transport_kind(kind)
    if kind in HTTPX_STACKS:
        return load(kind, f"transport={kind!r}")
    if not _proxied(origin):
        return None
    for name in HTTPX_STACKS:
        try:
            return load(name, "")
        except MissingExtraError:
            continue
    raise MissingExtraError(
        f"a proxy from the environment applies to {origin.host_header}, and the SDK's own pools do not go "
        "through proxies: pip install 'vllm-devclient[httpx]' (or [httpx2]) to send through it, or add the "
        "host to NO_PROXY",
        extra="httpx",
        name="httpx",
    )


def make_sync_transport(
    kind: TransportKind, origin: Origin, http_client: httpx.Client | httpx2.Client | None, tls: TLSConfig
) -> SyncTransport:
    from .httpx_adapter import HttpxTransport

    if http_client is not None:
        return HttpxTransport(http_client, stack_of(http_client, asynchronous=False), owned=False)
    stack = _own_httpx(kind, origin)
    if stack is not None:
        return HttpxTransport(stack.Client(verify=tls.context()), stack, owned=True, tls=tls)
    from .h11_pool import H11Pool

    return H11Pool(tls=tls)


def make_async_transport(
    kind: TransportKind,
    origin: Origin,
    http_client: httpx.AsyncClient | httpx2.AsyncClient | None,
    tls: TLSConfig,
) -> AsyncTransport:
    from .httpx_adapter import AsyncHttpxTransport

    if http_client is not None:
        return AsyncHttpxTransport(http_client, stack_of(http_client, asynchronous=True), owned=False)
    stack = _own_httpx(kind, origin)
    if stack is not None:
        return AsyncHttpxTransport(stack.AsyncClient(verify=tls.context()), stack, owned=True, tls=tls)
    if kind == "aiohttp" or (kind == "auto" and _has("aiohttp")):
        load("aiohttp", "transport='aiohttp'")
        from .aiohttp_pool import AiohttpPool

        return AiohttpPool(tls=tls)
    from .asyncio_pool import AsyncioPool

    return AsyncioPool(tls=tls)


def _has(module: str) -> bool:
    """Whether `module` can be imported (looked up, not imported)."""
    return importlib.util.find_spec(module) is not None
