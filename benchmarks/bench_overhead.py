"""Per-call overhead: DevClient / AsyncDevClient against a bare httpx client doing the same request.

Two targets:
- in-process: a minimal WSGI app (sync, httpx.WSGITransport) and ASGI app (async, httpx.ASGITransport).
  No socket, no server work worth the name, so the SDK-minus-httpx difference is the client's own cost in
  microseconds. A loopback server would add a round trip whose jitter (tens of microseconds on a busy
  2-core machine) is as large as the effect being measured; the real transport is what target (b) is for.
- rust: the real `vllm-rs` frontend with the scripted engine in a child process, over loopback TCP with
  keep-alive: the end-to-end cost a user sees. Goal: SDK median within 10% of bare httpx.

The bare baseline does what a careful hand-written call does: same method, URL, query and headers (set
once on the client), a status check, and JSON decoding of the field it needs. The SDK additionally builds
its typed result (a pydantic model for /version). Variants alternate in blocks of 20 calls, in a
shuffled order each round; every call is timed on its own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import httpx

from vllm_devclient import AsyncDevClient, DevClient, __version__

from ._common import RustServer, Stats, ainterleave, compare, interleave, result, rust_available, value

GOAL_RATIO = 1.10
PER_ROUND = 20
HEADERS = {"User-Agent": f"vllm-devclient/{__version__}", "Accept": "application/json"}
RESET_PARAMS = {"reset_running_requests": "false", "reset_external": "false"}
IN_PROCESS_URL = "http://bench.local"

# What the Rust frontend answers on these routes (the scripted engine's defaults).
_BODIES = {
    "/reset_prefix_cache": json.dumps({"success": True}).encode(),
    "/is_paused": json.dumps({"is_paused": False}).encode(),
    "/version": json.dumps({"version": "0.33.0", "rust_frontend_version": "0.33.0"}).encode(),
}
_JSON_HEADERS = [("content-type", "application/json")]
ROUTES = ("reset_prefix_cache", "is_paused", "version")


def wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    body = _BODIES.get(environ["PATH_INFO"])
    if body is None:
        start_response("404 Not Found", [("content-length", "0")])
        return [b""]
    start_response("200 OK", [*_JSON_HEADERS, ("content-length", str(len(body)))])
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


# ---- the same three calls, by hand ------------------------------------------------------------------


def _bare_sync(client: httpx.Client, base: str) -> dict[str, Callable[[], object]]:
    def reset() -> object:
        r = client.post(base + "/reset_prefix_cache", params=RESET_PARAMS)
        r.raise_for_status()
        return r.json()["success"]

    def is_paused() -> object:
        r = client.get(base + "/is_paused")
        r.raise_for_status()
        return r.json()["is_paused"]

    def version() -> object:
        r = client.get(base + "/version")
        r.raise_for_status()
        return r.json()

    return {"reset_prefix_cache": reset, "is_paused": is_paused, "version": version}


def _bare_async(client: httpx.AsyncClient, base: str) -> dict[str, Callable[[], Awaitable[object]]]:
    async def reset() -> object:
        r = await client.post(base + "/reset_prefix_cache", params=RESET_PARAMS)
        r.raise_for_status()
        return r.json()["success"]

    async def is_paused() -> object:
        r = await client.get(base + "/is_paused")
        r.raise_for_status()
        return r.json()["is_paused"]

    async def version() -> object:
        r = await client.get(base + "/version")
        r.raise_for_status()
        return r.json()

    return {"reset_prefix_cache": reset, "is_paused": is_paused, "version": version}


def _sdk_sync(dc: DevClient) -> dict[str, Callable[[], object]]:
    return {"reset_prefix_cache": dc.reset_prefix_cache, "is_paused": dc.is_paused, "version": dc.version}


def _sdk_async(dc: AsyncDevClient) -> dict[str, Callable[[], Awaitable[object]]]:
    return {"reset_prefix_cache": dc.reset_prefix_cache, "is_paused": dc.is_paused, "version": dc.version}


# ---- measuring ----------------------------------------------------------------------------------------


def _rows(
    target: str,
    mode: str,
    baseline_name: str,
    samples: dict[str, list[float]],
    goal: bool,
) -> list[dict[str, Any]]:
    rows = []
    for route in ROUTES:
        base = Stats.of(samples[f"bare {route}"]).scaled(1e6)
        sdk = Stats.of(samples[f"sdk {route}"]).scaled(1e6)
        ratio = sdk.median / base.median
        rows.append(
            compare(
                f"{target} {mode} {route}",
                baseline_name=baseline_name,
                baseline=base,
                sdk=sdk,
                unit="us",
                goal=f"<= {GOAL_RATIO:.2f}x" if goal else None,
                ok=ratio <= GOAL_RATIO if goal else None,
            )
        )
    return rows


def _sync_samples(
    bare: dict[str, Callable[[], object]], sdk: dict[str, Callable[[], object]], rounds: int, budget: float
) -> dict[str, list[float]]:
    variants = {f"bare {r}": bare[r] for r in ROUTES} | {f"sdk {r}": sdk[r] for r in ROUTES}
    return interleave(variants, rounds=rounds, per_round=PER_ROUND, warmup=PER_ROUND, max_seconds=budget)


async def _async_samples(
    bare: dict[str, Callable[[], Awaitable[object]]],
    sdk: dict[str, Callable[[], Awaitable[object]]],
    rounds: int,
    budget: float,
) -> dict[str, list[float]]:
    variants = {f"bare {r}": bare[r] for r in ROUTES} | {f"sdk {r}": sdk[r] for r in ROUTES}
    return await ainterleave(
        variants, rounds=rounds, per_round=PER_ROUND, warmup=PER_ROUND, max_seconds=budget
    )


def measure_in_process(rounds: int, budget: float) -> list[dict[str, Any]]:
    # The SDK over an httpx client given to it (http_client=): the same httpx machinery as the bare
    # baseline, so the difference is the SDK's own cost per call.
    transport = httpx.WSGITransport(app=wsgi_app)
    with (
        httpx.Client(transport=transport, headers=HEADERS) as bare,
        DevClient(IN_PROCESS_URL, http_client=httpx.Client(transport=transport)) as dc,
    ):
        sync = _sync_samples(_bare_sync(bare, IN_PROCESS_URL), _sdk_sync(dc), rounds, budget)

    async def go() -> dict[str, list[float]]:
        atransport = httpx.ASGITransport(app=asgi_app)
        async with (
            httpx.AsyncClient(transport=atransport, headers=HEADERS) as abare,
            AsyncDevClient(IN_PROCESS_URL, http_client=httpx.AsyncClient(transport=atransport)) as adc,
        ):
            return await _async_samples(_bare_async(abare, IN_PROCESS_URL), _sdk_async(adc), rounds, budget)

    asynchronous = asyncio.run(go())
    return _rows("in-process", "sync", "httpx.Client", sync, goal=False) + _rows(
        "in-process", "async", "httpx.AsyncClient", asynchronous, goal=False
    )


def measure_rust(server: RustServer, rounds: int, budget: float) -> list[dict[str, Any]]:
    url = server.base_url
    with httpx.Client(headers=HEADERS) as bare, DevClient(url) as dc:
        sync = _sync_samples(_bare_sync(bare, url), _sdk_sync(dc), rounds, budget)

    async def go() -> dict[str, list[float]]:
        async with httpx.AsyncClient(headers=HEADERS) as abare, AsyncDevClient(url) as adc:
            return await _async_samples(_bare_async(abare, url), _sdk_async(adc), rounds, budget)

    asynchronous = asyncio.run(go())
    return _rows("rust", "sync", "httpx.Client", sync, goal=True) + _rows(
        "rust", "async", "httpx.AsyncClient", asynchronous, goal=True
    )


def run(quick: bool = False) -> dict[str, Any]:
    # Budgets (seconds per sync/async half) cap the run on a loaded machine; a quiet one ends sooner.
    rows = measure_in_process(rounds=10 if quick else 80, budget=2.0 if quick else 10.0)
    why_not = rust_available()
    if why_not is None:
        with RustServer() as server:
            rows += measure_rust(server, rounds=6 if quick else 50, budget=3.0 if quick else 15.0)
    else:
        rows.append(value("rust frontend", "skipped", reason=why_not, ok=False))
    return result(
        "overhead",
        method=(
            "Each row: SDK call vs a bare httpx call of the same request, interleaved in blocks of 20 calls "
            "(shuffled order each round), every call timed alone; median and p95 in microseconds; delta = "
            "SDK median - httpx median = the SDK's own cost per call. in-process: WSGI/ASGI app through "
            "httpx's in-process transports (client cost only). rust: real vllm-rs + scripted engine in a "
            "child process, loopback keep-alive (end to end; goal SDK <= 1.10x httpx)."
        ),
        rows=rows,
    )
