"""What `timeout=` takes besides seconds: a `Timeout` of this package, or httpx's or httpx2's.

The four phase limits are httpx's (connect, read, write, pool), so an `httpx.Timeout` or an
`httpx2.Timeout` passes as it is and neither package is needed for one of ours. How the four become one
try's bounds is `arguments.timeout`'s business.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Timeout", "TimeoutLike"]


class TimeoutLike(Protocol):
    """Anything with httpx's four phase limits (seconds, None for none): `Timeout`, `httpx.Timeout`,
    `httpx2.Timeout`."""

    @property
    def connect(self) -> float | None: ...
    @property
    def read(self) -> float | None: ...
    @property
    def write(self) -> float | None: ...
    @property
    def pool(self) -> float | None: ...


_SAME = object()  # a phase not given takes `timeout`'s value


class Timeout:
    """Phase limits in seconds (None: no limit), made as httpx makes its own: `Timeout(30.0, connect=5.0)`
    is 5 s to connect and 30 s for each other phase. Immutable, compared by value."""

    __slots__ = ("connect", "pool", "read", "write")

    connect: float | None
    read: float | None
    write: float | None
    pool: float | None

    def __init__(
        self,
        timeout: float | None,
        *,
        connect: float | object | None = _SAME,
        read: float | object | None = _SAME,
        write: float | object | None = _SAME,
        pool: float | object | None = _SAME,
    ) -> None:
        for name, given in (("connect", connect), ("read", read), ("write", write), ("pool", pool)):
            value = timeout if given is _SAME else given
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise TypeError(f"Timeout {name} must be seconds or None, got {type(value).__name__}")
            object.__setattr__(self, name, None if value is None else float(value))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Timeout is immutable: make a new one (cannot set {name})")

    def _parts(self) -> tuple[float | None, float | None, float | None, float | None]:
        return self.connect, self.read, self.write, self.pool

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Timeout) and self._parts() == other._parts()

    def __hash__(self) -> int:
        return hash(self._parts())

    def __reduce__(self) -> tuple[object, ...]:
        connect, read, write, pool = self._parts()
        return (_rebuild, (connect, read, write, pool))

    def __repr__(self) -> str:
        connect, read, write, pool = self._parts()
        if read == write == pool:
            return f"Timeout({read!r}, connect={connect!r})" if connect != read else f"Timeout({read!r})"
        return f"Timeout(connect={connect!r}, read={read!r}, write={write!r}, pool={pool!r})"


def _rebuild(connect: float | None, read: float | None, write: float | None, pool: float | None) -> Timeout:
    return Timeout(None, connect=connect, read=read, write=write, pool=pool)
