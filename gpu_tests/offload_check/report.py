"""What one case of the offload check measured and concluded, as JSON-ready models, and its summary.

A report keeps the raw measurements (every probe's answer and split, the metric windows, every first use of
a cached prefix with its block verdicts, the load plans) beside the verdicts, so
:func:`gpu_tests.offload_check.judge.rejudge` can recompute every verdict from a committed report
without a GPU. Answer texts are stored once per report (``texts``, by digest) and referenced from the runs.

``status`` is ``"passed"`` only when every evaluated assertion of every clean iteration held, no run lost
more than the allowed share of its requests, and the blocks the connector loaded were checked against what
the model computed (``kv_bytes_identical``); without that byte verdict it is ``"not_proven"``. An assertion
that could not be evaluated says so (``evaluated: false``) and never counts as a pass or a failure.
``judge_commit`` names the judge that gave the verdicts, fixed before the run.
"""

from __future__ import annotations

import datetime as _dt
import socket
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vllm_devclient.metrics import MetricsDelta

from .events import KVEventsSummary
from .probe_files import FirstUse, GroupLayout, LedgerSnapshot, LoadPlan, Split

__all__ = [
    "Answer",
    "AssertionResult",
    "Comparison",
    "CpuTier",
    "Defect",
    "Iteration",
    "MutationVerdict",
    "OffloadCheckReport",
    "ProbeInfo",
    "ResetResult",
    "Run",
    "SettleResult",
    "Split",
    "Status",
]

# "not_proven": every assertion held, yet no block the connector loaded was checked against a computation
Status = Literal["passed", "not_proven", "failed", "error"]
Verdict = Literal["agree", "differ", "not_comparable", "nondeterministic", "no_answer", "not_loaded"]


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class ProbeInfo(_Frozen):
    """A prompt of the case (its ids are not kept: ``key`` is their hash, ``length`` their count)."""

    id: str
    kind: str
    question: int
    length: int
    key: str
    max_tokens: int
    label: int | None = None
    boundary: int | None = None
    base: str | None = None
    shape: str | None = None
    state_at: int | None = None


class Answer(_Frozen):
    probe: str
    text: str | None  # digest into OffloadCheckReport.texts; None when the request failed
    output_tokens: int = 0
    finish_reason: str | None = None
    prediction: int | None = None
    error: str | None = None
    split: Split | None = None  # from the recording scheduler
    usage_cached: int | None = None  # usage.prompt_tokens_details.cached_tokens, where reported
    request_id: str | None = None


class Run(_Frozen):
    label: str
    concurrency: int | None
    latency_s: float
    answers: list[Answer]
    accuracy: float | None = None  # over the GSM8K questions only
    failed_requests: int = 0

    def by_probe(self) -> dict[str, Answer]:
        return {a.probe: a for a in self.answers}

    def splits(self) -> dict[str, Split]:
        """Probe id -> its recorded split, for the answers that have one."""
        return {a.probe: a.split for a in self.answers if a.split is not None}


class SettleResult(_Frozen):
    """How the wait for CPU-tier stores ended."""

    method: Literal["kv_events", "metrics", "steps"]
    seconds: float
    engine_steps: int
    start_value: float | None = None
    end_value: float | None = None
    timed_out: bool = False


class ResetResult(_Frozen):
    """One reset of the sequence and what confirmed it (``resets.py``): the server's ``success`` answer, or,
    where a release answers a bare 200, the stream's ``AllBlocksCleared``. ``refused``: the server answered an
    error of its own (``http_status``, its ``message``); ``unconfirmed``: nothing confirmed it (``message``
    says why). Nothing is confirmed by default: ``outcome`` and ``confirmed_by`` are always given, except in a
    report written before them, which kept the SDK barrier's result (it only ever returned on ``success``)
    and reads so."""

    attempts: int
    engine_steps: int
    elapsed_s: float
    outcome: Literal["confirmed", "unconfirmed", "refused"]
    confirmed_by: Literal["success", "AllBlocksCleared"] | None
    external: bool | None = None  # reset_external: the connector's tier too
    http_status: int | None = None
    message: str = ""

    @model_validator(mode="before")
    @classmethod
    def _sdk_barrier_result(cls, data: Any) -> Any:
        if isinstance(data, dict) and "outcome" not in data and "confirmed_by" not in data:
            return {**data, "outcome": "confirmed", "confirmed_by": "success"}
        return data

    @property
    def confirmed(self) -> bool:
        return self.outcome == "confirmed"


