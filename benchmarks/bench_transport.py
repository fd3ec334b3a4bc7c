"""Transport: the SDK per call against every peer's hand-written calls, the default transports' gain over
httpx, fan-out CPU, and concurrency.

Rows, each against baselines measured in the same run:

- per call, on the real `vllm-rs` frontend (scripted engine, loopback keep-alive), GET /version and POST
  /reset_prefix_cache (one engine round trip): the sync SDK vs `http.client` (the floor: one persistent
  connection, no pool), urllib3 and httpx; the async SDK vs aiohttp (what SkyRL writes by hand) and
  httpx.AsyncClient. Variants take turns in blocks of 20 calls in a shuffled order; medians in
  microseconds. Goals: sync SDK <= 2.0x the floor on /version; async SDK <= 1.15x aiohttp.
- the transport's gain, a row of its own: the SDK on its default pool (h11 sync, aiohttp async) against
  the same SDK on httpx (`transport="httpx"`), in the same rounds. The SDK's own cost over one transport
  is bench_overhead's.
- both again over https: vllm-rs serving TLS with certificates of a CA made for the run; every peer trusts
  that CA through an SSLContext, the SDK through `verify=` (the pools checked: still h11 and aiohttp).
  Same goals.
- fleet fan-out over 256 instant targets in one process (a small asyncio HTTP server on 256 ports in a
  child process): the client's CPU time per request (`time.process_time` around whole fan-outs), each
  variant run in turn three times: AsyncFleet on its default pool; the fleet's former layout, really run
  (an AsyncDevClient on its own httpx pool per target, asyncio.gather; goal: at least 2x less CPU per
  request for the fleet); and two fan-outs written by hand: aiohttp (one session, asyncio.gather) and httpx
  (a client per target, asyncio.gather).
- 1,000 concurrent calls on one AsyncDevClient against 100, on one instant target: the wall time ratio,
  on the default pool (linear is 10x; goal <= 15x) and on httpx (no goal: what the default replaced).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import urllib3

from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient.fleet import AsyncFleet

from . import _peers
from ._common import (
    MIN_ROUNDS,
    RustServer,
    Stats,
    ainterleave,
    compare,
    interleave,
    ratio,
    result,
    rust_available,
    value,
)
from .bench_fleet import FleetServers

PER_ROUND = 20
SYNC_GOAL = 2.0
ASYNC_GOAL = 1.15
FANOUT_TARGETS = 256
FANOUT_GOAL = 2.0  # CPU per request: the former layout / the fleet
CONCURRENCY_GOAL = 15.0
FLEET = "AsyncFleet"
FORMER = "the fleet's former layout (an AsyncDevClient on httpx per target + gather)"
AIOHTTP_BY_HAND = "aiohttp by hand (one session + gather)"
HTTPX_BY_HAND = "httpx by hand (a client per target + gather)"
ROUTES = {"version": ("GET", "/version"), "reset_prefix_cache": ("POST", _peers.RESET_TARGET)}
SDK_VARIANTS = ("sdk", "sdk-httpx")


# ---- per call ------------------------------------------------------------------------------------------


def _calls(name: str, call: Callable[[str, str], Any]) -> dict[str, Callable[[], Any]]:
    return {f"{name} {route}": functools.partial(call, m, t) for route, (m, t) in ROUTES.items()}


def _sdk_calls(name: str, client: Any, pool: str) -> dict[str, Callable[[], Any]]:
    # Checked, so neither a proxy in the environment nor https can swap the pool a row names.
    if _peers.transport_of(client) != pool:
        raise RuntimeError(f"{name} travels on {_peers.transport_of(client)}, not {pool}")
    return {f"{name} {route}": getattr(client, route) for route in ROUTES}


def _tls(ca: str | None) -> ssl.SSLContext | None:
    """What the peers trust over https: the run's CA (the SDK is given the same file as `verify=`)."""
    return None if ca is None else ssl.create_default_context(cafile=ca)


def _sync_variants(url: str, ca: str | None) -> tuple[dict[str, Callable[[], object]], list[Any]]:
    host, port = url.split("//")[1].split(":")
    tls = _tls(ca)
    floor = _peers.HttpClientFloor(host, int(port), tls)
    if tls is None:
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPConnectionPool(host, int(port), maxsize=1)
    else:
        pool = urllib3.HTTPSConnectionPool(host, int(port), maxsize=1, ssl_context=tls)
    hx = httpx.Client(verify=tls or True)
    sdk = DevClient(url, transport="auto", verify=ca or True)
    sdk_httpx = DevClient(url, transport="httpx", verify=ca or True)
    variants = (
        _calls("http.client", floor.call)
        | _calls("urllib3", _peers.urllib3_call(pool))
        | _calls("httpx", _peers.httpx_call(hx, url))
        | _sdk_calls("sdk", sdk, "H11Pool")
        | _sdk_calls("sdk-httpx", sdk_httpx, "HttpxTransport")
    )
    return variants, [floor, pool, hx, sdk, sdk_httpx]


