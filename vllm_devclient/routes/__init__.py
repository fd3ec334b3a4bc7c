"""One record per route, and everything about it: the wire facts (method, path, where each parameter goes
and how it is checked, the reader of the answer, whether it may be resent, whether it runs long, whether only
dev mode serves it) and the method's face (doc, parameters, answer type, command line). One module per
family (the command line's topics).

The request is built from the record at run time (`endpoints.build`); `make generate` writes from the
records the async client's route methods, the tables of the methods derived from them (the blocking
client's, the raw-response ones), each command's `result` schema and the route table of
`docs/frontends.md`; both fleets derive theirs from the client's (see `records.py`, CONTRIBUTING.md).
"""

from __future__ import annotations

from typing import Any

from ..endpoints import Endpoint, build
from ..records import Route
from . import cache, checkpoint, engine, lora, pause, server, sleep, weights

__all__ = ["DEV_PATHS", "ROUTES", "endpoint"]

ROUTES: tuple[Route, ...] = (
    *server.ROUTES,
    *cache.ROUTES,
    *sleep.ROUTES,
    *checkpoint.ROUTES,
    *pause.ROUTES,
    *engine.ROUTES,
    *weights.ROUTES,
    *lora.ROUTES,
)

# The dev routes by path: a 404 there means dev mode is off or that the release lacks the route (a
# `dev_routes_probe` tells which); anywhere else it is a plain NotFoundError.
DEV_PATHS = frozenset(r.path for r in ROUTES if r.dev_route)
_BY_NAME = {r.name: r for r in ROUTES}


def endpoint(name: str, /, **arguments: Any) -> Endpoint[Any]:
    """The request of the route `name` for these arguments (every one of its parameters, by name)."""
    return build(_BY_NAME[name], arguments)
