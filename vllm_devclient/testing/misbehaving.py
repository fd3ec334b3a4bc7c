"""A raw HTTP/1.1 server that misbehaves on purpose, scripted per route and per request number.

Fault tests need a server that does what no well-behaved framework will: hang, trickle, reset, close a
connection right after answering, send 50 MB error pages or JSON nested 100 000 deep. This one is plain
sockets and threads (no framework), binds 127.0.0.1 on a free port, and logs every request it read, so a
test can count how often a route reached it::

    from vllm_devclient.testing.misbehaving import Answer, Close, MisbehavingServer

    with MisbehavingServer() as server:
        server.script("/collective_rpc", [Answer(500, json={"error": "boom"}), Close()])
        ...  # call server.base_url with the client under test
        assert server.count("/collective_rpc") == 2

The spec
--------
Routing. A request is routed by its path (the query string is not part of the route) and, when a script
names one, its method. `script(path, actions)` gives the route a list of behaviours: the route's n-th
request (counting from 1, every request the server read to completion, on any connection) gets
`actions[n - 1]`, and the last action sticks (`[Hang()] * 2 + [Answer()]`: two hangs, then answers).
A route without a script gets `default` (404 with a JSON body unless told otherwise). Scripts may be
replaced while the server runs; `reset()` forgets scripts, counters and the log.

The log. A request is logged once it has been read to completion (head and body) and before its
behaviour starts, as a `ReceivedRequest`: method, path, query, headers (names lower-cased, in order),
body, arrival time (`time.monotonic()`), connection id (1, 2, ... in accept order), its number on that
connection and its number on its route. A request that was never read (see `close_after` and the
`never_read` / `never_accept` modes) is not logged: it never reached the server. `requests`,
`requests_to(path)`, `count(path)` and `wait_for(path, n)` read the log; `connections` counts accepted
connections.

Behaviours (frozen dataclasses; the `Behaviour` union):

- `Answer(status, json=..., body=..., headers=..., server=None, delay=0, close_after=None,
  connection_close=False)`: a complete response with a `Content-Length`. `json` (any JSON value) wins over
  `body` and sets `Content-Type: application/json`. `server` is the value of a `server` header (None: no
  such header, as the Rust frontend sends). `delay` waits before answering. `close_after` closes the
  connection that many seconds after the answer, with no `Connection: close` header: what uvicorn does
  after an engine-error 500. During that delay the server does not read, so a request the client sends on
  the connection meanwhile is never read nor logged, and the close resets it (the stale-connection race).
  `connection_close=True` sends `Connection: close` and closes (the polite way).
- `Trickle(answer, part="head" | "body" | "all", interval=0.1, chunk=1)`: `answer`'s bytes, the chosen
  part sent `chunk` bytes every `interval` seconds (the rest at once): a slow-loris server that keeps every
  socket read within any per-read timeout.
- `HugeBody(status=500, size=50 MiB, content_type="text/html; charset=utf-8", server=None)`: an error page
  of `size` bytes, streamed.
- `DeepJSON(depth=100_000, status=200, server=None)`: `[[[...]]]` nested `depth` deep.
- `EchoHeader(name="authorization", status=401, server=None)`: a JSON error whose message repeats the
  request's header `name` (what a careless auth proxy does with a bad key).
- `Redirect(location, status=307)`: a redirect, usually to another origin.
- `Hang()`: read the request, never answer (the connection stays open until the client or the server
  closes it).
- `Close()`: read the request, then close the connection without answering (FIN).
- `Reset()`: read the request, then reset the connection (RST, through SO_LINGER 0).

Server-wide settings (`MisbehavingServer(...)`):

- `mode="serve"` (the default) serves as above; `"never_read"` accepts connections and never reads from
  them (a black hole that completed the TCP handshake in user space); `"never_accept"` listens and never
  accepts (the kernel completes handshakes up to the backlog; nothing is ever read).
- `keep_alive=T`: close an idle keep-alive connection when no next request starts within T seconds of
  the last answer (FIN; uvicorn's `--timeout-keep-alive`, 5 s there). None (default): keep it open.

Connections are HTTP/1.1 keep-alive unless the request says `Connection: close`. Requests with
`Content-Length` or `Transfer-Encoding: chunked` bodies are read whole; `Expect: 100-continue` is honoured.
A request head over 64 KiB or one that cannot be parsed gets a 400 and a close. `close()` (or leaving the
`with` block) stops everything: hung and trickling answers end, every socket is closed, threads joined.
"""

from __future__ import annotations

import contextlib
import json as _json
import os
import select
import socket
import struct
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from types import TracebackType
from typing import Any, Literal, TypeAlias

from . import processes

__all__ = [
    "Answer",
    "Behaviour",
    "Close",
    "DeepJSON",
    "EchoHeader",
    "Hang",
    "HugeBody",
    "MisbehavingServer",
    "ReceivedRequest",
    "Redirect",
    "Reset",
    "Trickle",
]