async def _async_samples(url: str, ca: str | None, rounds: int, budget: float) -> dict[str, list[float]]:
    tls = _tls(ca)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls or True)) as session,
        httpx.AsyncClient(verify=tls or True) as hx,
        AsyncDevClient(url, transport="auto", verify=ca or True) as sdk,
        AsyncDevClient(url, transport="httpx", verify=ca or True) as sdk_httpx,
    ):
        variants = (
            _calls("aiohttp", _peers.aiohttp_call(session, url))
            | _calls("httpx", _peers.httpx_acall(hx, url))
            | _sdk_calls("sdk", sdk, "AiohttpPool")
            | _sdk_calls("sdk-httpx", sdk_httpx, "AsyncHttpxTransport")
        )
        return await ainterleave(
            variants, rounds=rounds, per_round=PER_ROUND, warmup=PER_ROUND, max_seconds=budget
        )


def _per_call_rows(
    mode: str, samples: dict[str, list[float]], floor: str, goal: float
) -> list[dict[str, Any]]:
    rows = []
    # The floor first, then the peers as the variants list them (not a set's order: the table stays put).
    listed = [p for p in dict.fromkeys(name.split(" ")[0] for name in samples) if p not in SDK_VARIANTS]
    peers = sorted(listed, key=lambda p: p != floor)
    asynchronous = mode.endswith("async")  # "async" or "https async"
    pool = "aiohttp" if asynchronous else "h11"
    for route in ROUTES:
        sdk = Stats.of(samples[f"sdk {route}"]).scaled(1e6)
        for peer in peers:
            base = Stats.of(samples[f"{peer} {route}"]).scaled(1e6)
            judged = peer == floor and (asynchronous or route == "version")
            rows.append(
                compare(
                    f"rust {mode} {route} vs {peer}",
                    baseline_name=peer,
                    baseline=base,
                    sdk=sdk,
                    goal=f"<= {goal:.2f}x" if judged else None,
                    ok=(ratio(sdk.median, base.median) <= goal) if judged else None,
                )
            )
        rows.append(
            compare(
                f"rust {mode} {route}: transport gain, SDK on {pool} vs SDK on httpx",
                baseline_name="the SDK on httpx",
                baseline=Stats.of(samples[f"sdk-httpx {route}"]).scaled(1e6),
                sdk=sdk,
                transport=pool,
            )
        )
    return rows


def measure_per_call(rounds: int, budget: float, *, tls: bool = False) -> list[dict[str, Any]]:
    why_not = rust_available()
    if why_not is not None:
        return [value("rust frontend", "skipped", reason=why_not, ok=False)]
    with RustServer(tls=tls) as server:
        variants, closers = _sync_variants(server.base_url, server.ca)
        try:
            sync = interleave(
                variants, rounds=rounds, per_round=PER_ROUND, warmup=PER_ROUND, max_seconds=budget
            )
        finally:
            for c in closers:
                c.close()
        asynchronous = asyncio.run(_async_samples(server.base_url, server.ca, rounds, budget))
    scheme = "https " if tls else ""
    return _per_call_rows(f"{scheme}sync", sync, "http.client", SYNC_GOAL) + _per_call_rows(
        f"{scheme}async", asynchronous, "aiohttp", ASYNC_GOAL
    )


# ---- fan-out CPU and concurrency ---------------------------------------------------------------------------


async def _cpu_per_request(fan_out: Callable[[], Awaitable[object]], repeats: int, requests: int) -> float:
    await fan_out()  # connections made, caches warm
    start = time.process_time()
    for _ in range(repeats):
        await fan_out()
    return (time.process_time() - start) / (repeats * requests)