class CpuTier(_Frozen):
    """The CPU tier as its KV events showed it from the cold run to the reload. The full reset before the cold
    run empties it, so a remove counted here is an eviction, unless the reset's own removes came late:
    ``held_at_cold`` (entries still held when the cold run started, 0 after a seen reset) bounds those.
    Counts are what the events count: blocks, or chunks where the connector announces one hash per chunk."""

    stored: int
    evicted: int
    live: int  # distinct entries held when the reload starts: the tier's occupancy
    held_at_cold: int = 0


class AssertionResult(_Frozen):
    name: str
    passed: bool
    message: str
    evaluated: bool = True

    @property
    def outcome(self) -> str:
        return ("passed" if self.passed else "failed") if self.evaluated else "not evaluated"


class Comparison(_Frozen):
    """One probe's reload answer against its like-for-like reference."""

    probe: str
    verdict: Verdict
    reference: str | None = None  # the run compared with
    reason: str = ""
    reload_split: Split | None = None
    reference_split: Split | None = None
    shape: str | None = None  # the failure shape whose fingerprint the reload answer matches
    restored_ahead: int | None = None  # tokens a recurrent state stood past the cached count


class MutationVerdict(_Frozen):
    name: str
    applied: int
    expected: list[str]  # assertions the catalogue says must catch it
    failed: list[str]  # assertions that did fail
    caught: bool
    message: str = ""


class Iteration(_Frozen):
    """One pass of the sequence: full reset, cold, warm, settle, GPU-only reset, reload (mutated or not), and
    where needed full reset, second cold and fingerprint runs."""

    label: str
    mutation: str | None = None
    mutation_group: int | None = None
    runs: dict[str, Run] = Field(default_factory=dict)
    windows: dict[str, MetricsDelta] = Field(default_factory=dict)
    settle: SettleResult | None = None
    barriers: dict[str, ResetResult] = Field(default_factory=dict)
    load_resets: list[ResetResult] = Field(default_factory=list)  # fired under load, as answered (not judged)
    cpu_blocks_stored: int | None = None
    cpu_tier: CpuTier | None = None  # None: the connector sends no CPU-tier events
    ledger: LedgerSnapshot | None = None  # the byte ledger of runs before the reference digests (read only)
    first_use: list[FirstUse] = Field(default_factory=list)  # every first use of a cached prefix, all runs
    poisoned_blocks: int | None = None  # GPU blocks poisoned before the reload (None: not poisoned)
    loads: list[LoadPlan] = Field(default_factory=list)  # the reload run's load plans
    instruments_applied: dict[str, int] = Field(default_factory=dict)
    comparisons: list[Comparison] = Field(default_factory=list)
    assertions: list[AssertionResult] = Field(default_factory=list)
    mutation_verdict: MutationVerdict | None = None
    status: Status = "error"
    error: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)

    def assertion(self, name: str) -> AssertionResult:
        for item in self.assertions:
            if item.name == name:
                return item
        raise KeyError(name)


class Defect(_Frozen):
    """A named defect of the served vLLM, with the evidence the check found."""

    id: str
    title: str
    url: str
    probes: list[str]
    evidence: list[str]


