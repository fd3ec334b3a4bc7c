"""How the misbehaving server carries out a behaviour on one connection, once the request is read and logged
(the spec is `misbehaving`'s module docstring)."""

from __future__ import annotations

from .misbehaving_behaviours import (
    Answer,
    Behaviour,
    Close,
    Hang,
    HugeBody,
    Reset,
    Trickle,
    _as_answer,
    _page,
)
from .misbehaving_connection import _Connection
from .misbehaving_log import ReceivedRequest

__all__ = ["perform"]


def perform(conn: _Connection, action: Behaviour, request: ReceivedRequest) -> bool:
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
        return _trickle(conn, action)
    answer = _as_answer(action, request)
    conn.sleep(answer.delay)
    head, body = answer.head_and_body()
    conn.send(head + body)
    return _after(conn, answer)


def _trickle(conn: _Connection, action: Trickle) -> bool:
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
    return _after(conn, answer)


def _after(conn: _Connection, answer: Answer) -> bool:
    if answer.connection_close:
        return False
    if answer.close_after is not None:
        conn.sleep(answer.close_after)  # reading nothing meanwhile
        return False
    return True
