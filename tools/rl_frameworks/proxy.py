"""A recording reverse proxy: what reached a server, whoever sent it.

`RecordingProxy(backend_url)` listens on 127.0.0.1 (a free port) and forwards each HTTP/1.1 request to the
backend as it came (method, path, query, headers but the hop-by-hop ones, body), and its answer back as it
came (status, headers, body; no header of its own). Before forwarding it logs the request: method, path,
query (the pairs in order, as the server parses them), body (JSON decoded when it is JSON); the status is
added once the backend answered (None if it did not). `take()` hands out the log and empties it.

It sits in front of a real frontend so that raw requests (httpx) and the SDK's own transports (h11, aiohttp)
are observed the same way, on the wire. Bodies come with a Content-Length or chunked; a request whose body
cannot be read gets a 400 and is logged with that status.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["RecordingProxy"]

# Headers that describe one connection, not the request (RFC 9110 7.6.1), and the ones the proxy rewrites.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)
_BACKEND_TIMEOUT_S = 120.0


class RecordingProxy:
    """A logging reverse proxy in front of `backend_url` (http://host:port), for as long as it is open."""

    def __init__(self, backend_url: str) -> None:
        parts = urllib.parse.urlsplit(backend_url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"backend_url must be http://host:port, got {backend_url!r}")
        self.backend = (parts.hostname, parts.port)
        self._log: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> RecordingProxy:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="recording-proxy", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def take(self) -> list[dict[str, Any]]:
        """The requests logged since the last take, oldest first."""
        with self._lock:
            taken, self._log = self._log, []
        return taken

    def _logged(self, entry: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._log.append(entry)
        return entry


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # an idle keep-alive connection must not hold up close()
    proxy: RecordingProxy


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # the log is the proxy's, not stderr
        return

    def do_GET(self) -> None:
        self._forward()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def _forward(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        entry = {
            "method": self.command,
            "path": url.path,
            "query": [list(p) for p in urllib.parse.parse_qsl(url.query, keep_blank_values=True)],
        }
        try:
            body = self._body()
        except ValueError as error:
            self.server.proxy._logged({**entry, "body": None, "status": 400})
            self._answer(400, [("Content-Type", "text/plain")], str(error).encode())
            return
        logged = self.server.proxy._logged(
            {**entry, "body": _decoded(body, self.headers.get("content-type"))}
        )
        status, headers, answer = self._backend(body)
        logged["status"] = status
        self._answer(status or 502, headers, answer)

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return self._chunked()
        length = self.headers.get("content-length")
        if length is None:
            return b""
        if not length.isdigit():
            raise ValueError(f"bad Content-Length {length!r}")
        return self.rfile.read(int(length))

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = self.rfile.readline(1024).split(b";")[0].strip()
            try:
                size = int(size_line, 16)
            except ValueError:
                raise ValueError(f"bad chunk size {size_line!r}") from None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _backend(self, body: bytes) -> tuple[int | None, list[tuple[str, str]], bytes]:
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers.pop("Content-Length", None)
        if body or self.command in ("POST", "PUT", "PATCH"):
            headers["Content-Length"] = str(len(body))
        connection = http.client.HTTPConnection(*self.server.proxy.backend, timeout=_BACKEND_TIMEOUT_S)
        try:
            connection.request(self.command, self.path, body=body or None, headers=headers)
            response = connection.getresponse()
            answer = response.read()
        except (OSError, http.client.HTTPException) as error:
            return None, [("Content-Type", "text/plain")], f"backend: {error!r}".encode()
        finally:
            connection.close()
        kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP_BY_HOP | {"content-length"}]
        return response.status, kept, answer

    def _answer(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.send_response_only(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


def _decoded(body: bytes, content_type: str | None) -> Any:
    """The body as the log keeps it: None when empty, the JSON value when it is JSON, else its text."""
    if not body:
        return None
    if content_type and "json" in content_type.lower():
        try:
            return json.loads(body)
        except ValueError:
            pass
    return body.decode("utf-8", "replace")
