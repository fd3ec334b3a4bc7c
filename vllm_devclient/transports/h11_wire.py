"""One HTTP/1.1 exchange as h11 speaks it, without I/O: the bytes of a request, and an answer read from the
bytes that arrive. The SDK's two pools (`h11_pool`, over blocking sockets; `asyncio_pool`, over asyncio
streams) move the bytes; what the bytes mean, and which failures they are, is decided here once.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import h11

from .base import ConnectionDropped, ProtocolViolation, WireRequest, WireResponse, fold_headers

__all__ = ["READ_SIZE", "AnswerReader", "request_bytes"]

# How many bytes a pool asks its socket for at a time.
READ_SIZE = 65536


def request_bytes(conn: h11.Connection, request: WireRequest) -> bytes:
    """The whole request on the wire (Host and Content-Length added); a `ProtocolViolation`, nothing sent,
    when it is not valid HTTP/1.1."""
    headers = [("Host", request.origin.host_header), *request.headers]
    if request.body is not None:
        headers.append(("Content-Length", str(len(request.body))))
    try:
        data = conn.send(h11.Request(method=request.method, target=request.target, headers=headers))
        if request.body:
            data += conn.send(h11.Data(data=request.body))
        data += conn.send(h11.EndOfMessage())
    except h11.LocalProtocolError:
        # h11's message would quote the offending header value, which may be a credential.
        raise ProtocolViolation("the request is not valid HTTP/1.1", sent=False, answered=False) from None
    return data


class AnswerReader:
    """Reads one answer off `conn`: `step()` until it gives the answer, `feed()`ing what the socket reads
    whenever it gives None. `closed_note()` is what to add when the server closes without a word (see
    `tls.unanswered_note`); `answered` says whether any byte of the answer has come."""

    __slots__ = ("_chunks", "_closed_note", "_conn", "_headers", "_status", "answered")

    def __init__(self, conn: h11.Connection, closed_note: Callable[[], str]) -> None:
        self._conn = conn
        self._closed_note = closed_note
        self.answered = False
        self._status = 0
        self._headers: dict[str, str] = {}
        self._chunks: list[bytes] = []

    def feed(self, data: bytes) -> None:
        """Bytes read from the socket; b"" when the server closed it."""
        if not data and not self.answered:
            raise ConnectionDropped(
                "the server closed the connection without answering" + self._closed_note()
            )
        self.answered = True
        try:
            self._conn.receive_data(data)
        except h11.RemoteProtocolError as exc:
            raise ProtocolViolation(f"invalid HTTP answer: {exc}") from None

    def step(self) -> WireResponse | None:
        """The whole answer once it has arrived, else None (more bytes are needed)."""
        while True:
            try:
                event = self._conn.next_event()
            except h11.RemoteProtocolError as exc:
                raise ProtocolViolation(f"invalid HTTP answer: {exc}", answered=self.answered) from None
            if event is h11.NEED_DATA:
                return None
            if isinstance(event, h11.Response):
                self._status = event.status_code
                self._headers = fold_headers(
                    (n.decode("latin-1"), v.decode("latin-1")) for n, v in event.headers
                )
            elif isinstance(event, h11.Data):
                self._chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return WireResponse(self._status, self._headers, self._body())
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionDropped("the server closed the connection mid-answer", answered=True)
            # InformationalResponse (1xx): nothing to keep.

    def _body(self) -> bytes:
        body = b"".join(self._chunks)
        encoding = self._headers.get("content-encoding", "").lower()
        if encoding in ("gzip", "deflate"):
            try:
                body = zlib.decompress(body, 31 if encoding == "gzip" else 15)
            except zlib.error as exc:
                raise ProtocolViolation(f"cannot decode the {encoding} body: {exc}") from None
        return body

    @property
    def reusable(self) -> bool:
        """Whether the connection may carry another exchange (both sides done with this one)."""
        return self._conn.our_state is h11.DONE and self._conn.their_state is h11.DONE
