"""One connection of the misbehaving server: reading requests (HTTP/1.1 heads, bodies of a length or
chunked), writing answers whole or trickled, hanging, and closing with a FIN or a reset. The spec is
`misbehaving`'s module docstring."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
import time
from typing import Literal, Protocol

__all__: list[str] = []

_MAX_HEAD = 64 * 1024
_POLL = 0.05  # s: how often a hung answer looks whether its client went away


class _Server(Protocol):
    """What a connection reads of its server: the stop event, and the pipe that wakes every select."""

    _stop: threading.Event
    _wake_r: int


class _BadRequest(Exception):
    pass


class _Closed(Exception):
    """The peer closed, the socket failed, or the server is stopping."""


class _Connection:
    def __init__(self, server: _Server, sock: socket.socket, cid: int) -> None:
        self.server = server
        self.sock = sock
        self.cid = cid
        self.buffer = b""
        self.served = 0
        self.closed = False

    # -- reading

    def _fill(self, deadline: float | None = None) -> bool:
        """Read more bytes into the buffer; False when `deadline` passed first. Raises _Closed on EOF."""
        wake = self.server._wake_r
        while not self.server._stop.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            try:
                ready, _, _ = select.select([self.sock.fileno(), wake], [], [], left)
            except (OSError, ValueError) as exc:
                raise _Closed from exc
            if wake in ready:
                raise _Closed
            if not ready:
                continue
            try:
                data = self.sock.recv(65536)
            except OSError as exc:
                raise _Closed from exc
            if not data:
                raise _Closed
            self.buffer += data
            return True
        raise _Closed

    def _read_until(self, marker: bytes, limit: int) -> bytes:
        while marker not in self.buffer:
            if len(self.buffer) > limit:
                raise _BadRequest("request head too large")
            self._fill()
        data, _, self.buffer = self.buffer.partition(marker)
        return data

    def _read_exact(self, n: int) -> bytes:
        while len(self.buffer) < n:
            self._fill()
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _read_chunked(self) -> bytes:
        body = b""
        while True:
            size_line = self._read_until(b"\r\n", _MAX_HEAD)
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError as exc:
                raise _BadRequest("bad chunk size") from exc
            if size == 0:
                while self._read_until(b"\r\n", _MAX_HEAD):  # trailers, up to the blank line
                    pass
                return body
            body += self._read_exact(size)
            self._read_exact(2)

    def read_request(self) -> tuple[str, str, str, tuple[tuple[str, str], ...], bytes]:
        head = self._read_until(b"\r\n\r\n", _MAX_HEAD)
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ", 2)
        except ValueError as exc:
            raise _BadRequest(f"bad request line {lines[0]!r}") from exc
        headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise _BadRequest(f"bad header line {line!r}")
            headers.append((name.strip().lower(), value.strip()))
        found = dict(headers)
        if found.get("expect", "").lower() == "100-continue":
            self.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in found.get("transfer-encoding", "").lower():
            body = self._read_chunked()
        else:
            try:
                length = int(found.get("content-length", "0"))
            except ValueError as exc:
                raise _BadRequest("bad content-length") from exc
            body = self._read_exact(length)
        path, _, query = target.partition("?")
        return method, path, query, tuple(headers), body

    def wait_readable(self, deadline: float) -> bool:
        """Whether a next request starts (bytes buffered or arriving) within `deadline` seconds."""
        if self.buffer:
            return True
        return self._fill(time.monotonic() + deadline)

    # -- writing

    def send(self, data: bytes) -> None:
        if self.server._stop.is_set():
            raise _Closed
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise _Closed from exc

    def trickle(self, data: bytes, interval: float, chunk: int) -> None:
        for i in range(0, len(data), max(1, chunk)):
            self.send(data[i : i + max(1, chunk)])
            if self.server._stop.wait(interval):
                raise _Closed

    def sleep(self, seconds: float) -> None:
        if seconds > 0 and self.server._stop.wait(seconds):
            raise _Closed

    def hang(self) -> None:
        """Wait, reading nothing, until the peer closes or the server stops."""
        wake = self.server._wake_r
        while True:
            try:
                ready, _, _ = select.select([self.sock.fileno(), wake], [], [])
                if wake in ready or not self.sock.recv(1, socket.MSG_PEEK):
                    return  # the server stops, or the client went away
            except (OSError, ValueError):
                return
            # The client sent more (never read while hanging): look again later.
            if self.server._stop.wait(_POLL):
                return

    # -- closing

    def close(self, how: Literal["close", "reset", "shutdown"] = "close") -> None:
        """How: "close" is a plain close (FIN, or RST from the kernel when unread bytes are pending, as any
        server's close does); "reset": RST; "shutdown": FIN first, which also wakes a thread of ours blocked
        sending to a client that stopped reading (used when the server stops)."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError):
            if how == "reset":
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif how == "shutdown":
                self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()
