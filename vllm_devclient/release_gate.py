"""Arguments that a server's release does not take: refused before anything is sent, naming the release
that added them (a server would ignore an unknown query parameter, so sending it would drop it silently).

The server's release is learned once per client: from any `/version` answer the client saw, else by one
`/version` lookup before the first call that needs it. A server with no `/version` (vllm-rs 0.22) predates
every gated argument. Sans-IO: `requiring` wraps a route call's operation; the clients run it.
"""

from __future__ import annotations

from typing import Any, TypeVar

from .arguments import Timeouts
from .endpoints import Endpoint, release_key
from .errors import NotFoundError, ReleaseTooOldError
from .models import VersionInfo
from .operations import CallContext, Operation, RetryPolicy, call
from .routes import endpoint as route

__all__ = ["ServerRelease", "requiring"]

T = TypeVar("T")

# What a server without /version is: vllm-rs 0.22.0, the one release whose Rust router lacks it.
_BEFORE_VERSION_ROUTE = "0.22.0"


class ServerRelease:
    """The vLLM release of a client's server, once known (`version`)."""

    def __init__(self) -> None:
        self.version: str | None = None

    def learn(self, value: object) -> None:
        if isinstance(value, VersionInfo):
            self.version = value.version


def requiring(
    ep: Endpoint[Any],
    op: Operation[T],
    *,
    release: ServerRelease,
    timeouts: Timeouts,
    retry: RetryPolicy,
    ctx: CallContext,
) -> Operation[T]:
    """`op`, after checking that the server's release takes the argument `ep.requires` names."""
    if ep.requires is not None:
        if release.version is None:
            try:
                release.learn((yield from call(route("version"), timeouts=timeouts, retry=retry, ctx=ctx)))
            except NotFoundError:
                release.version = _BEFORE_VERSION_ROUTE
        _check(ep, ep.requires, release.version or _BEFORE_VERSION_ROUTE, ctx)
    return (yield from op)


def _check(ep: Endpoint[Any], requires: tuple[str, str], server: str, ctx: CallContext) -> None:
    added_in, argument = requires
    if release_key(server) >= release_key(added_in):
        return
    raise ReleaseTooOldError(
        f"{ep.method} {ep.path}: {ctx.hint(argument)} needs vLLM {added_in} or newer, and {ctx.base_url} "
        f"runs vLLM {server}, which would ignore it; leave it out (the server's default applies) or "
        "upgrade the server",
        argument=argument,
        added_in=added_in,
        server_release=server,
    )
