"""Per-call overhead: what the SDK itself costs per call, over the same transport as its baseline.

Every row puts the SDK on one HTTP library against the same request written by hand with that library
(the request with its query string written out, a status check, the JSON body decoded), so the difference
is the SDK's own work (argument checks, request building, retries bookkeeping, the typed result), never a
difference of transports:

- in-process: the SDK over an httpx client given to it (`http_client=`) against bare httpx, both through
  httpx's in-process WSGI (sync) and ASGI (async) transports. No socket and no server work worth the name,
  so the delta is the SDK's cost in microseconds, free of loopback jitter.
- rust: the real `vllm-rs` frontend with the scripted engine in a child process, over loopback keep-alive.
  Sync: the SDK on httpx (`transport="httpx"`) against bare httpx, and the SDK on its default pool (h11)
  against bare h11 on one socket. Async: the SDK on httpx against a bare httpx.AsyncClient, and the SDK on
  its default pool (aiohttp) against a bare aiohttp session. Goal: the SDK median within 10% of its bare
  transport.

What the default transports gain over httpx is bench_transport's row of its own. Variants take turns in
blocks of 20 calls, in a shuffled order each round; every call is timed alone.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import aiohttp
import httpx

from vllm_devclient import AsyncDevClient, DevClient, __version__

from . import _peers
from ._common import (
    MIN_ROUNDS,
    RustServer,
    Stats,
    ainterleave,
    compare,
    interleave,
    result,
    rust_available,
    value,
)

GOAL_RATIO = 1.10
PER_ROUND = 20
HEADERS = {"User-Agent": f"vllm-devclient/{__version__}", "Accept": "application/json"}
IN_PROCESS_URL = "http://bench.local"
# route -> (method, target): what the SDK method sends, written out by hand.
ROUTES: dict[str, tuple[str, str]] = {
    "reset_prefix_cache": ("POST", _peers.RESET_TARGET),
    "is_paused": ("GET", "/is_paused"),
    "version": ("GET", "/version"),
}
# The pool each SDK transport really is (checked, so a proxy in the environment cannot swap it silently).
POOLS = {
    "h11": "H11Pool",
    "aiohttp": "AiohttpPool",
    "httpx": "HttpxTransport",
    "httpx-async": "AsyncHttpxTransport",
}

# What the Rust frontend answers on these routes (the scripted engine's defaults).
_BODIES = {
    "/reset_prefix_cache": json.dumps({"success": True}).encode(),
    "/is_paused": json.dumps({"is_paused": False}).encode(),
    "/version": json.dumps({"version": "0.33.0", "rust_frontend_version": "0.33.0"}).encode(),
}


def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = _BODIES.get(environ["PATH_INFO"])
    if body is None:
        start_response("404 Not Found", [("content-length", "0")])
        return [b""]
    start_response("200 OK", [("content-type", "application/json"), ("content-length", str(len(body)))])
    return [body]


async def asgi_app(
    scope: MutableMapping[str, Any],
    receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    send: Callable[[MutableMapping[str, Any]], Awaitable[None]],
) -> None:
    while (await receive()).get("more_body"):  # drain the request body
        pass
    body = _BODIES.get(scope["path"])
    status = 200 if body is not None else 404
    body = body or b""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# ---- the variants: (bare call, SDK client) per transport --------------------------------------------------


def _bare(call: _peers.Call) -> dict[str, Callable[[], object]]:
    return {route: functools.partial(call, method, target) for route, (method, target) in ROUTES.items()}


def _abare(call: _peers.ACall) -> dict[str, Callable[[], Awaitable[object]]]:
    return {route: functools.partial(call, method, target) for route, (method, target) in ROUTES.items()}


def _sdk(client: Any, pool: str) -> dict[str, Callable[[], Any]]:
    if _peers.transport_of(client) != POOLS[pool]:
        raise RuntimeError(f"the SDK travels on {_peers.transport_of(client)}, not {POOLS[pool]}")
    return {route: getattr(client, route) for route in ROUTES}


def _variants(pairs: dict[str, tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """{"<transport> bare <route>": fn, "<transport> sdk <route>": fn} for every transport and route."""
    out: dict[str, Any] = {}
    for transport, (bare, sdk) in pairs.items():
        out |= {f"{transport} bare {r}": bare[r] for r in ROUTES}
        out |= {f"{transport} sdk {r}": sdk[r] for r in ROUTES}
    return out


def _rows(target: str, mode: str, samples: dict[str, list[float]], goal: bool) -> list[dict[str, Any]]:
    transports = sorted({name.split(" ")[0] for name in samples})
    rows = []
    for transport in transports:
        label = transport.removesuffix("-async")
        for route in ROUTES:
            base = Stats.of(samples[f"{transport} bare {route}"]).scaled(1e6)
            sdk = Stats.of(samples[f"{transport} sdk {route}"]).scaled(1e6)
            ratio = sdk.median / base.median
            rows.append(
                compare(
                    f"{target} {mode} {route}: SDK on {label} vs bare {label}",
                    baseline_name=f"bare {label}",
                    baseline=base,
                    sdk=sdk,
                    unit="us",
                    goal=f"<= {GOAL_RATIO:.2f}x" if goal else None,
                    ok=ratio <= GOAL_RATIO if goal else None,
                    transport=label,
                )
            )
    return rows


def _sync(variants: dict[str, Callable[[], object]], rounds: int, budget: float) -> dict[str, list[float]]:
    return interleave(variants, rounds=rounds, per_round=PER_ROUND, warmup=PER_ROUND, max_seconds=budget)


async def _async(
    variants: dict[str, Callable[[], Awaitable[object]]], rounds: int, budget: float
) -> dict[str, list[float]]:
    return await ainterleave(
        variants, rounds=rounds, per_round=PER_ROUND, warmup=PER_ROUND, max_seconds=budget
    )


# ---- measuring ----------------------------------------------------------------------------------------


def measure_in_process(rounds: int, budget: float) -> list[dict[str, Any]]:
    transport = httpx.WSGITransport(app=wsgi_app)
    with (
        httpx.Client(transport=transport, headers=HEADERS) as bare,
        DevClient(IN_PROCESS_URL, http_client=httpx.Client(transport=transport)) as dc,
    ):
        pairs = {"httpx": (_bare(_peers.httpx_call(bare, IN_PROCESS_URL)), _sdk(dc, "httpx"))}
        sync = _sync(_variants(pairs), rounds, budget)

    async def go() -> dict[str, list[float]]:
        atransport = httpx.ASGITransport(app=asgi_app)
        async with (
            httpx.AsyncClient(transport=atransport, headers=HEADERS) as abare,
            AsyncDevClient(IN_PROCESS_URL, http_client=httpx.AsyncClient(transport=atransport)) as adc,
        ):
            bare_calls = _abare(_peers.httpx_acall(abare, IN_PROCESS_URL))
            return await _async(
                _variants({"httpx-async": (bare_calls, _sdk(adc, "httpx-async"))}), rounds, budget
            )

    asynchronous = asyncio.run(go())
    return _rows("in-process", "sync", sync, goal=False) + _rows(
        "in-process", "async", asynchronous, goal=False
    )


def measure_rust(server: RustServer, rounds: int, budget: float) -> list[dict[str, Any]]:
    url = server.base_url
    host, port = url.split("//")[1].split(":")
    h11_bare = _peers.BareH11(host, int(port))
    try:
        with (
            httpx.Client(headers=HEADERS) as hx,
            DevClient(url, transport="httpx") as on_httpx,
            DevClient(url, transport="auto") as on_h11,
        ):
            pairs = {
                "httpx": (_bare(_peers.httpx_call(hx, url)), _sdk(on_httpx, "httpx")),
                "h11": (_bare(h11_bare.call), _sdk(on_h11, "h11")),
            }
            sync = _sync(_variants(pairs), rounds, budget)
    finally:
        h11_bare.close()

    async def go() -> dict[str, list[float]]:
        async with (
            httpx.AsyncClient(headers=HEADERS) as hx,
            aiohttp.ClientSession(headers=HEADERS) as session,
            AsyncDevClient(url, transport="httpx") as on_httpx,
            AsyncDevClient(url, transport="auto") as on_aiohttp,
        ):
            pairs = {
                "httpx-async": (_abare(_peers.httpx_acall(hx, url)), _sdk(on_httpx, "httpx-async")),
                "aiohttp": (_abare(_peers.aiohttp_call(session, url)), _sdk(on_aiohttp, "aiohttp")),
            }
            return await _async(_variants(pairs), rounds, budget)

    asynchronous = asyncio.run(go())
    return _rows("rust", "sync", sync, goal=True) + _rows("rust", "async", asynchronous, goal=True)


def run(quick: bool = False) -> dict[str, Any]:
    # Budgets (seconds per sync/async half) cap the run on a loaded machine; a quiet one ends sooner.
    rows = measure_in_process(rounds=MIN_ROUNDS if quick else 80, budget=1.0 if quick else 10.0)
    why_not = rust_available()
    if why_not is None:
        with RustServer() as server:
            rows += measure_rust(server, rounds=MIN_ROUNDS if quick else 50, budget=2.0 if quick else 25.0)
    else:
        rows.append(value("rust frontend", "skipped", reason=why_not, ok=False))
    return result("overhead", method=__doc__ or "", rows=rows)
