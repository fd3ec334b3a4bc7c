"""The judgement: from what the runs measured to the check's assertions. No I/O.

1. ``reload_proven``: external prefix-cache hits (and CPU-to-GPU bytes, where exported) grew in the reload
   run and not in the cold runs; where the connector announces its CPU stores, they were seen, and for every
   full-attention group the GPU events show.
2. ``answers_unchanged``: the reload answers match the cold (or warm) answers at least as often as two cold
   runs match each other (the noise floor, measured the same way; assumed perfect when the second cold run
   is turned off).
3. ``accuracy_held``: cold and reload accuracy >= threshold - tolerance, where a threshold is configured.
4. ``kv_events_consistent`` (with a KV-events stream): payloads follow their rules, reference counts never go
   below zero, and the full reset shows on the stream.
5. ``requests_ok``: no run lost more than ``max_failed_rate`` of its requests; otherwise the case is an
   error (its accuracy and answers are not about offloading any more), not a pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from vllm_devclient.errors import InvalidParameterError
from vllm_devclient.metrics import MetricsDelta

from .events import KVEventsSummary
from .gsm8k import GSM8KResult
from .report import AnswerComparison, AssertionResult, Status
from .server import Frontend

__all__ = ["CheckSettings", "compare_answers", "judge", "status_of"]

REQUEST_FAILURES = "requests_ok"


@dataclass(frozen=True)
class CheckSettings:
    """What the judgement (and the sequence) needs to know about the case."""

    accuracy_threshold: float | None = None
    tolerance: float = 0.05
    expect_cpu_store_events: bool = False
    expected_frontend: Frontend | None = None
    warm_run: bool = True
    second_cold_run: bool = True
    max_failed_rate: float = 0.05
    agreement_concurrencies: tuple[int, ...] = ()


def compare_answers(reference: GSM8KResult, other: GSM8KResult) -> AnswerComparison:
    """Exact text match per question index."""
    ref = {q.index: q.text for q in reference.questions}
    oth = {q.index: q.text for q in other.questions}
    common = sorted(set(ref) & set(oth))
    if len(common) != len(ref) or len(common) != len(oth):
        raise InvalidParameterError("the two runs answered different questions: cannot compare them")
    mismatched = [i for i in common if ref[i] != oth[i]]
    total = len(common)
    return AnswerComparison(
        matches=total - len(mismatched),
        total=total,
        rate=(total - len(mismatched)) / total if total else 1.0,
        mismatched=mismatched,
    )


def _grew(value: float | None) -> bool:
    return value is not None and value > 0


def _still(value: float | None) -> bool:
    return value is None or value == 0


def _reload_proven(
    settings: CheckSettings,
    windows: Mapping[str, MetricsDelta],
    cpu_blocks_stored: Mapping[str, int | None],
    events: KVEventsSummary | None,
) -> AssertionResult:
    reload = windows["reload"]
    # Only the cold runs must not load. The warm run may load a block or two: a block-aligned prompt's last
    # block, which the GPU prefix cache leaves to recompute, can come from the CPU tier instead.
    not_loading = [(name, w) for name, w in windows.items() if name in ("cold", "cold2")]
    problems: list[str] = []
    notes: list[str] = []
    if reload.external_prefix_cache_hits is None:
        problems.append(
            "the server exports no vllm:external_prefix_cache_hits, so the reload cannot be proven"
        )
    elif not _grew(reload.external_prefix_cache_hits):
        problems.append("external prefix-cache hits did not grow in the reload run (nothing loaded from CPU)")
    else:
        notes.append(f"external hits +{reload.external_prefix_cache_hits:.0f} tokens")
    for name, window in not_loading:
        if not _still(window.external_prefix_cache_hits):
            problems.append(
                f"external prefix-cache hits grew in the {name} run (+{window.external_prefix_cache_hits})"
            )
    for label, attr in (
        ("CPU->GPU bytes", "cpu_to_gpu_bytes"),
        ("simple-offload load blocks", "simple_load_blocks"),
    ):
        value = getattr(reload, attr)
        if value is None:
            if attr == "cpu_to_gpu_bytes":
                notes.append(f"{label} not exported by this server")
            continue
        if not _grew(value):
            problems.append(f"{label} did not grow in the reload run")
        else:
            notes.append(f"{label} +{value:.0f}")
        for name, window in not_loading:
            if not _still(getattr(window, attr)):
                problems.append(f"{label} grew in the {name} run (+{getattr(window, attr)})")
    if any(w.counter_went_back for w in windows.values()):
        problems.append("a counter went backwards: the server restarted during the check")
    if settings.expect_cpu_store_events:
        stored = cpu_blocks_stored.get("cold")
        if not stored:
            problems.append("no CPU-tier BlockStored events were seen after the cold run")
        else:
            notes.append(f"{stored} CPU blocks stored (KV events)")
        if events is not None:
            if events.missing_cpu_groups:
                problems.append(
                    f"no CPU store for full-attention group(s) {events.missing_cpu_groups} "
                    f"(GPU full-attention groups {events.gpu_full_attention_groups})"
                )
            elif events.gpu_full_attention_groups:
                per_group = events.cpu_blocks_by_group()
                notes.append(
                    "CPU stores cover every full-attention group: "
                    + ", ".join(f"g{g} {per_group.get(g, 0)}" for g in events.gpu_full_attention_groups)
                )
            else:
                notes.append("no GPU event named a full-attention group (kinds unknown to this release?)")
    return AssertionResult(
        name="reload_proven", passed=not problems, message="; ".join(problems or notes) or "ok"
    )


def _answers_unchanged(
    reload_vs_cold: AnswerComparison,
    noise_floor: AnswerComparison,
    reload_vs_warm: AnswerComparison | None,
    floor_measured: bool,
) -> AssertionResult:
    best, reference = reload_vs_cold, "cold"
    if reload_vs_warm is not None and reload_vs_warm.matches > best.matches:
        best, reference = reload_vs_warm, "warm"
    ok = best.matches >= noise_floor.matches
    message = f"reload matched cold on {reload_vs_cold.matches}/{reload_vs_cold.total}"
    if reload_vs_warm is not None:
        message += f", warm on {reload_vs_warm.matches}/{reload_vs_warm.total}"
    origin = "second cold run" if floor_measured else "assumed, second cold run off"
    message += f"; noise floor ({origin}) {noise_floor.matches}/{noise_floor.total}"
    if ok:
        message += f" (reference: {reference} run)"
    else:
        message += f"; reload differs from the {reference} run on questions {best.mismatched[:20]}"
    return AssertionResult(name="answers_unchanged", passed=ok, message=message)


def _accuracy_held(settings: CheckSettings, runs: Mapping[str, GSM8KResult]) -> AssertionResult:
    if settings.accuracy_threshold is None:
        return AssertionResult(
            name="accuracy_held", passed=True, skipped=True, message="no accuracy threshold for this model"
        )
    floor = settings.accuracy_threshold - settings.tolerance
    low = {k: r.accuracy for k, r in runs.items() if k in ("cold", "reload") and r.accuracy < floor}
    accs = ", ".join(f"{k} {runs[k].accuracy:.3f}" for k in ("cold", "reload") if k in runs)
    return AssertionResult(
        name="accuracy_held",
        passed=not low,
        message=f"{accs} vs floor {floor:.3f}" + (f"; below: {sorted(low)}" if low else ""),
    )


def _events_consistent(events: KVEventsSummary, reset_visible: bool | None) -> AssertionResult:
    problems = [*events.payload_problems[:5], *events.refcount_problems[:5]]
    if reset_visible is False:
        problems.append("the full reset left no trace on the stream (no AllBlocksCleared, no BlockRemoved)")
    mode = "self-describing" if events.self_describing else "placeholder"
    repeated = sum(g.repeated_stores for g in events.groups)
    note = (
        f"{mode} CPU payloads as expected; {repeated} repeated store(s) reference-counted; "
        f"{events.cleared} AllBlocksCleared"
    )
    return AssertionResult(
        name="kv_events_consistent", passed=not problems, message="; ".join(problems) or note
    )


def requests_ok(runs: Mapping[str, GSM8KResult], max_failed_rate: float) -> AssertionResult:
    """No run lost more than ``max_failed_rate`` of its requests (upstream counts them as invalid answers)."""
    over = {k: r.failed_requests for k, r in runs.items() if r.failed_rate > max_failed_rate}
    total = sum(r.failed_requests for r in runs.values())
    message = f"{total} failed request(s) in {len(runs)} runs (limit {max_failed_rate:.0%} per run)"
    if over:
        first = next((r.errors[0] for r in runs.values() if r.errors), "")
        message += f"; over the limit: {over}; first error: {first[:300]}"
    return AssertionResult(name=REQUEST_FAILURES, passed=not over, message=message)


def judge(
    settings: CheckSettings,
    *,
    runs: Mapping[str, GSM8KResult],
    windows: Mapping[str, MetricsDelta],
    cpu_blocks_stored: Mapping[str, int | None],
    reload_vs_cold: AnswerComparison,
    noise_floor: AnswerComparison,
    reload_vs_warm: AnswerComparison | None = None,
    frontend_observed: str | None = None,
    events: KVEventsSummary | None = None,
    reset_visible: bool | None = None,
    floor_measured: bool = True,
) -> list[AssertionResult]:
    """Every assertion (plus a setup check of the frontend) from what the runs measured."""
    results = [
        _reload_proven(settings, windows, cpu_blocks_stored, events),
        _answers_unchanged(reload_vs_cold, noise_floor, reload_vs_warm, floor_measured),
        _accuracy_held(settings, runs),
    ]
    if events is not None:
        results.append(_events_consistent(events, reset_visible))
    results.append(requests_ok(runs, settings.max_failed_rate))
    if settings.expected_frontend is not None:
        same = frontend_observed == settings.expected_frontend
        results.append(
            AssertionResult(
                name="frontend",
                passed=same,
                message=f"asked for {settings.expected_frontend}, /version says {frontend_observed}",
            )
        )
    return results


def status_of(assertions: list[AssertionResult]) -> Status:
    """``error`` when too many requests failed (the run says nothing about offloading), else pass/fail."""
    for a in assertions:
        if a.name == REQUEST_FAILURES and not a.passed:
            return "error"
    return "passed" if all(a.passed for a in assertions) else "failed"
