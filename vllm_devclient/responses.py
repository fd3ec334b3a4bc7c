"""What an HTTP answer is to the readers and errors: a transport's `WireResponse` or an `httpx.Response`.

A protocol at the bottom of the package, so that `errors` (which quotes answers) and `transports` (which make
them) both stand on it and neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

__all__ = ["ResponseLike"]


class ResponseLike(Protocol):
    """What the answer readers need: a `WireResponse`, or an `httpx.Response`."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def content(self) -> bytes: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...
