"""The verified reset: reset the prefix cache, then prove from what the server says that every tier it was
asked to clear no longer serves blocks (sans-IO, run by both clients as the operations are).

A server can say `success: true` and keep serving: vLLM #57727 (a reset reports success while the SimpleCPU
tier keeps serving), #57970 (LMCache never reset), 0.20.2's `reset_external=True` that cleared nothing in
the OffloadingConnector. The evidence is a probe, a greedy 1-token completion sent with a `cache_salt` of
the check's own: vLLM keys prefix-cache blocks by the salt too, so no other request shares the probe's
blocks and other clients' traffic neither fills nor empties them.

1. The reset the caller asked for; a `success: false` (blocks held by running requests or by offload
   stores still in flight, vLLM #39725, #37335) is retried as `reset_prefix_cache_until_success` does,
   stepping the engine, until the deadline.
2. The probe is shown to be cached: sent twice, the second answer's
   `usage.prompt_tokens_details.cached_tokens` (servers started with --enable-prompt-tokens-details), else
   the /metrics prefix-cache hits around it, must be > 0. Otherwise nothing could be proven (a probe shorter
   than one block, prefix caching off): `ResetNotVerifiableError`, never a pass.
3. A reset again (the probe's stores may still be in flight: retried as in 1), then the probe: an answer
   with 0 cached tokens is the proof.
4. Otherwise the /metrics counters around a further reset and probe tell the tiers apart: the GPU prefix
   cache (`vllm:prefix_cache_hits`) and the connector's tier (`vllm:external_prefix_cache_hits`) each
   served none of its tokens, or the tier that did is named in a `TierNotClearedError`.

/metrics counts every request, so step 4 (and step 2 without cached_tokens) needs a window in which only
the probe was counted (`vllm:prefix_cache_queries` grew by exactly its prompt tokens); it is measured
again until the deadline, then the check says "not verifiable" (reason "other traffic"), never blaming a
tier for another client's hits. Steps 1 to 3 need no quiet server.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from . import arguments as check
from . import polling
from .arguments import Timeouts
from .constants import (
    DEFAULT_BARRIER_POLL_INTERVAL,
    DEFAULT_BARRIER_REQUEST_TIMEOUT,
    DEFAULT_POLL_MAX_INTERVAL,
)
from .endpoints import Endpoint
from .errors import BarrierTimeoutError, BarrierUnsupportedError, DevClientError
from .metrics import MetricsDelta, MetricsSnapshot
from .models import Completion, ResetPrefixCacheResult
from .operations import CallContext, ModelCache, Operation, RetryPolicy, Sleep, call, completion
from .routes import endpoint as route

__all__ = [
    "TIER_EXTERNAL",
    "TIER_GPU",
    "ResetNotVerifiableError",
    "ResetNotVerifiedError",
    "TierNotClearedError",
    "VerifiedReset",
    "verified_reset",
]

TIER_GPU = "GPU"  # the prefix cache in GPU memory
TIER_EXTERNAL = "external"  # the KV connector's tier (CPU offload, LMCache, ...): reset_external=True
SALT_PREFIX = "vllm-devclient-verify-"  # the probe's cache_salt: this, then random hex (one per check)
_COUNTED_POLL = 0.02  # between /metrics reads while the probe is not counted yet
_WINDOW_PAUSE = 0.05  # before measuring again after other requests were counted in a window

_BARE = "reset_prefix_cache answered a bare 200 (no success field): nothing to verify; upgrade vLLM (>= 0.26)"
Reason = Literal["probe not cached", "other traffic", "no counters"]


class ResetNotVerifiedError(DevClientError):
    """The reset could not be shown to have cleared what it was asked to: the server said it did not
    (`success` false until the deadline, or unknown), or the check cannot tell (`.tier` names the tier,
    when one)."""

    def __init__(
        self, message: str, *, tier: str | None = None, reset: ResetPrefixCacheResult | None = None
    ) -> None:
        super().__init__(message)
        self.tier = tier
        self.reset = reset


class ResetNotVerifiableError(ResetNotVerifiedError):
    """ "Not verifiable": the server said the reset succeeded, and nothing proves it either way. `.reason`:
    "probe not cached" (the probe was not served from the cache even before the reset: shorter than one
    block, or prefix caching off; use a longer probe), "other traffic" (other requests were counted in
    every /metrics window until the deadline), "no counters" (/metrics does not publish what tells)."""

    def __init__(
        self,
        message: str,
        *,
        reason: Reason,
        tier: str | None = None,
        reset: ResetPrefixCacheResult | None = None,
    ) -> None:
        super().__init__(message, tier=tier, reset=reset)
        self.reason = reason


class TierNotClearedError(ResetNotVerifiedError):
    """The server said the reset succeeded, and a tier it was asked to clear still served the probe:
    `.tier` ("GPU" or "external"; None when all tiers were asked and other requests kept /metrics from
    naming the one), `.hits` (the probe's tokens it served), `.delta` (the counters, when read)."""

    def __init__(
        self,
        message: str,
        *,
        tier: str | None,
        hits: float,
        delta: MetricsDelta | None,
        reset: ResetPrefixCacheResult,
    ) -> None:
        super().__init__(message, tier=tier, reset=reset)
        self.hits = hits
        self.delta = delta


class VerifiedReset(BaseModel):
    """A reset the server said succeeded and the probe confirmed: the tiers checked, what showed the probe
    cached before (`cached_before`: its tokens served from a cache), and what showed it cleared after: the
    probe's answer (`cached_tokens` 0) or the /metrics counters around a further probe (`delta`).
    `refusals`: resets answered success=false and retried; `cache_salt`: the probe's salt."""

    model_config = ConfigDict(frozen=True)

    reset: ResetPrefixCacheResult
    tiers: tuple[str, ...]
    evidence: Literal["probe answer", "metrics"]
    cached_tokens: int | None  # the probe's usage.prompt_tokens_details.cached_tokens after the reset
    delta: MetricsDelta | None = None
    cached_before: float = 0
    refusals: int = 0
    cache_salt: str = ""


class _Busy(Exception):
    """Other requests were counted in every /metrics window until the deadline (internal)."""

    def __init__(self, reset: ResetPrefixCacheResult | None) -> None:
        super().__init__()
        self.reset = reset


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
    salt: str | None = None,
) -> Operation[VerifiedReset]:
    """The check of the module's docstring. `deadline`: seconds for the whole check's waits (0: one try
    of each reset; the client's total_timeout, carried by `retry`, ends them sooner when shorter). Raises
    ResetNotVerifiedError, ResetNotVerifiableError or TierNotClearedError."""
    deadline = check.seconds(deadline, "deadline", allow_zero=True)
    check.prompt(probe, "probe")
    salt = salt if salt is not None else SALT_PREFIX + secrets.token_hex(8)
    ep: Endpoint[ResetPrefixCacheResult] = route(
        "reset_prefix_cache", reset_running_requests=reset_running_requests, reset_external=reset_external
    )
    end = time.monotonic() + deadline
    if retry.bound is not None:  # the client's total_timeout bounds the check as a whole too
        end = min(end, retry.bound.end)
    run = _Check(cache, probe, salt, ep, end, timeouts, retry, ctx, reset_external, reset_running_requests)
    reset = yield from run.reset()
    before = yield from run.shown_cached(reset)
    reset = yield from run.reset()
    answer = yield from run.probe()
    cached = _cached_tokens(answer)
    if cached == 0:
        return run.done(reset, "probe answer", cached, None, before)
    return (yield from run.by_metrics(cached, before))


