"""What a transport is given and gives back: one request, one answer, and the failures it may report.

A transport sends one `WireRequest` and returns a `WireResponse` (status, headers, body fully read) or
raises a `TransportError` that states the facts the retry rule needs: whether the request may have
reached the server (`sent`) and whether any byte of an answer came back (`answered`). Deciding what to do
about it is not the transport's business (see `operations.call`).

Deadlines are absolute `time.monotonic()` values and bound the whole exchange: connecting, sending and
reading the status line, the headers and the body. No transport lets a server that trickles its answer
one byte at a time hold a call past its deadline.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

__all__ = [
    "CUT_OFF_MIN",
    "BodyCutOff",
    "ConnectFailed",
    "ConnectionDropped",
    "Origin",
    "ProtocolViolation",
    "TransportError",
    "TransportTimeout",
    "WireRequest",
    "WireResponse",
    "connect_failed",
    "cut_off",
    "fold_headers",
]


@dataclass(frozen=True)
class Origin:
    """Where a client's requests go: scheme, host, port, and a path prefix (a server behind a proxy)."""

    scheme: Literal["http", "https"]
    host: str
    port: int
    prefix: str = ""

    # Cached: every request of a client asks for them (a frozen dataclass still has a __dict__ for this).
    @functools.cached_property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"

    @functools.cached_property
    def root(self) -> str:
        return f"{self.scheme}://{self.host_header}"


class WireRequest(NamedTuple):
    """One HTTP request, ready to send. `target` is the path with its query, the origin's prefix included.

    `fresh_connection`: send it on a new connection, never on a pooled one. Requests that are not safe to
    repeat travel that way, so a connection the server closed while it sat in the pool can never take one
    down half-sent.
    """

    method: str
    origin: Origin
    target: str
    headers: tuple[tuple[str, str], ...]
    body: bytes | None
    fresh_connection: bool = False

    @property
    def url(self) -> str:
        return self.origin.root + self.target


def fold_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Header pairs as one mapping with lower-case names; a repeated header's values joined by ", "."""
    out: dict[str, str] = {}
    for name, value in pairs:
        key = name.lower()
        out[key] = f"{out[key]}, {value}" if key in out else value
    return out


class WireResponse:
    """A whole answer of the SDK's own pools: status, headers (names lower-case), body, and the request it
    answers (`request`, set when it becomes a `RawResponse.http_response`)."""

    __slots__ = ("content", "headers", "request", "status_code")

    def __init__(
        self,
        status_code: int,
        headers: Mapping[str, str],
        content: bytes,
        request: WireRequest | None = None,
    ) -> None:
        self.status_code = status_code
        self.headers = headers
        self.content = content
        self.request = request

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    def json(self) -> Any:
        return json.loads(self.content)

    def __repr__(self) -> str:
        return f"<WireResponse [{self.status_code}]>"


class TransportError(Exception):
    """The exchange failed. `sent`: the request may have reached the server; `answered`: some of the
    answer had arrived."""

    sent: bool = True
    answered: bool = False

    def __init__(self, reason: str, *, sent: bool | None = None, answered: bool | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        if sent is not None:
            self.sent = sent
        if answered is not None:
            self.answered = answered


class ConnectFailed(TransportError):
    """No connection could be made: nothing was sent."""

    sent = False


def connect_failed(host_header: str, error: BaseException) -> ConnectFailed:
    """``cannot connect to HOST: REASON`` in the same words on every transport: the OS's words for the
    errno (asyncio says "Connect call failed ('127.0.0.1', 8000)", a socket "Connection refused")."""
    return ConnectFailed(f"cannot connect to {host_header}: {_reason(error)}")


def _reason(error: BaseException) -> str:
    """The errno's words from the first OSError with one in the chain (groups included), else the text."""
    todo: list[BaseException] = [error]
    seen: list[BaseException] = []
    while todo:
        current = todo.pop(0)
        if any(current is e for e in seen):
            continue
        seen.append(current)
        if isinstance(current, OSError) and current.errno is not None and current.errno > 0:
            return os.strerror(current.errno)
        if isinstance(current, OSError) and current.strerror:  # a DNS failure: errno < 0, its own words
            return current.strerror
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo += list(getattr(current, "exceptions", ()))  # an exception group's members
    # asyncio's "Multiple exceptions: [Errno 111] ..., [Errno 111] ..." (one per address) keeps only text.
    numbers = {int(n) for e in seen for n in re.findall(r"\[Errno (\d+)\]", str(e))}
    return os.strerror(numbers.pop()) if len(numbers) == 1 else str(error)


class TransportTimeout(TransportError):
    """The deadline passed (or, while connecting, the connect timeout)."""


class ConnectionDropped(TransportError):
    """The connection broke: reset, or closed by the server, before the answer was complete."""


# A send that breaks on a body this large is told as a body cut off (a smaller one breaks for other reasons).
CUT_OFF_MIN = 1 << 20


def cut_off(body: bytes | None) -> int | None:
    """The body's size when a broken send of it is likely the server refusing its size, else None."""
    return len(body) if body is not None and len(body) >= CUT_OFF_MIN else None


class BodyCutOff(ConnectionDropped):
    """The connection broke while the request body was being sent (`during_send`; else, where the client
    cannot tell, before any answer to a large body): a server over its body limit answers, or resets,
    before it has read the body."""

    def __init__(self, size: int, error: object, *, during_send: bool = True) -> None:
        when = (
            f"while the {size}-byte request body was being sent"
            if during_send
            else f"without answering a {size}-byte request body"
        )
        super().__init__(
            f"the server closed the connection {when} ({error}): likely over its body limit (vllm-rs reads "
            "at most 32 MiB): send weights as IPC handles (CUDA IPC: only handles travel), in chunks under "
            "the limit, or through the Python frontend"
        )
        self.size = size
        self.during_send = during_send


class ProtocolViolation(TransportError):
    """The server's answer is not valid HTTP/1.1."""

    answered = True
