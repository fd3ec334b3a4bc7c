"""Fleet fan-out: the wall time of one call over 32 targets, against one call to one target.

What is measured: `reset_prefix_cache` through AsyncFleet / Fleet over 32 targets against the same call on
one target with AsyncDevClient / DevClient, the variants interleaved in a shuffled order each round, median
and p95 of the wall time per call, ratio = fleet / one call. Two more baselines in the same rounds: a
hand-written fan-out over the fleet's own transport (one aiohttp session, asyncio.gather, each answer
checked), which shows what the fleet machinery itself costs, and (answering at once) a plain sequential
loop over the 32 clients, which shows what the fan-out saves.

The targets. In real use each of the 32 servers is its own machine; here they share 2 cores with the
client. So the main rows use a small asyncio HTTP server on 32 ports in one child process: it answers each
request with the real `/reset_prefix_cache` body after a set delay, spending tens of microseconds of CPU
per request, so the servers do not eat the client's cores and the rows show the fan-out itself. Three
regimes: the server answers at once (nothing to overlap: the ratio is then the client's own CPU for 32
requests against one round trip, the worst case), after 10 ms, and after 50 ms (a busy engine: a utility
call waits for the engine's current step; sleep, pause and weight updates take far longer). Goals: in
every regime, the fleet within 1.25x of the hand-written gather (answering at once, where nothing hides
the client's cost, is the regime that judges it); at 50 ms, the fleet within 1.5x of one call, i.e. close
to one call, not 32x.

The full run adds the real stack: 32 `vllm-rs` frontends, each with its own scripted engine (`Delay` sets
the engine time), all in one child process. Those rows are end to end on this box, where 32 frontends
and 32 engines compete with the client for the same 2 cores, so they carry no goal.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, Literal

import aiohttp

from vllm_devclient import AsyncDevClient, DevClient
from vllm_devclient.fleet import AsyncFleet, Fleet

from ._common import (
    ChildServer,
    Stats,
    ainterleave,
    compare,
    interleave,
    ratio,
    result,
    rust_available,
    value,
)

TARGETS = 32
DELAYS_S = (0.01, 0.05)
GOAL_DELAYED = 1.5  # fleet / one call, at 50 ms per call
GOAL_BY_HAND = 1.25  # fleet / the hand-written gather, in every regime
ServerKind = Literal["asyncio", "rust"]


class FleetServers(ChildServer):
    """`count` servers in a child process driven by JSON lines on stdin: `.urls`, `.command(op, ...)`."""

    what = "fleet servers"
    stop_timeout = 60.0

    def __init__(self, kind: ServerKind, count: int, startup_timeout: float = 120.0) -> None:
        code = f"from benchmarks.bench_fleet import _serve; _serve({kind!r}, {count})"
        super().__init__(code, startup_timeout)
        self.urls: list[str] = self.hello["urls"]
        self.startup_s: float = self.hello["startup_s"]


# ---- the child process ------------------------------------------------------------------------------------


def _say(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


_BODY = json.dumps({"success": True}).encode()
_RESPONSE = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
    len(_BODY),
    _BODY,
)


class _State:
    def __init__(self, count: int) -> None:
        self.delay = 0.0
        self.calls = [0] * count


class _Http(asyncio.Protocol):
    """Just enough HTTP/1.1 (keep-alive, Content-Length bodies) to answer every request like a server
    whose engine takes `state.delay` seconds, at tens of microseconds of CPU per request."""

    def __init__(self, state: _State, index: int) -> None:
        self.state, self.index = state, index
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, val = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(val)
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            self.state.calls[self.index] += 1
            if self.state.delay > 0:
                asyncio.get_running_loop().call_later(self.state.delay, self._answer)
            else:
                self._answer()

    def _answer(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(_RESPONSE)


async def _serve_asyncio(count: int) -> None:
    import time

    loop = asyncio.get_running_loop()
    state = _State(count)
    start = time.monotonic()
    servers = [
        await loop.create_server(lambda i=i: _Http(state, i), "127.0.0.1", 0)  # type: ignore[misc]
        for i in range(count)
    ]
    urls = [f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers]
    _say({"urls": urls, "startup_s": time.monotonic() - start})
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        cmd = json.loads(line)
        if cmd["op"] == "delay":
            state.delay = float(cmd["seconds"])
            _say({"ok": True})
        elif cmd["op"] == "calls":
            _say({"calls": state.calls})
        else:
            _say({"error": f"unknown op {cmd['op']!r}"})
    for server in servers:
        server.close()


def _serve_rust(count: int) -> None:
    import time

    from vllm_devclient.testing.engine_actions import Delay, Return
    from vllm_devclient.testing.frontends import Frontend, RustFrontend

    frontends: list[Frontend] = []
    try:
        start = time.monotonic()
        try:
            for _ in range(count):
                frontends.append(RustFrontend().start())
        except Exception as exc:
            _say({"error": f"{type(exc).__name__}: {exc}"})
            return
        _say({"urls": [f.base_url for f in frontends], "startup_s": time.monotonic() - start})
        for line in sys.stdin:
            cmd = json.loads(line)
            if cmd["op"] == "delay":
                seconds = float(cmd["seconds"])
                action = Delay(seconds, True) if seconds > 0 else Return(True)
                for frontend in frontends:
                    frontend.engine.script("reset_prefix_cache", action)
                _say({"ok": True})
            elif cmd["op"] == "calls":
                _say({"calls": [len(f.engine.calls_for("reset_prefix_cache")) for f in frontends]})
            else:
                _say({"error": f"unknown op {cmd['op']!r}"})
    finally:
        for frontend in frontends:
            frontend.stop()


def _serve(kind: ServerKind, count: int) -> None:
    if kind == "asyncio":
        asyncio.run(_serve_asyncio(count))
    else:
        _serve_rust(count)


# ---- the measurements -------------------------------------------------------------------------------------


async def _measure_async(urls: list[str], rounds: int, sequential: bool) -> dict[str, list[float]]:
    target = "/reset_prefix_cache?reset_running_requests=false&reset_external=false"
    async with (
        AsyncFleet(urls) as fleet,
        AsyncDevClient(urls[0], transport="auto") as one,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session,
    ):
        if type(fleet._transport).__name__ != "AiohttpPool":  # the hand-written gather's transport
            raise RuntimeError(f"the fleet travels on {type(fleet._transport).__name__}, not AiohttpPool")
        clients = list(fleet.clients.values())

        async def single() -> None:
            await one.reset_prefix_cache()

        async def fan_out() -> None:
            outcome = await fleet.reset_prefix_cache()
            if not outcome.all_ok:
                raise RuntimeError(f"the fleet call failed: {outcome.failed}")

        async def loop() -> None:
            for client in clients:
                await client.reset_prefix_cache()

        async def post(url: str) -> bool:
            async with session.post(url + target) as response:
                if response.status != 200:
                    raise RuntimeError(f"{url}: status {response.status}")
                return bool(json.loads(await response.read())["success"])

        async def by_hand() -> None:
            # What a careful caller writes on the same transport: one session, gather, check each answer.
            if not all(await asyncio.gather(*(post(u) for u in urls))):
                raise RuntimeError("a target answered success=false")

        variants = {"one": single, "fleet": fan_out, "by hand": by_hand}
        if sequential:
            variants["sequential"] = loop
        return await ainterleave(variants, rounds=rounds, warmup=2)


def _measure_sync(urls: list[str], rounds: int) -> dict[str, list[float]]:
    with Fleet(urls) as fleet, DevClient(urls[0], transport="auto") as one:
        return interleave(
            {
                "one": lambda: one.reset_prefix_cache(),
                "fleet": lambda: fleet.reset_prefix_cache().raise_for_errors(),
            },
            rounds=rounds,
            warmup=2,
        )


def _rows(
    label: str, samples: dict[str, list[float]], goal: float | None, baseline_name: str, judged: bool
) -> list[dict[str, Any]]:
    """The rows of one regime; `goal` (fleet / one call) where given, the by-hand goal where `judged`."""
    one = Stats.of(samples["one"]).scaled(1e3)
    fleet = Stats.of(samples["fleet"]).scaled(1e3)
    r = ratio(fleet.median, one.median)
    rows = [
        compare(
            f"fleet of {TARGETS} vs 1 call, {label}",
            baseline_name=baseline_name,
            baseline=one,
            sdk=fleet,
            unit="ms",
            goal=None if goal is None else f"<= {goal:g}x (not {TARGETS}x)",
            ok=None if goal is None else r <= goal,
        )
    ]
    if "by hand" in samples:
        by_hand = Stats.of(samples["by hand"]).scaled(1e3)
        rows.append(
            compare(
                f"fleet of {TARGETS} vs hand-written aiohttp gather, {label}",
                baseline_name="one aiohttp session + asyncio.gather",
                baseline=by_hand,
                sdk=fleet,
                unit="ms",
                goal=f"<= {GOAL_BY_HAND:g}x" if judged else None,
                ok=ratio(fleet.median, by_hand.median) <= GOAL_BY_HAND if judged else None,
            )
        )
    if "sequential" in samples:
        seq = Stats.of(samples["sequential"]).scaled(1e3)
        rows.append(
            value(
                f"sequential loop / fleet, {label}",
                ratio(seq.median, fleet.median),
                unit="x",
                sequential_ms=seq.as_dict(),
            )
        )
    return rows


def _regimes(
    kind: ServerKind, delays: tuple[float, ...], rounds: int, goal: float | None
) -> list[dict[str, Any]]:
    judged = goal is not None
    rows: list[dict[str, Any]] = []
    with FleetServers(kind, TARGETS) as servers:
        urls = servers.urls
        servers.command("delay", seconds=0)
        instant = asyncio.run(_measure_async(urls, rounds, sequential=True))
        rows += _rows(f"{kind}, instant, async", instant, None, "AsyncDevClient", judged)
        rows += _rows(f"{kind}, instant, sync", _measure_sync(urls, rounds), None, "DevClient", judged)
        for delay in delays:
            servers.command("delay", seconds=delay)
            delayed = asyncio.run(_measure_async(urls, rounds, sequential=False))
            row_goal = goal if delay == max(delays) else None
            rows += _rows(
                f"{kind}, {delay * 1000:.0f} ms, async", delayed, row_goal, "AsyncDevClient", judged
            )
        calls = servers.command("calls")["calls"]
        if min(calls) == 0:
            raise RuntimeError(f"some {kind} targets were never called: {calls}")
    return rows


def run(quick: bool = False) -> dict[str, Any]:
    rounds = 10 if quick else 40
    rows = _regimes("asyncio", DELAYS_S, rounds, GOAL_DELAYED)
    if not quick:
        why_not = rust_available()
        if why_not is None:
            rows += _regimes("rust", (0.05,), rounds // 2, None)
        else:
            rows.append(value("vllm-rs fleet", "skipped", reason=why_not, ok=False))
    return result("fleet", method=__doc__ or "", rows=rows)


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