@dataclass
class _Check:
    cache: ModelCache
    probe_prompt: str | Sequence[int]
    salt: str
    ep: Endpoint[ResetPrefixCacheResult]
    end: float
    timeouts: Timeouts
    retry: RetryPolicy
    ctx: CallContext
    reset_external: bool
    reset_running_requests: bool
    refusals: int = 0

    @property
    def tiers(self) -> tuple[str, ...]:
        return (TIER_GPU, TIER_EXTERNAL) if self.reset_external else (TIER_GPU,)

    def done(
        self,
        reset: ResetPrefixCacheResult,
        evidence: Literal["probe answer", "metrics"],
        cached: int | None,
        delta: MetricsDelta | None,
        before: float,
    ) -> VerifiedReset:
        return VerifiedReset(
            reset=reset, tiers=self.tiers, evidence=evidence, cached_tokens=cached, delta=delta,
            cached_before=before, refusals=self.refusals, cache_salt=self.salt,
        )  # fmt: skip

    def reset(self) -> Operation[ResetPrefixCacheResult]:
        """A reset; a success=false is retried as the barrier does (stepping the engine) until the end,
        and tried once when no time is left."""
        left = self.end - time.monotonic()
        if left > 0:
            return (yield from self._until_success(left))
        once: ResetPrefixCacheResult = yield from call(
            self.ep, timeouts=self.timeouts, retry=self.retry, ctx=self.ctx
        )
        if once.success is None:
            raise ResetNotVerifiedError(_BARE, reset=once)
        if not once.success:
            self.refusals += 1
            raise ResetNotVerifiedError(
                "reset_prefix_cache answered success=false and the check's deadline has passed: blocks are "
                "still held (running requests or offload stores in flight); raise the deadline",
                reset=once,
            )
        return once

    def _until_success(self, left: float) -> Operation[ResetPrefixCacheResult]:
        answers: list[ResetPrefixCacheResult] = []

        def seen(_: int, answer: object) -> None:
            if isinstance(answer, ResetPrefixCacheResult):
                answers.append(answer)
                self.refusals += answer.success is False

        try:
            plan = polling.Plan(
                deadline=left,
                request_timeout=self.timeouts.total or DEFAULT_BARRIER_REQUEST_TIMEOUT,
                poll=polling.Backoff(DEFAULT_BARRIER_POLL_INTERVAL, DEFAULT_POLL_MAX_INTERVAL),
            )
            yield from polling.reset_prefix_cache_until_success(
                self.cache, plan=plan, reset_external=self.reset_external,
                reset_running_requests=self.reset_running_requests, step=True, ctx=self.ctx,
                on_attempt=seen,
            )  # fmt: skip
        except BarrierTimeoutError as exc:
            if not exc.refused:
                raise
            raise ResetNotVerifiedError(
                f"reset_prefix_cache kept answering success=false until the check's deadline: {exc}",
                reset=answers[-1] if answers else None,
            ) from exc
        except BarrierUnsupportedError:
            raise ResetNotVerifiedError(_BARE, reset=answers[-1] if answers else None) from None
        return answers[-1]

    def probe(self) -> Operation[Completion]:
        answer = yield from completion(
            self.cache, self.probe_prompt, model=None, max_tokens=1, temperature=0, seed=None, stop=None,
            timeouts=self.timeouts, retry=self.retry, ctx=self.ctx, cache_salt=self.salt,
        )  # fmt: skip
        return answer

    def shown_cached(self, reset: ResetPrefixCacheResult) -> Operation[float]:
        """The probe sent until it is seen served from the cache: the tokens served (> 0)."""
        first = yield from self.probe()  # fills the tiers under the check's salt
        if _cached_tokens(first) is not None:
            served: float = _cached_tokens((yield from self.probe())) or 0
        else:
            try:
                _, _, delta = yield from self.window(reset=False)
            except _Busy:
                raise self.busy("whether the cache held the probe", reset) from None
            served = (delta.prefix_cache_hits or 0) + (delta.external_prefix_cache_hits or 0)
        if served <= 0:
            raise ResetNotVerifiableError(
                "not verifiable: the probe was not served from the cache even before the reset (sent twice "
                "with the check's own cache_salt), so a reset that cleared nothing would look the same. Is "
                "the probe shorter than one KV-cache block, or prefix caching off? Use a longer probe",
                reason="probe not cached", reset=reset,
            )  # fmt: skip
        return served

    def busy(self, what: str, reset: ResetPrefixCacheResult | None) -> ResetNotVerifiableError:
        return ResetNotVerifiableError(
            f"not verifiable: other requests were counted on /metrics in every window until the check's "
            f"deadline, so the counters cannot tell {what}; run the check when the server is idle, raise the "
            "deadline, or start the server with --enable-prompt-tokens-details (the probe's own answer then "
            "tells, whatever else runs)",
            reason="other traffic", reset=reset,
        )  # fmt: skip

    def window(
        self, *, reset: bool
    ) -> Operation[tuple[ResetPrefixCacheResult | None, Completion, MetricsDelta]]:
        """(A reset,) /metrics, the probe, /metrics until it is counted: repeated while other requests were
        counted in it too (prefix_cache_queries grew by more than the probe's prompt tokens)."""
        while True:
            done = (yield from self.reset()) if reset else None
            before: MetricsSnapshot = yield from self._metrics()
            answer = yield from self.probe()
            tokens = answer.usage.prompt_tokens if answer.usage is not None else None
            delta = yield from self._counted(before, tokens, done)
            if tokens is None or delta.prefix_cache_queries == tokens:
                return done, answer, delta
            if time.monotonic() + _WINDOW_PAUSE >= self.end:
                raise _Busy(done)
            yield Sleep(_WINDOW_PAUSE)

    def by_metrics(self, cached: int | None, before: float) -> Operation[VerifiedReset]:
        """The tiers told apart by the counters around a further reset and probe."""
        try:
            reset, _, delta = yield from self.window(reset=True)
        except _Busy as busy:
            if self.reset_external and cached and busy.reset is not None:
                raise TierNotClearedError(
                    f"reset_prefix_cache said success, but the probe (its own cache_salt: no other request "
                    f"shares its blocks) had {cached} cached tokens after it, so a tier asked to clear still "
                    "serves blocks; other requests kept /metrics from naming it",
                    tier=None, hits=cached, delta=None, reset=busy.reset,
                ) from None  # fmt: skip
            raise self.busy("which tier served the probe", busy.reset) from None
        assert reset is not None
        for tier in self.tiers:
            _judge(tier, delta, reset)
        return self.done(reset, "metrics", cached, delta, before)

    def _metrics(self) -> Operation[MetricsSnapshot]:
        snap: MetricsSnapshot = yield from call(
            route("metrics"), timeouts=self.timeouts, retry=self.retry, ctx=self.ctx
        )
        return snap

    def _counted(
        self, before: MetricsSnapshot, tokens: int | None, reset: ResetPrefixCacheResult | None
    ) -> Operation[MetricsDelta]:
        """/metrics read until its counters include the probe (the engine's stats may follow the answer)."""
        while True:
            delta = (yield from self._metrics()).delta(before)
            if delta.prefix_cache_queries is None:
                raise ResetNotVerifiableError(
                    "not verifiable: the server exports no vllm:prefix_cache_queries on /metrics and its "
                    "answers no cached_tokens (start it with --enable-prompt-tokens-details)",
                    reason="no counters", tier=TIER_GPU, reset=reset,
                )  # fmt: skip
            if delta.prefix_cache_queries >= (tokens or 1):
                return delta
            if time.monotonic() + _COUNTED_POLL >= self.end:
                raise ResetNotVerifiedError(
                    "/metrics did not count the probe within the check's deadline (prefix_cache_queries "
                    "unchanged)",
                    tier=TIER_GPU, reset=reset,
                )  # fmt: skip
            yield Sleep(_COUNTED_POLL)


