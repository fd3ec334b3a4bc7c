"""What both fleets share: the client's method table, the targets' URLs, one deadline for all targets."""

from __future__ import annotations

import inspect
import time
from collections.abc import (
    Awaitable,
    Callable,
    Iterable,
)
from typing import Any

from .. import arguments as check
from ..client import AsyncDevClient
from ..errors import InvalidParameterError

__all__ = [
    "CLIENT_METHODS",
    "_client_method",
    "_listed",
    "_normalise",
    "_rebuild",
    "_shared_deadline",
]


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


def _rebuild(cls: type[Any], urls: tuple[str, ...], settings: dict[str, Any]) -> Any:
    return cls(urls, **settings)
