"""How a client method becomes a fleet method: typed descriptors, one deadline for all targets, the URLs."""

from __future__ import annotations

import inspect
import time
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
)
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from .. import arguments as check
from ..client import AsyncDevClient
from ..errors import InvalidParameterError
from .results import FleetResult

if TYPE_CHECKING:
    from .async_fleet import AsyncFleet
    from .sync_fleet import Fleet

__all__ = [
    "CLIENT_METHODS",
    "_FanOut",
    "_SyncFanOut",
    "_client_method",
    "_listed",
    "_normalise",
    "_rebuild",
    "_shared_deadline",
]

T = TypeVar("T")
P = ParamSpec("P")


# The least a late target's deadline is given, so its one try can still be answered.
_LEAST_DEADLINE = 0.001


def _shared_deadline(default: float | None, kwargs: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """For a method that runs until a deadline (`default` its own): the keyword arguments of a target
    starting now. Over a fleet the deadline is one moment for every target, so targets that wait for a
    slot (more targets than max_concurrency) get what is left of it, not a new one."""
    if default is None:
        return lambda: kwargs
    end = time.monotonic() + check.seconds(kwargs.pop("deadline", default), "deadline")
    return lambda: {**kwargs, "deadline": max(_LEAST_DEADLINE, end - time.monotonic())}


# Every public coroutine method of the client, found at import time: `call()` accepts exactly these, and a
# test checks that both fleets have a typed method for each, so the fleet cannot fall behind the client.
CLIENT_METHODS: frozenset[str] = frozenset(
    name
    for name, member in inspect.getmembers(AsyncDevClient, inspect.iscoroutinefunction)
    if not name.startswith("_") and name != "close"
)


def _client_method(name: str) -> Callable[..., Awaitable[Any]]:
    if name not in CLIENT_METHODS:
        raise InvalidParameterError(
            f"{name!r} is not a client method; use one of: {', '.join(sorted(CLIENT_METHODS))}"
        )
    method: Callable[..., Awaitable[Any]] = getattr(AsyncDevClient, name)
    return method


def _listed(urls: Iterable[str]) -> list[str]:
    if isinstance(urls, str) or not isinstance(urls, Iterable):
        raise InvalidParameterError("urls must be a list of base URLs, not a single string")
    out = list(urls)
    if not out:
        raise InvalidParameterError("a fleet needs at least one target URL")
    return out


def _normalise(urls: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for url in _listed(urls):
        url = check.base_url(url).url
        if url in out:
            raise InvalidParameterError(f"target {url} is listed twice; each server must appear once")
        out.append(url)
    return tuple(out)


class _FanOut(Generic[P, T]):
    """`AsyncFleet.name(...)`: the client method `name` on every target, with the client's signature.
    `deadline`: the default of the method's deadline, when it runs until one (from its record)."""

    def __init__(
        self, method: Callable[Concatenate[AsyncDevClient, P], Awaitable[T]], *, deadline: float | None = None
    ) -> None:
        self._method = method
        self._deadline = deadline
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _FanOut[P, T]: ...

    @overload
    def __get__(
        self, obj: AsyncFleet, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, FleetResult[T]]]: ...

    def __get__(self, obj: AsyncFleet | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        method, name, deadline = self._method, self._method.__name__, self._deadline

        async def fan_out(*args: P.args, **kwargs: P.kwargs) -> FleetResult[T]:
            per_target = _shared_deadline(deadline, dict(kwargs))
            return await obj.map(lambda client: method(client, *args, **per_target()), operation=name)

        fan_out.__name__ = fan_out.__qualname__ = name
        fan_out.__doc__ = self.__doc__
        return fan_out


class _SyncFanOut(Generic[P, T]):
    """`Fleet.name(...)`: the same fan-out as AsyncFleet's, run to completion on the fleet's loop thread."""

    def __init__(self, method: Callable[Concatenate[AsyncDevClient, P], Awaitable[T]]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _SyncFanOut[P, T]: ...

    @overload
    def __get__(self, obj: Fleet, owner: type[Any]) -> Callable[P, FleetResult[T]]: ...

    def __get__(self, obj: Fleet | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        name = self._method.__name__
        fan = getattr(obj._fleet, name)  # AsyncFleet's fan-out of the same method

        def fan_out(*args: P.args, **kwargs: P.kwargs) -> FleetResult[T]:
            return obj._run(fan(*args, **kwargs))

        fan_out.__name__ = fan_out.__qualname__ = name
        fan_out.__doc__ = self.__doc__
        return fan_out


def _rebuild(cls: type[Any], urls: tuple[str, ...], settings: dict[str, Any]) -> Any:
    return cls(urls, **settings)
