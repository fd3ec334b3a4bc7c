"""What one case of the offload check measured, as JSON-ready models, and the one-screen summary.

A report is written even when a case errors half-way: the runs and windows measured until then are kept,
``status`` is ``"error"`` and ``error`` says what went wrong. ``status`` is ``"passed"`` only when every
assertion held and no run lost more than the allowed share of its requests.
"""

from __future__ import annotations

import datetime as _dt
import socket
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from vllm_devclient.metrics import MetricsDelta
from vllm_devclient.models import BarrierResult

from .events import KVEventsSummary
from .gsm8k import GSM8KResult

__all__ = [
    "AgreementRow",
    "AnswerComparison",
    "AssertionResult",
    "Mismatch",
    "OffloadCheckReport",
    "RunSummary",
    "SettleResult",
    "Status",
]

Status = Literal["passed", "failed", "error"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class RunSummary(_Frozen):
    """One GSM8K run, without the per-question texts (they stay in the GSM8KResult)."""

    accuracy: float
    invalid_rate: float
    num_questions: int
    concurrency: int | None
    latency_s: float
    questions_per_s: float
    output_tokens: int
    output_tokens_per_s: float
    mean_request_latency_s: float
    failed_requests: int = 0
    retried_requests: int = 0
    errors: list[str] = Field(default_factory=list)
    predictions: list[int | None]

    @classmethod
    def of(cls, result: GSM8KResult) -> RunSummary:
        return cls(
            accuracy=result.accuracy,
            invalid_rate=result.invalid_rate,
            num_questions=result.num_questions,
            concurrency=result.concurrency,
            latency_s=result.latency_s,
            questions_per_s=result.questions_per_s,
            output_tokens=result.output_tokens,
            output_tokens_per_s=result.output_tokens_per_s,
            mean_request_latency_s=result.mean_request_latency_s,
            failed_requests=result.failed_requests,
            retried_requests=result.retried_requests,
            errors=result.errors[:5],
            predictions=[q.prediction for q in result.questions],
        )


class SettleResult(_Frozen):
    """How the wait for CPU-tier stores ended."""

    method: Literal["kv_events", "metrics", "steps"]
    seconds: float
    engine_steps: int
    start_value: float | None = None
    end_value: float | None = None
    timed_out: bool = False


class AnswerComparison(_Frozen):
    matches: int
    total: int
    rate: float
    mismatched: list[int]


class AssertionResult(_Frozen):
    name: str
    passed: bool
    message: str
    skipped: bool = False


class Mismatch(_Frozen):
    index: int
    cold: str
    other: str


class AgreementRow(_Frozen):
    """Greedy answers of two cold runs at one concurrency (and against the concurrency-1 reference)."""

    concurrency: int
    cold_vs_cold: AnswerComparison
    vs_sequential: AnswerComparison | None = None
    latency_s: float


class OffloadCheckReport(_Frozen):
    """Everything one case measured; written as JSON next to the results."""

    case_id: str
    profile: str
    model: str
    family: str = ""
    architectures: list[str] = Field(default_factory=list)
    connector: str
    frontend: str
    connector_extra: dict[str, Any] = Field(default_factory=dict)
    gpus: int | None = None  # visible to the case
    gpus_used: int | None = None  # the server's tensor-parallel size
    gpu_name: str | None = None
    server_args: list[str] = Field(default_factory=list)
    server_env: dict[str, str] = Field(default_factory=dict)
    num_questions: int
    num_shots: int | None = None
    max_tokens: int | None = None
    concurrency: int | None
    accuracy_threshold: float | None
    tolerance: float
    max_failed_rate: float = 0.05
    vllm_version: str | None = None
    rust_frontend_version: str | None = None
    frontend_observed: str | None = None
    kv_events: bool = False
    runs: dict[str, RunSummary] = Field(default_factory=dict)
    windows: dict[str, MetricsDelta] = Field(default_factory=dict)
    cpu_blocks_stored: dict[str, int | None] = Field(default_factory=dict)
    events: KVEventsSummary | None = None
    reset_visible: bool | None = None
    settle: dict[str, SettleResult] = Field(default_factory=dict)
    barriers: dict[str, BarrierResult] = Field(default_factory=dict)
    reload_vs_cold: AnswerComparison | None = None
    reload_vs_warm: AnswerComparison | None = None
    warm_vs_cold: AnswerComparison | None = None
    noise_floor: AnswerComparison | None = None
    noise_floor_measured: bool = True
    mismatch_examples: list[Mismatch] = Field(default_factory=list)
    agreement: list[AgreementRow] = Field(default_factory=list)
    assertions: list[AssertionResult] = Field(default_factory=list)
    status: Status = "error"
    passed: bool = False
    error: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    phase_shares: dict[str, float] = Field(default_factory=dict)
    created_at: str = Field(default_factory=_now)
    host: str = Field(default_factory=socket.gethostname)
    extra: dict[str, Any] = Field(default_factory=dict)

    def assertion(self, name: str) -> AssertionResult:
        for item in self.assertions:
            if item.name == name:
                return item
        raise KeyError(name)

    def failures(self) -> list[AssertionResult]:
        return [a for a in self.assertions if not a.passed]

    def summary(self) -> str:
        head = (
            f"{self.case_id}: {self.status.upper()} (vllm {self.vllm_version}, "
            f"frontend {self.frontend_observed}, "
            f"{self.family} {'/'.join(self.architectures)}, {self.gpus} GPU, concurrency {self.concurrency})"
        )
        lines = [head]
        if self.error:
            lines.append(f"  error: {self.error[:500]}")
        reload = self.windows.get("reload")
        if reload is not None:
            lines.append(
                f"  reload: external hits +{_fmt(reload.external_prefix_cache_hits)} tokens, CPU->GPU "
                f"+{_fmt(reload.cpu_to_gpu_bytes)} bytes, "
                f"CPU blocks stored (cold) {self.cpu_blocks_stored.get('cold')}"
            )
        if self.events is not None:
            groups = ", ".join(
                f"{g.medium}/g{g.group_idx}({g.kind or '?'}) +{g.stored_blocks}" for g in self.events.groups
            )
            lines.append(f"  events per group: {groups}; cleared {self.events.cleared}")
        if self.reload_vs_cold is not None and self.noise_floor is not None:
            warm = self.reload_vs_warm
            lines.append(
                f"  answers: reload matches cold {self.reload_vs_cold.matches}/{self.reload_vs_cold.total}"
                + (f", warm {warm.matches}/{warm.total}" if warm is not None else "")
                + f"; noise floor {self.noise_floor.matches}/{self.noise_floor.total}"
                + ("" if self.noise_floor_measured else " (assumed: second cold run off)")
            )
        if self.runs:
            failed = sum(r.failed_requests for r in self.runs.values())
            lines.append(
                "  accuracy: "
                + ", ".join(f"{k} {v.accuracy:.3f}" for k, v in self.runs.items())
                + f" (threshold {self.accuracy_threshold}); failed requests {failed}"
            )
        for row in self.agreement:
            seq = row.vs_sequential
            lines.append(
                f"  agreement at concurrency {row.concurrency}: cold vs cold {row.cold_vs_cold.matches}/"
                f"{row.cold_vs_cold.total}" + (f", vs concurrency 1 {seq.matches}/{seq.total}" if seq else "")
            )
        lines += [f"  [{'ok' if a.passed else 'FAIL'}] {a.name}: {a.message}" for a in self.assertions]
        if self.timings:
            lines.append("  timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"
