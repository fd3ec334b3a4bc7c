"""Barrier latency: how long `reset_prefix_cache_until_success` takes to notice the engine became resettable.

The real `vllm-rs` frontend and the scripted engine run in a child process. For each trial the engine
answers `reset_prefix_cache` with False until a moment T, a random delay (uniform over about a second, so T
lands at every phase of the poll schedule) after it received the barrier's first poll, then True; the child
records T on the shared monotonic clock. Latency = barrier return - T. Bound for a trial = the poll
interval that was in effect at T (the sleep before the successful poll, from the attempt count and the
Backoff schedule) + one round trip (+ one engine-step round trip when stepping). Between trials, bare
httpx round trips of the same reset (and of the 1-token completion used to step) are sampled: the
baseline, measured interleaved in the same run.

A long wait then shows the back-off: polls made in N seconds against a fixed 20 ms poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx

from vllm_devclient import AsyncDevClient, BarrierResult, DevClient
from vllm_devclient.operations import Backoff

from ._common import RustServer, Stats, compare, result, rust_available, value

INTERVAL = 0.02
MAX_INTERVAL = 1.0
RESET = "/reset_prefix_cache"
RESET_PARAMS = {"reset_running_requests": "false", "reset_external": "false"}


def interval_before(attempt: int, backoff: Backoff) -> float:
    """The sleep before poll number `attempt` (1-based); 0 for the first poll."""
    if attempt <= 1:
        return 0.0
    intervals = backoff.intervals()
    wait = 0.0
    for _ in range(attempt - 1):
        wait = next(intervals)
    return wait


def ideal_polls(wait: float, backoff: Backoff) -> int:
    """Polls a zero-latency client makes when the engine turns resettable `wait` s after the first poll."""
    polls, elapsed = 1, 0.0
    for interval in backoff.intervals():
        if elapsed >= wait:
            return polls
        elapsed += interval
        polls += 1
    raise AssertionError("unreachable")


class _Rtt:
    """Bare httpx round trips of the barrier's two requests, sampled between trials."""

    def __init__(self, server: RustServer) -> None:
        self.client = httpx.Client()
        self.url = server.base_url
        self.body = {"model": server.model, "prompt": "0", "max_tokens": 1, "temperature": 0}
        self.reset: list[float] = []
        self.step: list[float] = []

    def sample(self, n: int) -> None:
        for _ in range(n):
            start = time.perf_counter()
            self.client.post(self.url + RESET, params=RESET_PARAMS).raise_for_status()
            self.reset.append(time.perf_counter() - start)
            start = time.perf_counter()
            self.client.post(self.url + "/v1/completions", json=self.body).raise_for_status()
            self.step.append(time.perf_counter() - start)

    def close(self) -> None:
        self.client.close()


def _trial(
    server: RustServer, barrier: Callable[..., BarrierResult], delay: float, step: bool
) -> tuple[float, int, int, list[float]]:
    """One barrier run; (latency s, attempts, engine steps, gaps between the engine's reset calls)."""
    # The engine answers False, and True from `delay` s after it receives the barrier's first poll.
    server.command("switch_after", method="reset_prefix_cache", before=False, after=True, delay=delay)
    res = barrier(deadline=30.0, step_engine=step, interval=INTERVAL, max_interval=MAX_INTERVAL)
    done = time.monotonic()
    switched = server.command("switched")["at"]
    calls = server.command("calls", method="reset_prefix_cache")["times"]
    server.command("reset")
    if switched is None:  # the barrier returned before the switch: cannot happen with `before=False`
        raise RuntimeError("the barrier succeeded before the engine turned resettable")
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    return done - switched, res.attempts, res.engine_steps, gaps


@contextlib.contextmanager
def _barrier(server: RustServer, is_async: bool) -> Iterator[Callable[..., BarrierResult]]:
    """The client's barrier as a blocking call; one client (one kept-alive connection) for all trials."""
    if not is_async:
        with DevClient(server.base_url, model=server.model) as dc:
            yield dc.reset_prefix_cache_until_success
        return
    loop = asyncio.new_event_loop()
    adc = AsyncDevClient(server.base_url, model=server.model)

    def run(**kwargs: Any) -> BarrierResult:
        return loop.run_until_complete(adc.reset_prefix_cache_until_success(**kwargs))

    try:
        yield run
    finally:
        loop.run_until_complete(adc.close())
        loop.close()


def _measure(
    server: RustServer, rtt: _Rtt, *, step: bool, is_async: bool, trials: int, max_delay: float, seed: int
) -> dict[str, Any]:
    backoff = Backoff(INTERVAL, MAX_INTERVAL)
    rng = random.Random(seed)
    latencies: list[float] = []
    intervals: list[float] = []
    attempts: list[int] = []
    steps: list[int] = []
    with _barrier(server, is_async) as barrier:
        for _ in range(trials):
            latency, n, s, _gaps = _trial(server, barrier, rng.uniform(0.0, max_delay), step)
            latencies.append(latency)
            attempts.append(n)
            steps.append(s)
            intervals.append(interval_before(n, backoff))
            rtt.sample(5)
    reset_p95 = Stats.of(rtt.reset).p95
    step_p95 = Stats.of(rtt.step).p95 if step else 0.0
    bounds = [iv + reset_p95 + step_p95 for iv in intervals]
    within = sum(lat <= b for lat, b in zip(latencies, bounds, strict=True))
    return {
        "latency": latencies,
        "bound": bounds,
        "interval": intervals,
        "attempts": attempts,
        "steps": steps,
        "within": within,
    }


