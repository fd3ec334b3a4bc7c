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
from .._base_client import ClientConfig
from ..client import AsyncDevClient
from ..errors import InvalidParameterError

__all__ = [
    "CLIENT_METHODS",
    "_client_method",
    "_configs",
    "_listed",
    "_normalise",
    "_rebuild",
    "_shared_deadline",
    "_total_bound",
]


# The least a late target's deadline is given, so its one try can still be answered.
_LEAST_DEADLINE = 0.001
# A target that started this much after its call did wait for a slot: its bound is shortened.
_SLOT_WAIT = 0.01


def _shared_deadline(default: float | None, kwargs: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """For a method that runs until a deadline (`default` its own), and for a call's `total_timeout=`: the
    keyword arguments of a target starting now. Over a fleet each is one moment for every target, so
    targets that wait for a slot (more targets than max_concurrency) get what is left of it, not a new one."""
    ends: dict[str, float] = {}
    if default is not None:
        ends["deadline"] = time.monotonic() + check.seconds(kwargs.pop("deadline", default), "deadline")
    if kwargs.get("total_timeout") is not None:
        ends["total_timeout"] = time.monotonic() + check.seconds(kwargs["total_timeout"], "total_timeout")
    if not ends:
        return lambda: kwargs
    return lambda: {**kwargs, **{k: max(_LEAST_DEADLINE, end - time.monotonic()) for k, end in ends.items()}}


def _total_bound(total_timeout: float | None) -> Callable[[AsyncDevClient], AsyncDevClient]:
    """The fleet's `total_timeout` as one moment for a call starting now: a target's client as it is, or,
    for a target that waited for a slot, one whose total_timeout is what is left (at least a little)."""
    if total_timeout is None:
        return lambda client: client
    end = time.monotonic() + total_timeout

    def bounded(client: AsyncDevClient) -> AsyncDevClient:
        left = end - time.monotonic()
        if left >= total_timeout - _SLOT_WAIT:
            return client
        late = client.with_options(total_timeout=max(_LEAST_DEADLINE, left))
        if client._context().speaks == "cli":
            late._speak_cli()
        return late

    return bounded


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


def _configs(urls: Iterable[str], settings: dict[str, Any]) -> list[ClientConfig]:
    """Each target's client configuration, from a fleet's settings (the ones a client takes, checked)."""
    taken = ("api_key", "timeout", "total_timeout", "max_retries", "default_headers", "verify", "cert")
    given = {key: settings[key] for key in taken}
    return [ClientConfig.of(url, model=None, transport=None, **given) for url in _listed(urls)]


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
