"""What an HTTP answer is to the readers, the errors and the user: a transport's `WireResponse`, or the
`httpx.Response` / `httpx2.Response` of an httpx or httpx2 client.

A protocol at the bottom of the package, so that `errors` (which quotes answers) and `transports` (which make
them) both stand on it and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["HTTPResponse", "ResponseLike"]


class ResponseLike(Protocol):
    """What the answer readers need: a `WireResponse`, an `httpx.Response` or an `httpx2.Response`."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


class HTTPResponse(ResponseLike, Protocol):
    """`RawResponse.http_response` and what `request()` answers: the response object of the stack that
    answered, its body read. An `httpx.Response` from an httpx client (yours, or `transport="httpx"`), an
    `httpx2.Response` from an httpx2 client, a `vllm_devclient.transports.WireResponse` from the SDK's own
    pools (h11, asyncio, aiohttp; its `request` is the `WireRequest` sent). What all three have is typed
    here; `isinstance` gives the rest of each."""

    @property
    def is_success(self) -> bool: ...
