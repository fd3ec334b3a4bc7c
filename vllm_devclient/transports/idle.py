"""The kept-alive connections of a pool, per origin, without I/O or locking: both of the SDK's pools
(`h11_pool`, `asyncio_pool`) keep them here; the blocking pool holds its lock around each call.

A connection is checked out newest first, skipping (and closing) any past `expiry` seconds idle or no longer
usable; one checked in beyond `limit` per origin is closed.
"""

from __future__ import annotations

import time
from typing import Generic, Protocol, TypeVar

__all__ = ["IdleConnections"]


class _Kept(Protocol):
    idle_since: float
    fresh: bool

    def usable(self, now: float, expiry: float) -> bool: ...
    def close(self) -> None: ...


C = TypeVar("C", bound=_Kept)


class IdleConnections(Generic[C]):
    def __init__(self, limit: int, expiry: float) -> None:
        self._by_origin: dict[object, list[C]] = {}
        self._limit = limit
        self._expiry = expiry

    def checkout(self, origin: object) -> C | None:
        idle = self._by_origin.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if conn.usable(now, self._expiry):
                return conn
            conn.close()
        return None

    def checkin(self, origin: object, conn: C) -> None:
        conn.idle_since = time.monotonic()
        conn.fresh = False
        idle = self._by_origin.setdefault(origin, [])
        if len(idle) < self._limit:
            idle.append(conn)
        else:
            conn.close()

    def close_all(self) -> None:
        kept, self._by_origin = self._by_origin, {}
        for idle in kept.values():
            for conn in idle:
                conn.close()
