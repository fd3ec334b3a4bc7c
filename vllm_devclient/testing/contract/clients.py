"""The one place the test harness builds SDK clients: the runner, the parity report, the recorder and the
replay all come through :func:`make_client`.

`transport` is where the requests go instead of the network's default (a :class:`RecordingTransport`,
a replay `MockTransport`). The caller owns it and closes it after the client (closing the transport is all
that closing the HTTP client around it would do); without one, the client owns its own pool.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeVar, overload

import httpx

from ...client import AsyncDevClient, DevClient

__all__ = ["ClientKind", "HasBaseUrl", "make_client"]

ClientKind = Literal["sync", "async"]


class HasBaseUrl(Protocol):
    @property
    def base_url(self) -> str: ...


Transport = httpx.BaseTransport | httpx.AsyncBaseTransport


@overload
def make_client(
    target: str | HasBaseUrl,
    *,
    kind: Literal["sync"],
    transport: Transport | None = None,
    api_key: str = "",
    timeout: float = 10.0,
    max_retries: int = 0,
) -> DevClient: ...


@overload
def make_client(
    target: str | HasBaseUrl,
    *,
    kind: Literal["async"],
    transport: Transport | None = None,
    api_key: str = "",
    timeout: float = 10.0,
    max_retries: int = 0,
) -> AsyncDevClient: ...


def make_client(
    target: str | HasBaseUrl,
    *,
    kind: ClientKind,
    transport: Transport | None = None,
    api_key: str = "",
    timeout: float = 10.0,
    max_retries: int = 0,
) -> DevClient | AsyncDevClient:
    """A `DevClient` (`kind="sync"`) or `AsyncDevClient` (`kind="async"`) for `target` (a base URL or
    anything with a `base_url`). `api_key=""` sends no key (not even $VLLM_API_KEY's)."""
    base_url = target if isinstance(target, str) else target.base_url
    options: dict[str, Any] = {"api_key": api_key, "timeout": timeout, "max_retries": max_retries}
    if kind == "sync":
        http = None
        if transport is not None:
            http = httpx.Client(transport=_as(transport, httpx.BaseTransport), timeout=timeout)
        return DevClient(base_url, http_client=http, **options)
    if kind == "async":
        ahttp = None
        if transport is not None:
            ahttp = httpx.AsyncClient(transport=_as(transport, httpx.AsyncBaseTransport), timeout=timeout)
        return AsyncDevClient(base_url, http_client=ahttp, **options)
    raise ValueError(f"kind must be 'sync' or 'async', got {kind!r}")


_T = TypeVar("_T")


def _as(transport: Transport, base: type[_T]) -> _T:
    if not isinstance(transport, base):
        raise TypeError(f"{type(transport).__name__} is not an {base.__name__}: it cannot serve this client")
    return transport
