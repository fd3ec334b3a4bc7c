"""The verified reset's cost when the server tells the truth, against the plain reset in the same run.

The real `vllm-rs` frontend (started with --enable-prompt-tokens-details) runs in a child process on
`CachingEngine` (a scripted engine with a two-tier prefix cache, honest here), the probe's prompt warmed in
both tiers before every call. Variants take turns (sync client):

- plain: `reset_prefix_cache(reset_external=True)`, one round trip;
- by hand: the requests the check sends, written by hand: the reset, the probe's 1-token completion twice
  (the second shows it cached), the reset again, the probe once more (each completion with a cache_salt);
- verified: `reset_prefix_cache_verified(probe, reset_external=True)`: those same five requests (an honest
  server: the last answer reports no cached token, the proof; nothing more is sent).

The goal (the check costs no more than its requests) is judged as verified / by hand <= 1.25; the round trips
the verified reset makes are counted from the SDK's log.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from vllm_devclient import DevClient

from ._common import ChildServer, Stats, compare, result, rust_available, value

PROBE = "The quick brown fox jumps over the lazy dog. " * 4
GOAL = 1.25


class CachingRust(ChildServer):
    """`vllm-rs` on an honest CachingEngine in a child process; `.base_url`."""

    what = "Rust frontend on a caching engine"

    def __init__(self) -> None:
        super().__init__("from benchmarks.bench_reset_check import _serve; _serve()", 120.0)
        self.base_url: str = self.hello["base_url"]


def _serve() -> None:
    from vllm_devclient.testing.cache_engine import CachingEngine
    from vllm_devclient.testing.frontends import RustFrontend

    try:
        frontend = RustFrontend(engine=CachingEngine(), args={"enable_prompt_tokens_details": True}).start()
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return
    print(json.dumps({"base_url": frontend.base_url}), flush=True)
    try:
        sys.stdin.read()  # until the parent closes it
    finally:
        frontend.stop()


class _Count(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _exchanges(client: DevClient) -> list[str]:
    """The requests one verified reset sends (the SDK logs one DEBUG line per exchange)."""
    log = logging.getLogger("vllm_devclient")
    handler, level = _Count(), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        client.completion(PROBE, max_tokens=1)
        client.reset_prefix_cache_verified(PROBE, reset_external=True)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    return [line.split(" -> ")[0] for line in handler.lines[1:]]


def _variants(client: DevClient) -> dict[str, Callable[[], Any]]:
    """The plain reset, the verified reset's requests by hand, and the verified reset."""
    model = client.models().data[0].id
    salted = {"model": model, "prompt": PROBE, "max_tokens": 1, "temperature": 0, "cache_salt": "bench"}

    def by_hand() -> None:
        client.reset_prefix_cache(reset_external=True)
        client.request("POST", "/v1/completions", json=salted)
        client.request("POST", "/v1/completions", json=salted)
        client.reset_prefix_cache(reset_external=True)
        client.request("POST", "/v1/completions", json=salted)

    return {
        "plain": lambda: client.reset_prefix_cache(reset_external=True),
        "by hand": by_hand,
        "verified": lambda: client.reset_prefix_cache_verified(PROBE, reset_external=True),
    }


def _timed(client: DevClient, variants: dict[str, Callable[[], Any]], rounds: int) -> dict[str, list[float]]:
    """Each variant's times (s), taking turns, the probe's blocks warmed in both tiers before each; after 3
    rounds of warm-up, `rounds` rounds or 60 s."""

    def warm() -> None:
        client.completion(PROBE, max_tokens=1)

    timed: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(3):
        warm()
        for fn in variants.values():
            fn()
    began = time.perf_counter()
    for _ in range(rounds):
        for name, fn in variants.items():
            warm()
            start = time.perf_counter()
            fn()
            timed[name].append(time.perf_counter() - start)
        if time.perf_counter() - began > 60:
            break
    return timed


def run(quick: bool = False) -> dict[str, Any]:
    why_not = rust_available()
    if why_not is not None:
        return result(
            "reset_check",
            method="needs the Rust frontend",
            rows=[value("rust frontend", "skipped", reason=why_not, ok=False)],
        )
    with CachingRust() as server, DevClient(server.base_url) as client:
        timed = _timed(client, _variants(client), 20 if quick else 200)
        sent = _exchanges(client)
    stats = {name: Stats.of(samples).scaled(1e3) for name, samples in timed.items()}
    ratio_allowed = stats["verified"].median / stats["by hand"].median
    return result(
        "reset_check",
        method=(
            "real vllm-rs (--enable-prompt-tokens-details) on an honest CachingEngine (child process); "
            "sync DevClient; variants take turns, the probe's prompt warmed in both tiers before each; "
            "the check's five requests against the same five by hand; "
            "median / p95 per call"
        ),
        rows=[
            compare(
                "verified reset vs plain reset",
                baseline_name="plain reset",
                baseline=stats["plain"],
                sdk=stats["verified"],
                unit="ms",
            ),
            compare(
                "verified reset vs its requests by hand",
                baseline_name="reset, probe twice, reset, probe, by hand",
                baseline=stats["by hand"],
                sdk=stats["verified"],
                unit="ms",
                goal=f"<= {GOAL}x (no more than its requests)",
                ok=ratio_allowed <= GOAL,
            ),
            value("requests of one verified reset", len(sent), sent=sent),
        ],
    )
