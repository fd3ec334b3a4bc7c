"""Transport: the SDK per call against every peer's hand-written calls, fan-out CPU, and concurrency.

Rows, each against baselines measured in the same run:

- per call, on the real `vllm-rs` frontend (scripted engine, loopback keep-alive), GET /version and POST
  /reset_prefix_cache (one engine round trip): sync SDK vs `http.client` (the floor: one persistent
  connection, no pool), urllib3 and httpx; async SDK vs aiohttp (what SkyRL writes by hand) and
  httpx.AsyncClient. Variants take turns in blocks of 20 calls in a shuffled order; medians in
  microseconds. Goals: sync SDK <= 2.0x the floor on /version; async SDK <= 1.15x aiohttp.
- the same over https (vllm-rs serving TLS with certificates of a CA made for the run; every peer trusts
  that CA through an SSLContext, the SDK through `verify=`), same goals.
- fleet fan-out over 256 instant targets in one process (a small asyncio HTTP server on 256 ports in a
  child process): the client's CPU time per request (`time.process_time` around whole fan-outs), AsyncFleet
  against a hand-written httpx fan-out with a client per target and asyncio.gather, which is what the fleet
  cost before this transport (it measured 1.05x of that baseline). Goal: at least 2x less CPU per request.
- 1,000 concurrent calls on one AsyncDevClient against 100, on one instant target: the wall time ratio.
  Linear is 10x; goal <= 15x (httpx's pool with 1,000 waiters took 190x).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
import urllib3

from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient.fleet import AsyncFleet

from ._common import RustServer, Stats, ainterleave, compare, interleave, ratio, result, rust_available, value
from .bench_fleet import FleetServers

PER_ROUND = 20
SYNC_GOAL = 2.0
ASYNC_GOAL = 1.15
FANOUT_TARGETS = 256
FANOUT_GOAL = 2.0  # CPU per request: baseline / SDK
CONCURRENCY_GOAL = 15.0
RESET_QUERY = "reset_running_requests=false&reset_external=false"
ROUTES = ("version", "reset_prefix_cache")


# ---- the hand-written peers ------------------------------------------------------------------------------


class _HttpClientFloor:
    """The floor: http.client on one persistent connection (reconnecting if the server closed it)."""

    def __init__(self, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.conn = self._connection()

    def _connection(self) -> http.client.HTTPConnection:
        if self.tls is None:
            return http.client.HTTPConnection(self.host, self.port)
        return http.client.HTTPSConnection(self.host, self.port, context=self.tls)

    def call(self, method: str, target: str) -> Any:
        for attempt in (0, 1):
            try:
                self.conn.request(method, target, headers={"Accept": "application/json"})
                response = self.conn.getresponse()
                body = response.read()
                break
            except (http.client.RemoteDisconnected, ConnectionError):
                self.conn.close()
                self.conn = self._connection()
                if attempt:
                    raise
        if response.status != 200:
            raise RuntimeError(response.status)
        return json.loads(body)


def _tls(ca: str | None) -> ssl.SSLContext | None:
    """What the peers trust over https: the run's CA (the SDK is given the same file as `verify=`)."""
    return None if ca is None else ssl.create_default_context(cafile=ca)


def _sync_variants(url: str, ca: str | None) -> tuple[dict[str, Callable[[], object]], list[Any]]:
    host, port = url.split("//")[1].split(":")
    tls = _tls(ca)
    floor = _HttpClientFloor(host, int(port), tls)
    if tls is None:
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPConnectionPool(host, int(port), maxsize=1)
    else:
        pool = urllib3.HTTPSConnectionPool(host, int(port), maxsize=1, ssl_context=tls)
    hx = httpx.Client(verify=tls or True)
    sdk = DevClient(url, transport="auto", verify=ca or True)

    def u3(method: str, target: str) -> Any:
        r = pool.request(method, target, headers={"Accept": "application/json"})
        if r.status != 200:
            raise RuntimeError(r.status)
        return json.loads(r.data)

    def hxc(method: str, target: str) -> Any:
        r = hx.request(method, url + target)
        r.raise_for_status()
        return r.json()

    variants: dict[str, Callable[[], object]] = {
        "http.client version": lambda: floor.call("GET", "/version"),
        "http.client reset_prefix_cache": lambda: floor.call("POST", "/reset_prefix_cache?" + RESET_QUERY),
        "urllib3 version": lambda: u3("GET", "/version"),
        "urllib3 reset_prefix_cache": lambda: u3("POST", "/reset_prefix_cache?" + RESET_QUERY),
        "httpx version": lambda: hxc("GET", "/version"),
        "httpx reset_prefix_cache": lambda: hxc("POST", "/reset_prefix_cache?" + RESET_QUERY),
        "sdk version": sdk.version,
        "sdk reset_prefix_cache": sdk.reset_prefix_cache,
    }
    return variants, [floor.conn, pool, hx, sdk]


