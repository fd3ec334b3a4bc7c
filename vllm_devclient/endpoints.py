"""The request/response layer both clients share: an `Endpoint` is one HTTP exchange plus the reader
(`answers.py`) that turns a successful answer into a typed result.

A route's Endpoint is built from its record (`routes/`) by `build`: every argument is checked first (the
record's checks, through `arguments`), so a bad one is refused before anything is sent. The exchanges that
are not route methods (the completion, the dev-mode probe, `request()`'s raw one) are written here. Nothing
here does I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from . import arguments as check
from .answers import Reader, model_reader, raw_answer
from .errors import InvalidParameterError
from .models import Completion
from .records import GATEWAY_STATUSES, OMIT, Route, When
from .responses import ResponseLike

T = TypeVar("T")

PauseMode = Literal["abort", "wait", "keep"]
NO_BODY = object()


@dataclass(frozen=True)
class Endpoint(Generic[T]):
    method: str
    path: str
    parse: Reader[T]
    params: tuple[tuple[str, str], ...] = ()
    body: Any = field(default=NO_BODY)
    # Safe to send again after it may have reached the server.
    idempotent: bool = False
    dev_route: bool = True
    # Statuses worth retrying for this route (the gateway family, unless the route gives 503 a meaning).
    retry_statuses: frozenset[int] = GATEWAY_STATUSES
    # Non-2xx statuses this route's reader reads itself (Rust's 409 for a refused reset).
    ok_statuses: frozenset[int] = frozenset()
    # Blocks through a rendezvous or a large transfer: no bound on the answer unless timeout= is given.
    long_running: bool = False
    # (the first release that takes an argument given, the argument): checked against the server's release.
    requires: tuple[str, str] | None = None

    @property
    def has_body(self) -> bool:
        return self.body is not NO_BODY


# ---- a route's request, from its record ------------------------------------------------------------------


def build(route: Route, given: Mapping[str, Any]) -> Endpoint[Any]:
    """The request of `route` for these arguments: each checked (`Param.check`, then the route's `rule`), put
    in the query or the body, and the facts that depend on them decided (`When`). None, where it is the
    parameter's default, is not checked: it sends `Param.none` (by default nothing)."""
    made = _plain.get(id(route))
    if made is not None and made[0] is route:  # a route without parameters: one Endpoint serves every call
        return made[1]
    checked: dict[str, Any] = {}
    query: list[tuple[str, str]] = []
    body: dict[str, Any] | None = None
    for name, key, to_body, check_value, none, none_is_default in _plan(route):
        value = given[name]
        if value is None and none_is_default:
            checked[name] = None
            value = none
        else:
            value = checked[name] = check_value(value, name) if check_value is not None else value
        if to_body:
            body = {} if body is None else body
            if value is not OMIT:
                body[key] = value
        elif value is OMIT:
            continue
        elif isinstance(value, _SEQUENCES):
            query += [(key, _query_value(v)) for v in value]
        else:
            query.append((key, _query_value(value)))
    if route.rule is not None:
        route.rule(checked)
    idempotent, long_running = route.idempotent, route.long_running
    if isinstance(idempotent, When):
        idempotent = idempotent.test(checked)
    if isinstance(long_running, When):
        long_running = long_running.test(checked)
    if body is None or (not body and not route.empty_body):
        endpoint = _bodiless(route, tuple(query), idempotent, long_running)
    else:
        endpoint = _endpoint(route, tuple(query), body, idempotent, long_running)
    requires = _requires(route, checked)
    return endpoint if requires is None else dataclasses.replace(endpoint, requires=requires)


def _requires(route: Route, checked: Mapping[str, Any]) -> tuple[str, str] | None:
    """The newest `added_in` among the parameters given a value, with the parameter's name."""
    given = [(p.added_in, p.name) for p in route.params if p.added_in and checked.get(p.name) is not None]
    return max(given, key=lambda pair: release_key(pair[0])) if given else None


def release_key(version: str) -> tuple[int, ...]:
    """(major, minor, patch) of a vLLM version, for ordering releases ("0.34.0rc1" -> (0, 34, 0))."""
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


_SEQUENCES = (list, tuple)
# Per route (by identity): how each parameter is checked and placed, and the Endpoint of one without any.
_Plan = tuple[tuple[str, str, bool, Any, Any, bool], ...]
_plans: dict[int, tuple[Route, _Plan]] = {}
_plain: dict[int, tuple[Route, Endpoint[Any]]] = {}
# A route's bodiless requests repeat (the barrier sends the same one every try): one Endpoint serves them.
_made: dict[tuple[int, tuple[tuple[str, str], ...], bool, bool], tuple[Route, Endpoint[Any]]] = {}
_lock = threading.Lock()


def _plan(route: Route) -> _Plan:
    known = _plans.get(id(route))
    if known is not None and known[0] is route:
        return known[1]
    plan = tuple(
        (p.name, p.key or p.name, p.send == "body", p.check, p.none, p.default is None) for p in route.params
    )
    plain = None
    if not plan and isinstance(route.idempotent, bool) and isinstance(route.long_running, bool):
        plain = _bodiless(route, (), route.idempotent, route.long_running)
    with _lock:
        _plans[id(route)] = (route, plan)
        if plain is not None:
            _plain[id(route)] = (route, plain)
    return plan


def _bodiless(
    route: Route, query: tuple[tuple[str, str], ...], idempotent: bool, long_running: bool
) -> Endpoint[Any]:
    key = (id(route), query, idempotent, long_running)
    made = _made.get(key)
    if made is not None and made[0] is route:
        return made[1]
    endpoint = _endpoint(route, query, NO_BODY, idempotent, long_running)
    with _lock:
        if len(_made) >= 1024:  # wake_up's tags are free text: keep the table bounded
            _made.clear()
        _made[key] = (route, endpoint)
    return endpoint


def _endpoint(
    route: Route, query: tuple[tuple[str, str], ...], body: Any, idempotent: bool, long_running: bool
) -> Endpoint[Any]:
    return Endpoint(
        route.method,
        route.path,
        route.reader,
        params=query,
        body=body,
        idempotent=idempotent,
        dev_route=route.dev_route,
        retry_statuses=route.retry_statuses,
        ok_statuses=route.ok_statuses,
        long_running=long_running,
    )


def _query_value(value: object) -> str:
    # The Rust frontend accepts only lowercase true/false; Python accepts those too.
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


# ---- the exchanges that are not route methods ----------------------------------------------------------


def completion(
    model: str,
    prompt: str | Sequence[int],
    *,
    max_tokens: int,
    temperature: float,
    seed: int | None,
    stop: Sequence[str] | None,
    cache_salt: str | None = None,
) -> Endpoint[Completion]:
    """`cache_salt`: vLLM's prefix cache keys a request's blocks by it too, so no unsalted or otherwise
    salted request shares them."""
    body: dict[str, Any] = {
        "model": check.text(model, "model"),
        "prompt": check.prompt(prompt, "prompt"),
        "max_tokens": check.positive_int(max_tokens, "max_tokens"),
        "temperature": check.number(temperature, "temperature", minimum=0),
    }
    if seed is not None:
        body["seed"] = check.non_negative_int(seed, "seed")
    if stop:
        body["stop"] = check.texts(stop, "stop")
    if cache_salt is not None:
        body["cache_salt"] = check.text(cache_salt, "cache_salt")
    return Endpoint(
        "POST", "/v1/completions", model_reader(Completion), body=body, dev_route=False, long_running=True
    )


@functools.cache  # no arguments: one Endpoint serves every call
def dev_routes_probe() -> Endpoint[ResponseLike]:
    """Whether the server serves dev routes at all, asked after a dev route answered 404: every release
    (0.22.0 on, both frontends) serves POST /reset_prefix_cache in dev mode, so a GET there is 405 when dev
    mode is on and 404 when it is off. Nothing reaches the engine."""
    return Endpoint("GET", "/reset_prefix_cache", raw_answer, idempotent=True)


def raw(
    method: str,
    path: str,
    params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None,
    body: Any,
    *,
    dev_paths: frozenset[str],
) -> Endpoint[ResponseLike]:
    """The escape hatch: any request, answered with the raw response (non-2xx still raises); `dev_paths`
    (`routes.DEV_PATHS`) tells which 404s may mean that dev mode is off."""
    method = check.text(method, "method").upper()
    # One plain path: no query, fragment, space or control character (NUL, CR, LF, tab, DEL).
    if not check.text(path, "path").startswith("/") or any(c in "?# \x7f" or c < " " for c in path):
        raise InvalidParameterError(
            f"path must start with '/' and hold no query, spaces or control characters, got {path!r}"
        )
    items = params.items() if isinstance(params, Mapping) else (params or ())
    # Booleans go out lowercase here too; any other value is sent exactly as given.
    encoded = tuple((str(k), _query_value(v)) for k, v in items)
    if body is not NO_BODY:
        check.json_body(body, "json")
    return Endpoint(
        method,
        path,
        raw_answer,
        params=encoded,
        body=body,
        idempotent=method in ("GET", "HEAD", "OPTIONS"),
        dev_route=path in dev_paths,
    )


def encode_body(body: Any) -> bytes:
    return json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
