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

The parts: the behaviours (`misbehaving_behaviours`), how each is carried out (`misbehaving_perform`), the
log's record (`misbehaving_log`) and one connection (`misbehaving_connection`); each name is imported from
the module that defines it.

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
import os
import select
import socket
import threading
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Literal, TypeAlias

from . import processes
from .misbehaving_behaviours import (
    _BEHAVIOURS,
    Answer,
    Behaviour,
    Close,
    Hang,
    HugeBody,
    Reset,
    Trickle,
    _check_behaviour,
)
from .misbehaving_connection import _BadRequest, _Closed, _Connection
from .misbehaving_log import ReceivedRequest
from .misbehaving_perform import perform

# With the server, the behaviours a script names most (as from `misbehaving_behaviours`).
__all__ = [
    "Answer",
    "Behaviour",
    "Close",
    "Hang",
    "HugeBody",
    "MisbehavingServer",
    "Mode",
    "Reset",
    "Trickle",
]

Mode: TypeAlias = Literal["serve", "never_read", "never_accept"]


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
                if not perform(conn, action, request):
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