async def _async_samples(url: str, ca: str | None, rounds: int, budget: float) -> dict[str, list[float]]:
    tls = _tls(ca)
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls or True)) as session,
        httpx.AsyncClient(verify=tls or True) as hx,
        AsyncDevClient(url, transport="auto", verify=ca or True) as sdk,
    ):

        async def aio(method: str, target: str) -> Any:
            async with session.request(method, url + target) as r:
                if r.status != 200:
                    raise RuntimeError(r.status)
                return json.loads(await r.read())

        async def hxa(method: str, target: str) -> Any:
            r = await hx.request(method, url + target)
            r.raise_for_status()
            return r.json()

        variants: dict[str, Callable[[], Awaitable[object]]] = {
            "aiohttp version": lambda: aio("GET", "/version"),
            "aiohttp reset_prefix_cache": lambda: aio("POST", "/reset_prefix_cache?" + RESET_QUERY),
            "httpx version": lambda: hxa("GET", "/version"),
            "httpx reset_prefix_cache": lambda: hxa("POST", "/reset_prefix_cache?" + RESET_QUERY),
            "sdk version": sdk.version,
            "sdk reset_prefix_cache": sdk.reset_prefix_cache,
        }
        return await ainterleave(
            variants, rounds=rounds, per_round=PER_ROUND, warmup=PER_ROUND, max_seconds=budget
        )


def _per_call_rows(
    mode: str, samples: dict[str, list[float]], floor: str, goal: float
) -> list[dict[str, Any]]:
    rows = []
    peers = sorted({name.split(" ")[0] for name in samples} - {"sdk"}, key=lambda p: p != floor)
    for route in ROUTES:
        sdk = Stats.of(samples[f"sdk {route}"]).scaled(1e6)
        for peer in peers:
            base = Stats.of(samples[f"{peer} {route}"]).scaled(1e6)
            judged = peer == floor and (mode.endswith("async") or route == "version")
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


async def _fanout(urls: list[str], repeats: int) -> tuple[float, float]:
    clients = [httpx.AsyncClient() for _ in urls]

    async def bare() -> None:
        async def one(client: httpx.AsyncClient, url: str) -> bool:
            r = await client.post(
                url + "/reset_prefix_cache",
                params={"reset_running_requests": "false", "reset_external": "false"},
            )
            r.raise_for_status()
            return bool(r.json()["success"])

        assert all(await asyncio.gather(*(one(c, u) for c, u in zip(clients, urls, strict=True))))

    async with AsyncFleet(urls, max_concurrency=len(urls)) as fleet:

        async def sdk() -> None:
            (await fleet.reset_prefix_cache()).raise_for_errors()

        cpu_bare, cpu_sdk = [], []
        for _ in range(3):  # alternate, so a slow phase hits both
            cpu_bare.append(await _cpu_per_request(bare, repeats, len(urls)))
            cpu_sdk.append(await _cpu_per_request(sdk, repeats, len(urls)))
    for c in clients:
        await c.aclose()
    return min(cpu_bare), min(cpu_sdk)


async def _concurrency(url: str) -> tuple[float, float]:
    async with AsyncDevClient(url, transport="auto") as client:

        async def burst(n: int) -> float:
            start = time.perf_counter()
            results = await asyncio.gather(*(client.reset_prefix_cache() for _ in range(n)))
            assert all(r.success for r in results)
            return time.perf_counter() - start

        await burst(100)
        small = min([await burst(100) for _ in range(3)])
        large = min([await burst(1000) for _ in range(3)])
    return small, large


def measure_fanout_and_concurrency(repeats: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with FleetServers("asyncio", FANOUT_TARGETS) as servers:
        cpu_bare, cpu_sdk = asyncio.run(_fanout(servers.urls, repeats))
        gain = ratio(cpu_bare, cpu_sdk)
        rows.append(
            compare(
                f"fleet fan-out {FANOUT_TARGETS} instant targets, client CPU per request",
                baseline_name="httpx per target + gather (the fleet's cost before)",
                baseline=Stats.of([cpu_bare]).scaled(1e6),
                sdk=Stats.of([cpu_sdk]).scaled(1e6),
                goal=f">= {FANOUT_GOAL:.1f}x less",
                ok=gain >= FANOUT_GOAL,
            )
        )
        small, large = asyncio.run(_concurrency(servers.urls[0]))
        rows.append(
            value(
                "1000 vs 100 concurrent calls on one AsyncDevClient (wall time ratio)",
                round(ratio(large, small), 2),
                unit="x",
                detail=f"100 calls {small * 1e3:.1f} ms, 1000 calls {large * 1e3:.1f} ms",
                goal=f"<= {CONCURRENCY_GOAL:.0f}x",
                ok=ratio(large, small) <= CONCURRENCY_GOAL,
            )
        )
    return rows


def run(quick: bool = False) -> dict[str, Any]:
    rows = measure_per_call(rounds=6 if quick else 60, budget=3.0 if quick else 20.0)
    rows += measure_per_call(rounds=6 if quick else 60, budget=3.0 if quick else 20.0, tls=True)
    rows += measure_fanout_and_concurrency(repeats=2 if quick else 10)
    return result("transport", method=__doc__ or "", rows=rows)
