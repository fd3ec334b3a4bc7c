"""What a real-size report says of the budget: startup, decode rate, phase times, the CPU tier, the reload.

Every figure is read from fields the offload check records (format 2); where a report lacks the field, the
figure is ``None`` (the table says "not measured"), never a default. The H100 column is an ESTIMATE computed
from the measured decode rate and the committed parameter counts, and says so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpu_tests.offload_check.profiles import PROFILES
from gpu_tests.offload_check.report import Iteration, OffloadCheckReport, Run

from .real_plan import ESTIMATES, OVERHEAD_GIB

DECODE_IN_FLIGHT = 8  # the "decode rate at concurrency 8": the check's decode run sends this many
# What an H100 (80 GB) changes, ESTIMATES: usable memory, and eager decode at these batches partly bound by
# HBM bandwidth (3.35 against the H200's 4.8 TB/s), so a step 1.2 to 1.4 times longer.
H100_GIB, H100_SLOWDOWN = 79.0, (1.2, 1.4)
PHASES = (
    "cold_run_s",
    "warm_run_s",
    "warm2_run_s",
    "decode_run_s",
    "settle_s",
    "reset_gpu_s",
    "reload_run_s",
    "cold2_run_s",
)


@dataclass(frozen=True)
class Decode:
    tokens_per_s: float  # output tokens of the answered requests / the run's seconds (median over runs)
    in_flight: int  # the most requests at once among those runs
    runs: int


@dataclass(frozen=True)
class Occupancy:
    stored: int
    evicted: int
    live: int
    held_at_cold: int
    gib: float | None  # live entries x bytes per stored entry (from the GPU-to-CPU bytes of the same window)


@dataclass(frozen=True)
class Reload:
    prompts: int  # prompts the warm run served something of from the cache
    whole: int  # of those, the ones the reload served as much cached as the warm run did
    cached_tokens: int  # reload: local + loaded
    warm_cached_tokens: int
    loaded_tokens: int  # by the connector
    uncached: int = 0  # prompts the warm run cached nothing of (shorter than a block): nothing to reload


def in_flight(report: OffloadCheckReport, run: Run) -> int:
    return min(len(run.answers), report.concurrency or len(run.answers))


def decode(report: OffloadCheckReport, max_in_flight: int = DECODE_IN_FLIGHT) -> Decode | None:
    """Output tokens per second of the clean passes' ``decode`` runs (a few questions at once from the GPU
    prefix cache, so nearly all decode) with at most ``max_in_flight`` requests at once."""
    rates, flights = [], []
    for it in report.clean():
        for run in it.runs.values():
            if run.label != "decode":
                continue
            n = in_flight(report, run)
            tokens = sum(a.output_tokens for a in run.answers if a.error is None)
            if 1 < n <= max_in_flight and run.latency_s > 0 and tokens:
                rates.append(tokens / run.latency_s)
                flights.append(n)
    if not rates:
        return None
    return Decode(statistics.median(rates), max(flights), len(rates))


def at_once(report: OffloadCheckReport) -> Decode | None:
    """Output tokens per second of the first clean cold run: the profile's whole load (prefill included)."""
    it = first_clean(report)
    run = it.runs.get("cold") if it is not None else None
    if run is None or run.latency_s <= 0:
        return None
    tokens = sum(a.output_tokens for a in run.answers if a.error is None)
    return Decode(tokens / run.latency_s, in_flight(report, run), 1) if tokens else None


def first_clean(report: OffloadCheckReport) -> Iteration | None:
    clean = report.clean()
    return clean[0] if clean else None


def occupancy(report: OffloadCheckReport) -> Occupancy | None:
    it = first_clean(report)
    if it is None or it.cpu_tier is None:
        return None
    tier = it.cpu_tier
    stored_bytes = sum(w.gpu_to_cpu_bytes or 0.0 for k, w in it.windows.items() if k in ("cold", "warm"))
    gib = tier.live * stored_bytes / tier.stored / (1 << 30) if tier.stored and stored_bytes else None
    return Occupancy(tier.stored, tier.evicted, tier.live, tier.held_at_cold, gib)


def reload(report: OffloadCheckReport) -> Reload | None:
    it = first_clean(report)
    if it is None or "reload" not in it.runs or "warm" not in it.runs:
        return None
    warm = it.runs["warm"].by_probe()
    every = [
        (a.split, split)
        for a in it.runs["reload"].answers
        if a.split is not None and a.probe in warm and (split := warm[a.probe].split) is not None
    ]
    pairs = [(r, w) for r, w in every if w.cached > 0]
    if not every:
        return None
    return Reload(
        prompts=len(pairs),
        whole=sum(r.cached >= w.cached for r, w in pairs),
        cached_tokens=sum(r.cached for r, _ in pairs),
        warm_cached_tokens=sum(w.cached for _, w in pairs),
        loaded_tokens=sum(r.external for r, _ in every),
        uncached=len(every) - len(pairs),
    )


def weights_gib(report: OffloadCheckReport) -> float | None:
    profile = PROFILES.get(report.profile)
    upstream = profile.real_size_of if profile is not None else None
    return ESTIMATES[upstream].weights_gib if upstream in ESTIMATES else None


def h100(report: OffloadCheckReport) -> str:
    """What an H100 would change for this case: ESTIMATES from the measured rate and the weights."""
    parts = []
    rate = decode(report)
    if rate is not None:
        slow, fast = (rate.tokens_per_s / f for f in reversed(H100_SLOWDOWN))
        parts.append(f"decode {slow:.0f}-{fast:.0f} tok/s")
    weights = weights_gib(report)
    if weights is not None:
        room = H100_GIB - weights - OVERHEAD_GIB
        parts.append(f"KV room {room:.0f} GiB at TP1" if room > 0 else "weights do not fit at TP1")
    parts.append("startup and prefill about the same")
    return "ESTIMATE: " + "; ".join(parts)
