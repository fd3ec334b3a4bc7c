"""Barrier latency: how soon `reset_prefix_cache_until_success` returns once the engine can be reset.

The real `vllm-rs` frontend and the scripted engine run in a child process. For each trial the engine
answers `reset_prefix_cache` with False until a moment T, a random delay (uniform over about a second, so T
lands at every phase of the poll schedule) after it received the first poll, then True; the child records T
and the time of every reset call it got, on the shared monotonic clock. Two things are judged, neither from
the SDK's own back-off schedule:

- the bound from the server: the barrier returns within one round trip (bare httpx, p95 of the same reset,
  sampled between trials) of the moment the engine first accepted a reset (its first reset call after T).
  Goal: every trial.
- the latency after T against a baseline measured in the same run: a hand-written loop that polls the same
  route with bare httpx every 20 ms (and steps the engine between polls when the barrier does), its trials
  taking turns with the SDK's. No goal: the SDK backs off (20 ms doubling to 1 s) to spare the engine, and
  this row says what that costs.

A long wait then counts the polls each makes in N seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from vllm_devclient import AsyncDevClient, BarrierResult, DevClient

from ._common import RustServer, Stats, compare, result, rust_available, value

INTERVAL = 0.02
MAX_INTERVAL = 1.0
RESET = "/reset_prefix_cache"
RESET_PARAMS = {"reset_running_requests": "false", "reset_external": "false"}


class _Bare:
    """Bare httpx: the round trips sampled between trials, and the hand-written poll loop."""

    def __init__(self, server: RustServer) -> None:
        self.client = httpx.Client()
        self.url = server.base_url
        self.body = {"model": server.model, "prompt": "0", "max_tokens": 1, "temperature": 0}
        self.reset_rtt: list[float] = []
        self.step_rtt: list[float] = []

    def reset(self) -> bool:
        r = self.client.post(self.url + RESET, params=RESET_PARAMS)
        r.raise_for_status()
        return bool(r.json()["success"])

    def step(self) -> None:
        self.client.post(self.url + "/v1/completions", json=self.body).raise_for_status()

    def sample(self, n: int) -> None:
        for _ in range(n):
            start = time.perf_counter()
            self.reset()
            self.reset_rtt.append(time.perf_counter() - start)
            start = time.perf_counter()
            self.step()
            self.step_rtt.append(time.perf_counter() - start)

    def poll_loop(self, step: bool) -> int:
        """Poll every INTERVAL until the engine accepts the reset; the polls made."""
        polls = 1
        while not self.reset():
            if step:
                self.step()
            time.sleep(INTERVAL)
            polls += 1
        return polls

    def close(self) -> None:
        self.client.close()


@dataclass
class _Trials:
    latency: list[float] = field(default_factory=list)  # return - T
    after_accept: list[float] = field(default_factory=list)  # return - the first accepted reset
    polls: list[int] = field(default_factory=list)
    steps: list[int] = field(default_factory=list)
    gaps: list[list[float]] = field(default_factory=list)  # between the engine's reset calls


def _trial(server: RustServer, run: Callable[[], tuple[int, int]], delay: float, out: _Trials) -> None:
    """One run of `run` (-> polls, engine steps) against an engine that turns resettable `delay` s after
    the first poll."""
    server.command("switch_after", method="reset_prefix_cache", before=False, after=True, delay=delay)
    polls, steps = run()
    done = time.monotonic()
    switched = server.command("switched")["at"]
    calls = server.command("calls", method="reset_prefix_cache")["times"]
    server.command("reset")
    accepted = [t for t in calls if switched is not None and t >= switched]
    if switched is None or not accepted:  # cannot happen with `before=False`
        raise RuntimeError("the poll succeeded before the engine turned resettable")
    out.latency.append(done - switched)
    out.after_accept.append(done - accepted[0])
    out.polls.append(polls)
    out.steps.append(steps)
    out.gaps.append([b - a for a, b in itertools.pairwise(calls)])


@contextlib.contextmanager
def _barrier(server: RustServer, is_async: bool, step: bool) -> Iterator[Callable[[], tuple[int, int]]]:
    """The client's barrier as a blocking call; one client (one kept-alive connection) for all trials."""
    kwargs: dict[str, Any] = {
        "deadline": 30.0,
        "step_engine": step,
        "interval": INTERVAL,
        "max_interval": MAX_INTERVAL,
    }

    def counts(res: BarrierResult) -> tuple[int, int]:
        return res.attempts, res.engine_steps

    if not is_async:
        with DevClient(server.base_url, model=server.model) as dc:
            yield lambda: counts(dc.reset_prefix_cache_until_success(**kwargs))
        return
    loop = asyncio.new_event_loop()
    adc = AsyncDevClient(server.base_url, model=server.model)
    try:
        yield lambda: counts(loop.run_until_complete(adc.reset_prefix_cache_until_success(**kwargs)))
    finally:
        loop.run_until_complete(adc.close())
        loop.close()