def _row(mode: str, step: bool, m: dict[str, Any]) -> dict[str, Any]:
    lat = Stats.of(m["latency"]).scaled(1e3)
    bound = Stats.of(m["bound"]).scaled(1e3)
    excess = [(lat_ - iv) * 1e3 for lat_, iv in zip(m["latency"], m["interval"], strict=True)]
    n = len(m["latency"])
    what = "stepping" if step else "no stepping"
    return compare(
        f"{mode} barrier, {what}: latency vs interval+RTT",
        baseline_name="poll interval at T + RTT p95" + (" + step p95" if step else ""),
        baseline=bound,
        sdk=lat,
        unit="ms",
        goal="every trial <= bound",
        ok=m["within"] == n,
        within=f"{m['within']}/{n}",
        polls_median=Stats.of(m["attempts"]).median,
        polls_max=max(m["attempts"]),
        engine_steps_max=max(m["steps"]),
        excess_over_interval_ms=Stats.of(excess).as_dict(),
        trials=[
            {"latency_ms": round(lat_ * 1e3, 3), "bound_ms": round(b * 1e3, 3), "polls": n}
            for lat_, b, n in zip(m["latency"], m["bound"], m["attempts"], strict=True)
        ],
    )


def _long_wait(server: RustServer, wait: float) -> dict[str, Any]:
    backoff = Backoff(INTERVAL, MAX_INTERVAL)
    with DevClient(server.base_url, model=server.model) as dc:
        latency, attempts, _steps, gaps = _trial(server, dc.reset_prefix_cache_until_success, wait, True)
    ideal = ideal_polls(wait, backoff)
    fixed = int(wait / INTERVAL) + 1
    return value(
        f"polls during a {wait:.0f} s wait (fixed {INTERVAL * 1e3:.0f} ms poll: {fixed})",
        attempts,
        unit="polls",
        goal=f"<= {ideal + 1} (the back-off schedule's {ideal}, +1)",
        ok=attempts <= ideal + 1,
        latency_ms=round(latency * 1e3, 2),
        gaps_ms=[round(g * 1e3, 1) for g in gaps],
    )


def run(quick: bool = False) -> dict[str, Any]:
    why_not = rust_available()
    if why_not is not None:
        return result(
            "barrier",
            method="needs the Rust frontend",
            rows=[value("rust frontend", "skipped", reason=why_not, ok=False)],
        )
    trials = 5 if quick else 12
    max_delay = 0.4 if quick else 1.0
    with RustServer() as server:
        rtt = _Rtt(server)
        try:
            rtt.sample(20)  # warm the connection and the frontend
            rtt.reset.clear()
            rtt.step.clear()
            rows: list[dict[str, Any]] = []
            for seed, (is_async, step) in enumerate([(False, False), (False, True), (True, True)]):
                if quick and is_async:
                    continue
                m = _measure(
                    server, rtt, step=step, is_async=is_async, trials=trials, max_delay=max_delay, seed=seed
                )
                mode = "async" if is_async else "sync"
                rows.append(_row(mode, step, m))
                polls = Stats.of(m["attempts"])
                worst = max(lat / b for lat, b in zip(m["latency"], m["bound"], strict=True))
                rows.append(
                    value(
                        f"{mode} barrier, {'stepping' if step else 'no stepping'}: polls per barrier",
                        f"median {polls.median:g}, max {polls.max:g}; worst trial {worst:.0%} of its bound",
                        engine_steps_max=max(m["steps"]),
                        worst_latency_over_bound=worst,
                    )
                )
            rows.append(_long_wait(server, 1.5 if quick else 5.0))
            reset_rtt = Stats.of(rtt.reset).scaled(1e3)
            step_rtt = Stats.of(rtt.step).scaled(1e3)
            rows.append(
                value(
                    "RTT bare httpx POST /reset_prefix_cache",
                    round(reset_rtt.median, 3),
                    unit="ms",
                    p95=round(reset_rtt.p95, 3),
                    n=reset_rtt.n,
                )
            )
            rows.append(
                value(
                    "RTT bare httpx 1-token completion (step)",
                    round(step_rtt.median, 3),
                    unit="ms",
                    p95=round(step_rtt.p95, 3),
                    n=step_rtt.n,
                )
            )
        finally:
            rtt.close()
    return result(
        "barrier",
        method=(
            f"Rust frontend + scripted engine (child process). Engine answers reset False until a random "
            f"moment T (uniform in 0..{max_delay:g} s after the first poll), then True; latency = barrier "
            f"return - T on the shared monotonic clock, {trials} trials per row. Bound per trial = the poll "
            f"interval in effect at T (Backoff {INTERVAL * 1e3:.0f} ms doubling to {MAX_INTERVAL:g} s, from "
            "the attempt count) + bare-httpx RTT p95 of the reset (+ of the step when stepping), RTTs "
            "sampled between trials. Long wait: polls in N s vs a fixed 20 ms poll."
        ),
        rows=rows,
    )
