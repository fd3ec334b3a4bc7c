"""The verified reset: reset the prefix cache, then check from what the server publishes that every tier it
was asked to clear no longer serves blocks (sans-IO, run by both clients as the operations are).

A server can say `success: true` and keep serving: vLLM #57727 (a reset reports success while the SimpleCPU
tier keeps serving), #57970 (LMCache never reset), 0.20.2's `reset_external=True` that cleared nothing in
the OffloadingConnector. The evidence is a probe: one greedy 1-token completion of a prompt the caller
knows the cache held before the reset. Its answer's `usage.prompt_tokens_details.cached_tokens` (servers
started with --enable-prompt-tokens-details) is 0 when no tier served any of its tokens: one request
more than the reset. Otherwise the prefix-cache counters of /metrics around a second probe tell the tiers
apart: the GPU prefix cache (`vllm:prefix_cache_hits`) and the connector's tier
(`vllm:external_prefix_cache_hits`) each served none of its tokens, or the tier that did is named in a
`TierNotClearedError`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from . import arguments as check
from .arguments import Timeouts
from .endpoints import Endpoint
from .errors import DevClientError
from .metrics import MetricsDelta, MetricsSnapshot
from .models import Completion, ResetPrefixCacheResult
from .operations import CallContext, ModelCache, Operation, RetryPolicy, Sleep, call, completion
from .routes import endpoint as route

__all__ = [
    "TIER_EXTERNAL",
    "TIER_GPU",
    "ResetNotVerifiedError",
    "TierNotClearedError",
    "VerifiedReset",
    "verified_reset",
]

TIER_GPU = "GPU"  # the prefix cache in GPU memory
TIER_EXTERNAL = "external"  # the KV connector's tier (CPU offload, LMCache, ...): reset_external=True
_COUNTED_POLL = 0.02  # between /metrics reads while the probe is not counted yet


class ResetNotVerifiedError(DevClientError):
    """The reset could not be shown to have cleared what it was asked to: the server said it did not
    (`success` false or unknown), or it publishes nothing that tells (`.tier` names the tier, when one)."""

    def __init__(
        self, message: str, *, tier: str | None = None, reset: ResetPrefixCacheResult | None = None
    ) -> None:
        super().__init__(message)
        self.tier = tier
        self.reset = reset


class TierNotClearedError(ResetNotVerifiedError):
    """The server said the reset succeeded, and a tier it was asked to clear still served the probe:
    `.tier` ("GPU" or "external"), `.hits` (the probe's tokens it served), `.delta` (the counters)."""

    def __init__(
        self, message: str, *, tier: str, hits: float, delta: MetricsDelta, reset: ResetPrefixCacheResult
    ) -> None:
        super().__init__(message, tier=tier, reset=reset)
        self.hits = hits
        self.delta = delta


class VerifiedReset(BaseModel):
    """A reset the server said succeeded and the probe confirmed: the tiers checked, and what showed it:
    the probe's answer (`cached_tokens` 0: no tier served any of its tokens) or the /metrics counters
    around a second probe (`delta`: per tier, when the answer did not say, or some tier served)."""

    model_config = ConfigDict(frozen=True)

    reset: ResetPrefixCacheResult
    tiers: tuple[str, ...]
    evidence: Literal["probe answer", "metrics"]
    cached_tokens: int | None  # the first probe's usage.prompt_tokens_details.cached_tokens, when reported
    delta: MetricsDelta | None = None


def verified_reset(
    cache: ModelCache,
    probe: str | Sequence[int],
    *,
    reset_external: bool,
    reset_running_requests: bool,
    deadline: float,
    timeouts: Timeouts,
    retry: RetryPolicy,
    ctx: CallContext,
) -> Operation[VerifiedReset]:
    """Reset, then the probe. When its answer says no token came from a cache (servers started with
    --enable-prompt-tokens-details), that is the proof: one request more than the reset. Otherwise the
    tiers are told apart by /metrics around a second probe after a second reset (the first probe filled the
    GPU tier again). Raises ResetNotVerifiedError or TierNotClearedError naming the tier."""
    check.seconds(deadline, "deadline")
    check.prompt(probe, "probe")
    ep: Endpoint[ResetPrefixCacheResult] = route(
        "reset_prefix_cache", reset_running_requests=reset_running_requests, reset_external=reset_external
    )
    tiers = (TIER_GPU, TIER_EXTERNAL) if reset_external else (TIER_GPU,)
    reset = yield from _reset(ep, timeouts=timeouts, retry=retry, ctx=ctx)
    answer = yield from _probe(cache, probe, timeouts=timeouts, retry=retry, ctx=ctx)
    details = answer.usage.prompt_tokens_details if answer.usage is not None else None
    cached = details.cached_tokens if details is not None else None
    if cached == 0:
        return VerifiedReset(reset=reset, tiers=tiers, evidence="probe answer", cached_tokens=0)
    reset = yield from _reset(ep, timeouts=timeouts, retry=retry, ctx=ctx)
    before: MetricsSnapshot = yield from call(route("metrics"), timeouts=timeouts, retry=retry, ctx=ctx)
    yield from _probe(cache, probe, timeouts=timeouts, retry=retry, ctx=ctx)
    delta = yield from _counted(before, reset, deadline=deadline, timeouts=timeouts, retry=retry, ctx=ctx)
    hits = {TIER_GPU: delta.prefix_cache_hits, TIER_EXTERNAL: delta.external_prefix_cache_hits}
    for tier in tiers:
        served = hits[tier]
        if served is None:
            metric = "vllm:external_prefix_cache_hits" if tier == TIER_EXTERNAL else "vllm:prefix_cache_hits"
            raise ResetNotVerifiedError(
                f"the server exports no {metric} on /metrics: the {tier} tier cannot be checked",
                tier=tier, reset=reset,
            )  # fmt: skip
        if tier == TIER_EXTERNAL and not delta.external_prefix_cache_queries:
            # Zero hits prove nothing where the connector was never asked (none configured, or none counted).
            raise ResetNotVerifiedError(
                "the connector looked up none of the probe's tokens (vllm:external_prefix_cache_queries "
                "unchanged): the external tier cannot be checked; is a KV connector configured?",
                tier=tier, reset=reset,
            )  # fmt: skip
        if served > 0:
            raise TierNotClearedError(
                f"reset_prefix_cache said success, but the {tier} tier still serves blocks: it served "
                f"{served:.0f} of the probe's {delta.prefix_cache_queries:.0f} prompt tokens after the reset",
                tier=tier, hits=served, delta=delta, reset=reset,
            )  # fmt: skip
    return VerifiedReset(reset=reset, tiers=tiers, evidence="metrics", cached_tokens=cached, delta=delta)


def _reset(
    ep: Endpoint[ResetPrefixCacheResult], *, timeouts: Timeouts, retry: RetryPolicy, ctx: CallContext
) -> Operation[ResetPrefixCacheResult]:
    reset: ResetPrefixCacheResult = yield from call(ep, timeouts=timeouts, retry=retry, ctx=ctx)
    if reset.success is not True:
        said = "a bare 200 (no success field)" if reset.success is None else "success=false"
        raise ResetNotVerifiedError(
            f"reset_prefix_cache answered {said}: nothing to verify (a refused reset is retried by "
            "reset_prefix_cache_until_success)",
            reset=reset,
        )
    return reset


def _probe(
    cache: ModelCache, probe: str | Sequence[int], *, timeouts: Timeouts, retry: RetryPolicy, ctx: CallContext
) -> Operation[Completion]:
    answer = yield from completion(
        cache, probe, model=None, max_tokens=1, temperature=0, seed=None, stop=None,
        timeouts=timeouts, retry=retry, ctx=ctx,
    )  # fmt: skip
    return answer


def _counted(
    before: MetricsSnapshot,
    reset: ResetPrefixCacheResult,
    *,
    deadline: float,
    timeouts: Timeouts,
    retry: RetryPolicy,
    ctx: CallContext,
) -> Operation[MetricsDelta]:
    """/metrics read until its counters include the probe (the engine's stats may follow the answer)."""
    end = time.monotonic() + deadline
    while True:
        after: MetricsSnapshot = yield from call(route("metrics"), timeouts=timeouts, retry=retry, ctx=ctx)
        delta = after.delta(before)
        if delta.prefix_cache_queries is None:
            raise ResetNotVerifiedError(
                "the server exports no vllm:prefix_cache_queries on /metrics: the probe cannot be read",
                tier=TIER_GPU, reset=reset,
            )  # fmt: skip
        if delta.prefix_cache_queries > 0:
            return delta
        if time.monotonic() + _COUNTED_POLL >= end:
            raise ResetNotVerifiedError(
                f"/metrics did not count the probe within {deadline:.1f}s (prefix_cache_queries unchanged)",
                tier=TIER_GPU, reset=reset,
            )  # fmt: skip
        yield Sleep(_COUNTED_POLL)
