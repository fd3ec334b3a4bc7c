"""The misbehaving server's log: one `ReceivedRequest` per request it read to completion."""

from __future__ import annotations

import json as _json
from dataclasses import dataclass
from typing import Any

__all__ = ["ReceivedRequest"]


@dataclass(frozen=True)
class ReceivedRequest:
    """One request the server read to completion."""

    method: str
    path: str
    query: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    time: float
    connection: int
    number_on_connection: int
    number: int

    @property
    def target(self) -> str:
        """Path and query, as sent."""
        return f"{self.path}?{self.query}" if self.query else self.path

    def header(self, name: str) -> str | None:
        """The first value of header `name` (any case), or None."""
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)

    def json(self) -> Any:
        """The body parsed as JSON."""
        return _json.loads(self.body)