async def _fanout(urls: list[str], repeats: int, turns: int = 3) -> dict[str, float]:
    """Client CPU per request of each fan-out (the best of ``turns`` turns, the variants taking turns)."""
    # One SSLContext for the 512 httpx pools (http:// targets: unused; each would load the CA bundle, 25 ms).
    tls = ssl.create_default_context()
    clients = [httpx.AsyncClient(verify=tls) for _ in urls]
    calls = [_peers.httpx_acall(c, u) for c, u in zip(clients, urls, strict=True)]
    # The fleet's former layout: an AsyncDevClient on its own httpx pool per target, gathered.
    former = [AsyncDevClient(u, transport="httpx", verify=tls) for u in urls]
    method, target = ROUTES["reset_prefix_cache"]
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
        AsyncFleet(urls, max_concurrency=len(urls)) as fleet,
    ):
        aio = [_peers.aiohttp_call(session, u) for u in urls]

        async def by_hand(per_target: list[_peers.ACall]) -> None:
            answers = await asyncio.gather(*(call(method, target) for call in per_target))
            if not all(a["success"] for a in answers):
                raise RuntimeError("a target answered success=false")

        async def sdk_fleet() -> None:
            (await fleet.reset_prefix_cache()).raise_for_errors()

        async def sdk_former() -> None:
            if not all(r.success for r in await asyncio.gather(*(c.reset_prefix_cache() for c in former))):
                raise RuntimeError("a target answered success=false")

        variants: dict[str, Callable[[], Awaitable[None]]] = {
            FLEET: sdk_fleet,
            FORMER: sdk_former,
            AIOHTTP_BY_HAND: lambda: by_hand(aio),
            HTTPX_BY_HAND: lambda: by_hand(calls),
        }
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(turns):  # take turns, so a slow phase hits every variant
            for name, fan_out in variants.items():
                cpu[name].append(await _cpu_per_request(fan_out, repeats, len(urls)))
    for c in clients:
        await c.aclose()
    for d in former:
        await d.close()
    return {name: min(v) for name, v in cpu.items()}


async def _concurrency(url: str, transport: str, tries: int = 3) -> tuple[float, float]:
    """The best wall time of ``tries`` bursts of 100 and of 1000 concurrent calls, after a warm-up burst."""
    async with AsyncDevClient(url, transport=transport) as client:  # type: ignore[arg-type]

        async def burst(n: int) -> float:
            start = time.perf_counter()
            results = await asyncio.gather(*(client.reset_prefix_cache() for _ in range(n)))
            assert all(r.success for r in results)
            return time.perf_counter() - start

        await burst(100)
        small = min([await burst(100) for _ in range(tries)])
        large = min([await burst(1000) for _ in range(tries)])
    return small, large


def _cpu_row(cpu: dict[str, float], sdk: str, baseline: str, what: str = "", **judged: Any) -> dict[str, Any]:
    return compare(
        f"fleet fan-out {FANOUT_TARGETS} instant targets, client CPU per request: {what}{sdk} vs {baseline}",
        baseline_name=baseline,
        baseline=Stats.of([cpu[baseline]]).scaled(1e6),
        sdk=Stats.of([cpu[sdk]]).scaled(1e6),
        **judged,
    )


def measure_fanout_and_concurrency(repeats: int, turns: int = 3) -> list[dict[str, Any]]:
    """The fan-out and concurrency rows; ``turns``: of each fan-out variant, and bursts of each size."""
    rows: list[dict[str, Any]] = []
    with FleetServers("asyncio", FANOUT_TARGETS) as servers:
        cpu = asyncio.run(_fanout(servers.urls, repeats, turns))
        gain = ratio(cpu[FORMER], cpu[FLEET])
        rows += [
            _cpu_row(
                cpu,
                FLEET,
                FORMER,
                "transport gain, ",
                goal=f">= {FANOUT_GOAL:.1f}x less",
                ok=gain >= FANOUT_GOAL,
            ),
            _cpu_row(cpu, FLEET, AIOHTTP_BY_HAND),
            _cpu_row(cpu, FLEET, HTTPX_BY_HAND),
        ]
        for transport, goal in (("auto", CONCURRENCY_GOAL), ("httpx", None)):
            small, large = asyncio.run(_concurrency(servers.urls[0], transport, turns))
            on = "its default pool" if transport == "auto" else "httpx"
            rows.append(
                value(
                    f"1000 vs 100 concurrent calls on one AsyncDevClient on {on} (wall time ratio)",
                    round(ratio(large, small), 2),
                    unit="x",
                    detail=f"100 calls {small * 1e3:.1f} ms, 1000 calls {large * 1e3:.1f} ms",
                    goal=None if goal is None else f"<= {goal:.0f}x",
                    ok=None if goal is None else ratio(large, small) <= goal,
                )
            )
    return rows


def run(quick: bool = False) -> dict[str, Any]:
    # Quick (the smoke test's): every row, its numbers from the fewest rounds and one turn of each.
    rounds, budget = (MIN_ROUNDS, 1.5) if quick else (60, 20.0)
    rows = measure_per_call(rounds=rounds, budget=budget)
    rows += measure_per_call(rounds=rounds, budget=budget, tls=True)
    rows += measure_fanout_and_concurrency(repeats=1 if quick else 10, turns=1 if quick else 3)
    return result("transport", method=__doc__ or "", rows=rows)