_MAX_HEAD = 64 * 1024
_POLL = 0.05  # s: how often a hung answer looks whether its client went away


class _NoJSON:
    def __repr__(self) -> str:
        return "NO_JSON"


_NO_JSON: Any = _NoJSON()


# ---- behaviours ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A complete response; see the module docstring for `close_after` and `connection_close`."""

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
Mode: TypeAlias = Literal["serve", "never_read", "never_accept"]


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Status"


# ---- the log ---------------------------------------------------------------------------------------------


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


class _BadRequest(Exception):
    pass


class _Closed(Exception):
    """The peer closed, the socket failed, or the server is stopping."""


# ---- one connection --------------------------------------------------------------------------------------


class _Connection:
    def __init__(self, server: MisbehavingServer, sock: socket.socket, cid: int) -> None:
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


# ---- the server ------------------------------------------------------------------------------------------


class MisbehavingServer:
    """A scripted raw HTTP/1.1 server on 127.0.0.1; see the module docstring (the spec)."""

    def __init__(
        self,
        *,
        default: Behaviour | None = None,
        mode: Mode = "serve",
        keep_alive: float | None = None,
        backlog: int = 128,
    ) -> None:
        if mode not in ("serve", "never_read", "never_accept"):
            raise ValueError(f"mode must be 'serve', 'never_read' or 'never_accept', got {mode!r}")
        if keep_alive is not None and not keep_alive > 0:
            raise ValueError(f"keep_alive must be None or > 0 seconds, got {keep_alive!r}")
        self.default: Behaviour = (
            default if default is not None else Answer(404, json={"detail": "Not Found"})
        )
        _check_behaviour(self.default)
        self.mode: Mode = mode
        self.keep_alive = keep_alive
        self._backlog = backlog
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._scripts: dict[tuple[str, str | None], list[Behaviour]] = {}
        self._route_counts: dict[tuple[str, str | None], int] = {}
        self._log: list[ReceivedRequest] = []
        self._connections: dict[int, _Connection] = {}
        self._held: list[socket.socket] = []
        self._accepted = 0
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._wake_r = self._wake_w = -1  # a pipe written once when the server stops: wakes every select
        self._listener: socket.socket | None = None
        self.host = "127.0.0.1"
        self.port = 0

    # -- lifecycle

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> MisbehavingServer:
        if self._listener is not None:
            raise RuntimeError("this MisbehavingServer was already started")
        listener = processes.listener(self.host, backlog=self._backlog)
        self._wake_r, self._wake_w = os.pipe()
        self._listener = listener
        self.port = int(listener.getsockname()[1])
        if self.mode != "never_accept":
            self._spawn(self._accept_loop, "misbehaving-accept")
        return self

    def close(self) -> None:
        """Stop serving: end hung and trickling answers, close every socket, join the threads."""
        self._stop.set()
        if self._wake_w >= 0:
            os.write(self._wake_w, b"x")
        with self._lock:
            conns = list(self._connections.values())
            held, self._held = self._held, []
            threads = list(self._threads)
        for conn in conns:
            conn.close("shutdown")
        for sock in held:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(5)
        with self._lock:  # whatever the accept loop took in meanwhile
            late, self._held = self._held, []
            conns = list(self._connections.values())
        for sock in late:
            with contextlib.suppress(OSError):
                sock.close()
        for conn in conns:
            conn.close("shutdown")
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._wake_r = self._wake_w = -1

    def __enter__(self) -> MisbehavingServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MisbehavingServer({self.base_url}, mode={self.mode!r}, {len(self._log)} requests)"

    # -- scripting

    def script(
        self, path: str, actions: Behaviour | Iterable[Behaviour], *, method: str | None = None
    ) -> None:
        """Replace the script of route `path` (and `method`, when given): actions in order, the last sticks.

        A script for (path, method) takes precedence over one for the path alone. The route's request
        count is kept: the next request gets the action after the ones already used.
        """
        items = [actions] if isinstance(actions, _BEHAVIOURS) else list(actions)
        if not items:
            raise ValueError(f"script for {path!r} is empty: give at least one behaviour")
        for action in items:
            _check_behaviour(action)
        with self._lock:
            self._scripts[(path, method.upper() if method else None)] = items

    def reset(self) -> None:
        """Forget scripts, route counters and the log (connections already open stay open)."""
        with self._lock:
            self._scripts.clear()
            self._route_counts.clear()
            self._log.clear()

    def clear_log(self) -> None:
        """Forget the log and route counters, keep the scripts (they start from their first action)."""
        with self._lock:
            self._route_counts.clear()
            self._log.clear()

    # -- the log

    @property
    def requests(self) -> list[ReceivedRequest]:
        """Every request read so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._log)

    def requests_to(self, path: str, method: str | None = None) -> list[ReceivedRequest]:
        """The requests read on route `path` (and `method`, when given)."""
        wanted = method.upper() if method else None
        return [r for r in self.requests if r.path == path and (wanted is None or r.method == wanted)]

    def count(self, path: str, method: str | None = None) -> int:
        """How many requests on route `path` reached the server (were read)."""
        return len(self.requests_to(path, method))

    @property
    def connections(self) -> int:
        """How many connections were accepted so far."""
        with self._lock:
            return self._accepted

    def wait_for(self, path: str, count: int = 1, deadline: float = 5.0) -> list[ReceivedRequest]:
        """Block until `count` requests on `path` were read; TimeoutError after `deadline` seconds."""
        end = time.monotonic() + deadline
        with self._arrived:
            while True:
                found = [r for r in self._log if r.path == path]
                if len(found) >= count:
                    return found
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(found)} of {count} requests to {path} within {deadline} s")
                self._arrived.wait(left)

    # -- internals

    def _spawn(self, target: Any, name: str, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        listener = self._listener
        wake = self._wake_r
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([listener.fileno(), wake], [], [])
                if wake in ready:
                    return
                sock, _ = listener.accept()
            except (OSError, ValueError):
                return
            sock.setblocking(True)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._accepted += 1
                cid = self._accepted
                if self.mode == "never_read":
                    self._held.append(sock)
                    continue
                conn = self._connections[cid] = _Connection(self, sock, cid)
            self._spawn(self._serve, f"misbehaving-conn-{cid}", conn)

    def _serve(self, conn: _Connection) -> None:
        try:
            while not self._stop.is_set():
                if conn.served and self.keep_alive is not None and not conn.wait_readable(self.keep_alive):
                    return  # idle keep-alive connection: close it (FIN)
                try:
                    method, path, query, headers, body = conn.read_request()
                except _BadRequest as exc:
                    head, payload = Answer(400, body=str(exc), connection_close=True).head_and_body()
                    conn.send(head + payload)
                    return
                conn.served += 1
                action, request = self._record(conn, method, path, query, headers, body)
                if not self._perform(conn, action, request):
                    return
                if (request.header("connection") or "").lower() == "close":
                    return
        except _Closed:
            return
        finally:
            conn.close()
            with self._lock:
                self._connections.pop(conn.cid, None)

    def _record(
        self,
        conn: _Connection,
        method: str,
        path: str,
        query: str,
        headers: tuple[tuple[str, str], ...],
        body: bytes,
    ) -> tuple[Behaviour, ReceivedRequest]:
        with self._arrived:
            key: tuple[str, str | None] = (path, method.upper())
            if key not in self._scripts:
                key = (path, None)
            number = self._route_counts.get(key, 0) + 1
            self._route_counts[key] = number
            script = self._scripts.get(key)
            action = script[min(number, len(script)) - 1] if script else self.default
            request = ReceivedRequest(
                method=method,
                path=path,
                query=query,
                headers=headers,
                body=body,
                time=time.monotonic(),
                connection=conn.cid,
                number_on_connection=conn.served,
                number=number,
            )
            self._log.append(request)
            self._arrived.notify_all()
        return action, request

    def _perform(self, conn: _Connection, action: Behaviour, request: ReceivedRequest) -> bool:
        """Carry out one behaviour; False when the connection must end."""
        if isinstance(action, Hang):
            conn.hang()
            return False
        if isinstance(action, Close):
            conn.close()
            return False
        if isinstance(action, Reset):
            conn.close("reset")
            return False
        if isinstance(action, HugeBody):
            head, _ = Answer(
                action.status,
                headers={"content-type": action.content_type, "content-length": str(action.size)},
                server=action.server,
            ).head_and_body()
            conn.send(head)
            for piece in _page(action.size):
                conn.send(piece)
            return True
        if isinstance(action, Trickle):
            return self._trickle(conn, action)
        answer = _as_answer(action, request)
        conn.sleep(answer.delay)
        head, body = answer.head_and_body()
        conn.send(head + body)
        return self._after(conn, answer)

    def _trickle(self, conn: _Connection, action: Trickle) -> bool:
        answer = action.answer
        conn.sleep(answer.delay)
        head, body = answer.head_and_body()
        if action.part in ("head", "all"):
            conn.trickle(head, action.interval, action.chunk)
        else:
            conn.send(head)
        if action.part in ("body", "all"):
            conn.trickle(body, action.interval, action.chunk)
        else:
            conn.send(body)
        return self._after(conn, answer)

    @staticmethod
    def _after(conn: _Connection, answer: Answer) -> bool:
        if answer.connection_close:
            return False
        if answer.close_after is not None:
            conn.sleep(answer.close_after)  # reading nothing meanwhile
            return False
        return True


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