class OffloadCheckReport(_Frozen):
    """Everything one case measured; written as JSON next to the results."""

    format: int = 2
    case_id: str
    profile: str
    model: str
    family: str = ""
    architectures: list[str] = Field(default_factory=list)
    connector: str
    frontend: str
    connector_extra: dict[str, Any] = Field(default_factory=dict)
    cpu_gib: float | None = None  # the CPU tier's size given to the connector
    gpus: int | None = None
    gpus_used: int | None = None
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
    layout: list[GroupLayout] = Field(default_factory=list)
    blocks_per_chunk: int = 1
    probes: list[ProbeInfo] = Field(default_factory=list)
    texts: dict[str, str] = Field(default_factory=dict)
    iterations: list[Iteration] = Field(default_factory=list)
    events: KVEventsSummary | None = None
    reset_visible: bool | None = None
    assertions: list[AssertionResult] = Field(default_factory=list)  # over the whole case
    defects: list[Defect] = Field(default_factory=list)
    instrument_errors: list[str] = Field(default_factory=list)
    # the end of the engine's fatal traceback, from the server log, where the engine died during the case
    engine_fault: str | None = None
    status: Status = "error"
    passed: bool = False
    judge_commit: str | None = None
    error: str | None = None
    timings: dict[str, float] = Field(default_factory=dict)
    phase_shares: dict[str, float] = Field(default_factory=dict)
    created_at: str = Field(default_factory=_now)
    host: str = Field(default_factory=socket.gethostname)
    extra: dict[str, Any] = Field(default_factory=dict)

    def clean(self) -> list[Iteration]:
        return [it for it in self.iterations if it.mutation is None]

    def mutations(self) -> list[Iteration]:
        return [it for it in self.iterations if it.mutation is not None]

    def assertion(self, name: str, iteration: int = 0) -> AssertionResult:
        """An assertion of the case, else of its ``iteration``-th clean iteration."""
        for item in self.assertions:
            if item.name == name:
                return item
        return self.clean()[iteration].assertion(name)

    def failures(self) -> list[AssertionResult]:
        out = [a for a in self.assertions if a.evaluated and not a.passed]
        for it in self.clean():
            out += [a for a in it.assertions if a.evaluated and not a.passed]
        return out

    def summary(self) -> str:
        head = (
            f"{self.case_id}: {self.status.upper()} (vllm {self.vllm_version}, "
            f"frontend {self.frontend_observed}, "
            f"{self.family} {'/'.join(self.architectures)}, {self.gpus} GPU, concurrency {self.concurrency})"
        )
        lines = [head]
        if self.error:
            lines.append(f"  error: {self.error[:500]}")
        if self.layout:
            lines.append(
                "  groups: " + ", ".join(f"g{g.index} {g.kind} block {g.block_size}" for g in self.layout)
            )
        for it in self.iterations:
            counts: dict[str, int] = {}
            for c in it.comparisons:
                counts[c.verdict] = counts.get(c.verdict, 0) + 1
            verdicts = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            lines.append(f"  {it.label}: {it.status.upper()} ({verdicts})")
            if it.mutation_verdict is not None:
                mv = it.mutation_verdict
                lines.append(
                    f"    mutation {mv.name}: applied {mv.applied}, caught {mv.caught} by {mv.failed} "
                    f"(expected {mv.expected}) {mv.message}"
                )
            if "load" in it.runs:
                load = it.runs["load"]
                fired = ", ".join(
                    f"HTTP {r.http_status}" if r.http_status else r.message for r in it.load_resets
                )
                lines.append(
                    f"    reset under load: {len(load.answers)} prompts, {load.failed_requests} failed; "
                    f"resets fired: {fired or 'none'}"
                )
            lines += [
                f"    [{a.outcome}] {a.name}: {a.message}"
                for a in it.assertions
                if not (a.passed and a.evaluated)
            ]
        lines += [f"  [{a.outcome}] {a.name}: {a.message}" for a in self.assertions]
        for d in self.defects:
            lines.append(f"  defect {d.id}: {d.title} on {len(d.probes)} probes ({d.url})")
        if self.timings:
            lines.append("  timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in self.timings.items()))
        return "\n".join(lines)