def _cached_tokens(answer: Completion) -> int | None:
    details = answer.usage.prompt_tokens_details if answer.usage is not None else None
    return details.cached_tokens if details is not None else None


def _judge(tier: str, delta: MetricsDelta, reset: ResetPrefixCacheResult) -> None:
    """Raises unless the counters show `tier` served none of the probe's tokens."""
    served = delta.external_prefix_cache_hits if tier == TIER_EXTERNAL else delta.prefix_cache_hits
    if served is None:
        metric = "vllm:external_prefix_cache_hits" if tier == TIER_EXTERNAL else "vllm:prefix_cache_hits"
        raise ResetNotVerifiableError(
            f"not verifiable: the server exports no {metric} on /metrics: the {tier} tier cannot be checked",
            reason="no counters", tier=tier, reset=reset,
        )  # fmt: skip
    if tier == TIER_EXTERNAL and not delta.external_prefix_cache_queries:
        # Zero hits prove nothing where the connector was never asked (none configured, or none counted).
        raise ResetNotVerifiableError(
            "not verifiable: the connector looked up none of the probe's tokens "
            "(vllm:external_prefix_cache_queries unchanged): the external tier cannot be checked; is a KV "
            "connector configured?",
            reason="no counters", tier=tier, reset=reset,
        )  # fmt: skip
    if served > 0:
        raise TierNotClearedError(
            f"reset_prefix_cache said success, but the {tier} tier still serves blocks: it served "
            f"{served:.0f} of the probe's {delta.prefix_cache_queries:.0f} prompt tokens after the reset",
            tier=tier, hits=served, delta=delta, reset=reset,
        )  # fmt: skip
