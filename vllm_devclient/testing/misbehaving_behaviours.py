"""What the misbehaving server does with a request: the behaviours a script names (the `Behaviour` union)
and the plain answer each one comes down to. The spec is `misbehaving`'s module docstring."""

from __future__ import annotations

import json as _json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Literal, TypeAlias

from .misbehaving_log import ReceivedRequest

__all__ = [
    "Answer",
    "Behaviour",
    "Close",
    "DeepJSON",
    "EchoHeader",
    "Hang",
    "HugeBody",
    "Redirect",
    "Reset",
    "Trickle",
]


class _NoJSON:
    def __repr__(self) -> str:
        return "NO_JSON"


_NO_JSON: Any = _NoJSON()


@dataclass(frozen=True)
class Answer:
    """A complete response; see `misbehaving`'s module docstring for `close_after` and `connection_close`."""

    status: int = 200
    json: Any = _NO_JSON
    body: bytes | str = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    server: str | None = None
    delay: float = 0.0
    close_after: float | None = None
    connection_close: bool = False

    def head_and_body(self) -> tuple[bytes, bytes]:
        """The response head (status line and headers, ending in a blank line) and body, as sent."""
        if self.json is not _NO_JSON:
            body = _json.dumps(self.json).encode()
            content_type: str | None = "application/json"
        else:
            body = self.body.encode() if isinstance(self.body, str) else self.body
            content_type = None
        lines = [f"HTTP/1.1 {self.status} {_reason(self.status)}"]
        given = {k.lower() for k in self.headers}
        if self.server is not None:
            lines.append(f"server: {self.server}")
        if content_type and "content-type" not in given:
            lines.append(f"content-type: {content_type}")
        if "content-length" not in given:
            lines.append(f"content-length: {len(body)}")
        if self.connection_close and "connection" not in given:
            lines.append("connection: close")
        lines += [f"{k}: {v}" for k, v in self.headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), body


@dataclass(frozen=True)
class Trickle:
    """`answer`'s bytes, the chosen part `chunk` bytes every `interval` seconds."""

    answer: Answer = field(default_factory=Answer)
    part: Literal["head", "body", "all"] = "head"
    interval: float = 0.1
    chunk: int = 1


@dataclass(frozen=True)
class HugeBody:
    """An error page of `size` bytes, streamed in 1 MiB pieces."""

    status: int = 500
    size: int = 50 * 1024 * 1024
    content_type: str = "text/html; charset=utf-8"
    server: str | None = None


@dataclass(frozen=True)
class DeepJSON:
    """`[[[...]]]` nested `depth` deep, as application/json."""

    depth: int = 100_000
    status: int = 200
    server: str | None = None


@dataclass(frozen=True)
class EchoHeader:
    """A JSON error whose message repeats the request's header `name` (empty when absent)."""

    name: str = "authorization"
    status: int = 401
    server: str | None = None


@dataclass(frozen=True)
class Redirect:
    """A redirect to `location` (usually another origin)."""

    location: str
    status: int = 307


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer."""


@dataclass(frozen=True)
class Close:
    """Read the request and close the connection without answering (FIN)."""


@dataclass(frozen=True)
class Reset:
    """Read the request and reset the connection (RST)."""


Behaviour: TypeAlias = Answer | Trickle | HugeBody | DeepJSON | EchoHeader | Redirect | Hang | Close | Reset
_BEHAVIOURS = (Answer, Trickle, HugeBody, DeepJSON, EchoHeader, Redirect, Hang, Close, Reset)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


def _check_behaviour(action: object) -> None:
    if not isinstance(action, _BEHAVIOURS):
        names = ", ".join(b.__name__ for b in _BEHAVIOURS)
        raise TypeError(f"{action!r} is not a behaviour; use one of {names}")


def _as_answer(action: Answer | DeepJSON | EchoHeader | Redirect, request: ReceivedRequest) -> Answer:
    if isinstance(action, Answer):
        return action
    if isinstance(action, DeepJSON):
        nested = "[" * action.depth + "]" * action.depth
        return Answer(
            action.status, body=nested, headers={"content-type": "application/json"}, server=action.server
        )
    if isinstance(action, EchoHeader):
        value = request.header(action.name) or ""
        message = f"invalid {action.name}: {value}"
        error = {"message": message, "type": "Unauthorized", "param": None, "code": action.status}
        return Answer(action.status, json={"error": error}, server=action.server)
    return Answer(action.status, headers={"location": action.location})


def _page(size: int) -> Iterator[bytes]:
    line = b"<p>internal error: the upstream answered nothing useful</p>\n"
    piece = (line * (1024 * 1024 // len(line) + 1))[: 1024 * 1024]
    left = size
    while left > 0:
        yield piece[: min(left, len(piece))]
        left -= len(piece)