def _measure(
    server: RustServer, bare: _Bare, *, step: bool, is_async: bool, trials: int, max_delay: float, seed: int
) -> tuple[_Trials, _Trials]:
    """SDK trials and hand-written loop trials, taking turns."""
    rng = random.Random(seed)
    sdk, loop = _Trials(), _Trials()
    with _barrier(server, is_async, step) as barrier:
        for _ in range(trials):
            _trial(server, barrier, rng.uniform(0.0, max_delay), sdk)
            _trial(server, lambda: (bare.poll_loop(step), 0), rng.uniform(0.0, max_delay), loop)
            bare.sample(5)
    return sdk, loop


def _rows(mode: str, step: bool, sdk: _Trials, loop: _Trials, reset_rtt: Stats) -> list[dict[str, Any]]:
    what = f"{mode} barrier, {'stepping' if step else 'no stepping'}"
    n = len(sdk.latency)
    within = sum(t <= reset_rtt.p95 for t in sdk.after_accept)
    rtt_ms = reset_rtt.scaled(1e3)
    return [
        compare(
            f"{what}: return after the engine's first accepted reset vs one round trip",
            baseline_name="bare httpx round trip of the reset",
            baseline=rtt_ms,
            sdk=Stats.of(sdk.after_accept).scaled(1e3),
            unit="ms",
            goal="every trial <= RTT p95",
            ok=within == n,
            within=f"{within}/{n}",
            trials=[
                {"latency_ms": round(lat * 1e3, 3), "after_accept_ms": round(acc * 1e3, 3), "polls": p}
                for lat, acc, p in zip(sdk.latency, sdk.after_accept, sdk.polls, strict=True)
            ],
        ),
        compare(
            f"{what}: latency after the engine turns resettable vs a hand-written {INTERVAL * 1e3:.0f} ms "
            "poll loop",
            baseline_name=f"bare httpx, polling every {INTERVAL * 1e3:.0f} ms",
            baseline=Stats.of(loop.latency).scaled(1e3),
            sdk=Stats.of(sdk.latency).scaled(1e3),
            unit="ms",
            polls_median=Stats.of(sdk.polls).median,
            polls_max=max(sdk.polls),
            loop_polls_median=Stats.of(loop.polls).median,
            engine_steps_max=max(sdk.steps),
        ),
    ]


def _long_wait(server: RustServer, bare: _Bare, wait: float) -> dict[str, Any]:
    sdk, loop = _Trials(), _Trials()
    with _barrier(server, False, True) as barrier:
        _trial(server, barrier, wait, sdk)
    _trial(server, lambda: (bare.poll_loop(True), 0), wait, loop)
    return compare(
        f"polls during a long wait vs a hand-written {INTERVAL * 1e3:.0f} ms poll loop",
        baseline_name=f"bare httpx, polling every {INTERVAL * 1e3:.0f} ms",
        baseline=Stats.of(loop.polls),
        sdk=Stats.of(sdk.polls),
        unit="polls",
        wait_s=wait,
        latency_ms=round(sdk.latency[0] * 1e3, 2),
        gaps_ms=[round(g * 1e3, 1) for g in sdk.gaps[0]],
    )


def run(quick: bool = False) -> dict[str, Any]:
    why_not = rust_available()
    if why_not is not None:
        return result(
            "barrier",
            method="needs the Rust frontend",
            rows=[value("rust frontend", "skipped", reason=why_not, ok=False)],
        )
    trials = 3 if quick else 12
    max_delay = 0.2 if quick else 1.0
    with RustServer() as server:
        bare = _Bare(server)
        try:
            bare.sample(20)  # warm the connection and the frontend
            bare.reset_rtt.clear()
            bare.step_rtt.clear()
            rows: list[dict[str, Any]] = []
            measured = []
            for seed, (is_async, step) in enumerate([(False, False), (False, True), (True, True)]):
                if quick and is_async:
                    continue
                sdk, loop = _measure(
                    server, bare, step=step, is_async=is_async, trials=trials, max_delay=max_delay, seed=seed
                )
                measured.append((is_async, step, sdk, loop))
            reset_rtt = Stats.of(bare.reset_rtt)
            for is_async, step, sdk, loop in measured:
                rows += _rows("async" if is_async else "sync", step, sdk, loop, reset_rtt)
            rows.append(_long_wait(server, bare, 1.5 if quick else 5.0))
            for name, samples in (
                ("POST /reset_prefix_cache", bare.reset_rtt),
                ("1-token completion", bare.step_rtt),
            ):
                rtt = Stats.of(samples).scaled(1e3)
                rows.append(
                    value(
                        f"RTT bare httpx {name}",
                        round(rtt.median, 3),
                        unit="ms",
                        p95=round(rtt.p95, 3),
                        n=rtt.n,
                    )
                )
        finally:
            bare.close()
    return result("barrier", method=__doc__ or "", rows=rows, trials_per_row=trials, max_delay_s=max_delay)
