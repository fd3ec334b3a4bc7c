"""The offload-reload GSM8K check: proves KV came back from the CPU tier, and came back intact.

Sequence (one server, one case = model x connector x frontend):

1. cold run (GSM8K, one request at a time by default);
   then (``warm_run``, default on) a warm run of the same prompts from the GPU prefix cache;
2. wait until the CPU-tier stores settle (KV events where the connector sends them, else metrics);
3. ``reset_prefix_cache_until_success(reset_external=False)``: the GPU prefix cache is dropped, the CPU
   tier kept;
4. reload run: the same prompts, whose KV must now come back through the connector;
5. ``reset_prefix_cache_until_success(reset_external=True)``: both tiers dropped;
6. second cold run: the noise floor.

Assertions:

1. ``reload_proven``: external prefix-cache hits (and CPU-to-GPU bytes, where the server exports them)
   grew in the reload run and not in the cold runs; CPU-tier stores were seen on the KV-events stream
   when the connector sends them (OffloadingConnector).
2. ``answers_unchanged``: each reload answer is compared with the cold answer (and with the warm one); the
   reload run must match at least as well as the second cold run matches the first (the noise floor,
   measured the same way). Why the warm run: greedy decoding is exact only for the same prefill split.
   A reload recomputes only the tail of each prompt, as the warm run does, while the cold run computes
   it all; the KV the reload brings back is the cold run's, and the warm run reads that same KV from the
   GPU. A corrupted reload matches neither.
3. ``accuracy_held``: cold and reload accuracy >= threshold - tolerance, where a threshold is configured.

The orchestration (:func:`run_check`, :func:`judge`) only talks to a :class:`CheckIO`; :class:`ServerIO`
is the real one (HTTP, /metrics, KV events). Run it on any GPU box::

    python -m vllm_devclient.offload_check --model MODEL --connector OffloadingConnector --frontend python
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as _dt
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from vllm_devclient.errors import DevClientError, InvalidParameterError
from vllm_devclient.gsm8k import GSM8KPrompt, GSM8KResult, build_prompts, evaluate_gsm8k_async, load_gsm8k
from vllm_devclient.metrics import MetricsDelta, MetricsSnapshot, fetch_metrics
from vllm_devclient.models import BarrierResult, VersionInfo
from vllm_devclient.server import CONNECTORS, Connector, Frontend, KVEventsSettings, ServerConfig, VllmServer

__all__ = [
    "FRONTENDS",
    "PROFILES",
    "AnswerComparison",
    "AssertionResult",
    "CheckCase",
    "CheckIO",
    "CheckSettings",
    "Mismatch",
    "ModelProfile",
    "OffloadCheckReport",
    "RunSummary",
    "ServerIO",
    "SettleResult",
    "StoreWatcher",
    "case_skip_reason",
    "compare_answers",
    "gpu_count",
    "judge",
    "main",
    "matrix",
    "model_available",
    "open_store_watcher",
    "run_case",
    "run_check",
    "server_config_for",
    "settle",
]

FRONTENDS: tuple[Frontend, ...] = ("python", "rust")
ASSERTIONS = ("reload_proven", "answers_unchanged", "accuracy_held")


# ---------------------------------------------------------------------------------------------------
# Configuration: the model matrix
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelProfile:
    """One model of the matrix, with what it needs to run."""

    name: str
    model: str
    family: str
    accuracy_threshold: float | None
    tolerance: float = 0.05
    gpus: int = 1
    cpu_gib: float = 4.0
    server_args: tuple[str, ...] = ()
    startup_timeout: float = 600.0
    num_questions: int = 200
    served_model_name: str | None = None
    offload_block_size: int | None = None


# vLLM CI's families (tests/evals/gsm8k/test_gsm8k_offloading.py), plus a one-GPU smoke profile.
_CI_ARGS = ("--no-disable-hybrid-kv-cache-manager", "--trust-remote-code")
PROFILES: dict[str, ModelProfile] = {
    "small": ModelProfile(
        name="small",
        model=os.environ.get("VLLM_DEVCLIENT_SMALL_MODEL", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        family="llama (SmolLM2-135M, smoke test: GSM8K accuracy is near 0, so no threshold)",
        accuracy_threshold=None,
        cpu_gib=1.0,
        server_args=("--dtype", "bfloat16"),
        startup_timeout=300.0,
        num_questions=24,
    ),
    "nemotron-h-8b": ModelProfile(
        name="nemotron-h-8b",
        model="nvidia/Nemotron-H-8B-Base-8K",
        family="hybrid Mamba",
        accuracy_threshold=0.45,
        cpu_gib=1.0,
        server_args=_CI_ARGS,
    ),
    "gemma-4-e4b": ModelProfile(
        name="gemma-4-e4b",
        model="google/gemma-4-E4B-it",
        family="sliding window",
        accuracy_threshold=0.55,
        cpu_gib=1.0,
        server_args=_CI_ARGS,
    ),
    "qwen3.5-35b-a3b": ModelProfile(
        name="qwen3.5-35b-a3b",
        model="Qwen/Qwen3.5-35B-A3B",
        family="MoE",
        accuracy_threshold=0.75,
        gpus=2,
        server_args=(*_CI_ARGS, "--tensor-parallel-size", "2", "--enable-expert-parallel"),
        startup_timeout=1200.0,
    ),
    "deepseek-v4-flash": ModelProfile(
        name="deepseek-v4-flash",
        model="deepseek-ai/DeepSeek-V4-Flash",
        family="MLA",
        accuracy_threshold=0.90,
        gpus=4,
        cpu_gib=16.0,
        server_args=(
            *_CI_ARGS,
            *("--tensor-parallel-size", "4", "--enable-expert-parallel"),
            *("--kv-cache-dtype", "fp8", "--block-size", "256"),
        ),
        startup_timeout=1200.0,
    ),
}

_CONNECTOR_SHORT: dict[str, Connector] = {
    "offloading": "OffloadingConnector",
    "simple": "SimpleCPUOffloadConnector",
}


def _connector(name: str) -> Connector:
    key = name.strip()
    if key in CONNECTORS:
        return key
    if key.lower() in _CONNECTOR_SHORT:
        return _CONNECTOR_SHORT[key.lower()]
    raise InvalidParameterError(f"unknown connector {name!r}: use one of {CONNECTORS} (or offloading/simple)")


@dataclass(frozen=True)
class CheckCase:
    """One cell of the matrix."""

    profile: ModelProfile
    connector: Connector
    frontend: Frontend
    connector_extra: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""

    @property
    def id(self) -> str:
        short = "offloading" if self.connector == "OffloadingConnector" else "simple"
        base = f"{self.profile.name}-{short}-{self.frontend}"
        return f"{base}-{self.label}" if self.label else base


def matrix(
    profiles: Iterable[str] | None = None,
    connectors: Iterable[Connector] = CONNECTORS,
    frontends: Iterable[Frontend] = FRONTENDS,
) -> list[CheckCase]:
    """Every (profile, connector, frontend) case; ``profiles=None`` means all of :data:`PROFILES`."""
    names = list(PROFILES) if profiles is None else list(profiles)
    unknown = [n for n in names if n not in PROFILES]
    if unknown:
        raise InvalidParameterError(f"unknown profiles {unknown}: known are {sorted(PROFILES)}")
    return [CheckCase(PROFILES[n], c, f) for n in names for c in connectors for f in frontends]


def case_skip_reason(case: CheckCase, *, gpu_count: int, model_available: bool) -> str | None:
    """Why a case cannot run here (None: it can)."""
    if gpu_count < case.profile.gpus:
        return (
            f"{case.profile.model} ({case.profile.family}) needs {case.profile.gpus} GPUs, "
            f"this machine has {gpu_count}"
        )
    if not model_available:
        return f"{case.profile.model} is not available offline (not a local folder nor in the HF cache)"
    return None


def gpu_count() -> int:
    """NVIDIA GPUs visible here (nvidia-smi; 0 when there is none or no driver)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    try:
        out = subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    if visible is not None:
        count = min(count, len([v for v in visible.split(",") if v.strip()]))
    return count


def model_available(model: str) -> bool:
    """A local folder, or (offline) in the Hugging Face cache; online, anything may be downloaded."""
    if Path(model).is_dir():
        return True
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    if not offline:
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return False
    found = try_to_load_from_cache(model, "config.json")
    return isinstance(found, str)


# ---------------------------------------------------------------------------------------------------
# Report models
# ---------------------------------------------------------------------------------------------------


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


class OffloadCheckReport(_Frozen):
    """Everything one case measured; written as JSON next to the results."""

    case_id: str
    profile: str
    model: str
    connector: str
    frontend: str
    connector_extra: dict[str, Any] = Field(default_factory=dict)
    num_questions: int
    concurrency: int | None
    accuracy_threshold: float | None
    tolerance: float
    vllm_version: str | None
    rust_frontend_version: str | None
    frontend_observed: str | None
    kv_events: bool
    runs: dict[str, RunSummary]
    windows: dict[str, MetricsDelta]
    cpu_blocks_stored: dict[str, int | None]
    settle: dict[str, SettleResult]
    barriers: dict[str, BarrierResult]
    reload_vs_cold: AnswerComparison
    reload_vs_warm: AnswerComparison | None = None
    warm_vs_cold: AnswerComparison | None = None
    noise_floor: AnswerComparison
    mismatch_examples: list[Mismatch]
    assertions: list[AssertionResult]
    passed: bool
    timings: dict[str, float]
    created_at: str
    host: str = Field(default_factory=socket.gethostname)

    def assertion(self, name: str) -> AssertionResult:
        for item in self.assertions:
            if item.name == name:
                return item
        raise KeyError(name)

    def failures(self) -> list[AssertionResult]:
        return [a for a in self.assertions if not a.passed]

    def summary(self) -> str:
        r = self.windows["reload"]
        lines = [
            f"{self.case_id}: {'PASSED' if self.passed else 'FAILED'} "
            f"(vllm {self.vllm_version}, frontend {self.frontend_observed})",
            f"  reload: external hits +{_fmt(r.external_prefix_cache_hits)} tokens, "
            f"CPU->GPU +{_fmt(r.cpu_to_gpu_bytes)} bytes, CPU blocks stored (cold) "
            f"{self.cpu_blocks_stored.get('cold')}",
            f"  answers: reload matches cold {self.reload_vs_cold.matches}/{self.reload_vs_cold.total}"
            + (
                f", warm {self.reload_vs_warm.matches}/{self.reload_vs_warm.total}"
                if self.reload_vs_warm is not None
                else ""
            )
            + f"; noise floor (cold2 vs cold) {self.noise_floor.matches}/{self.noise_floor.total}",
            "  accuracy: "
            + ", ".join(f"{k} {v.accuracy:.3f}" for k, v in self.runs.items())
            + f" (threshold {self.accuracy_threshold})",
        ]
        lines += [f"  [{'ok' if a.passed else 'FAIL'}] {a.name}: {a.message}" for a in self.assertions]
        return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


# ---------------------------------------------------------------------------------------------------
# Orchestration: sequencing, deltas, assertions (no I/O of its own)
# ---------------------------------------------------------------------------------------------------


class CheckIO(Protocol):
    """What the check needs from a server; :class:`ServerIO` is the real one."""

    def version(self) -> VersionInfo: ...
    def metrics(self) -> MetricsSnapshot: ...
    def run_gsm8k(self, label: str) -> GSM8KResult: ...
    def step_engine(self) -> None: ...
    def mark_stores(self) -> None:
        """Remember how far CPU-tier stores have got (before a cold run), for the next settle_stores."""
        ...

    def settle_stores(self) -> SettleResult:
        """Wait until stores since the last mark_stores have grown and gone quiet."""
        ...

    def reset_prefix_cache(self, reset_external: bool) -> BarrierResult: ...
    def cpu_blocks_stored(self) -> int | None:
        """CPU-tier blocks announced on the KV-events stream so far; None without a stream."""
        ...


@dataclass(frozen=True)
class CheckSettings:
    """What the judgement needs to know about the case."""

    accuracy_threshold: float | None = None
    tolerance: float = 0.05
    expect_cpu_store_events: bool = False
    expected_frontend: Frontend | None = None
    warm_run: bool = True


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
) -> list[AssertionResult]:
    """The three assertions (plus a setup check of the frontend) from what the runs measured."""
    results: list[AssertionResult] = []
    reload = windows["reload"]
    # Only the cold runs must not load. The warm run may load a block or two: a block-aligned prompt's
    # last block, which the GPU prefix cache leaves to recompute, can come from the CPU tier instead.
    not_loading = [(name, w) for name, w in windows.items() if name in ("cold", "cold2")]

    # 1. the reload happened
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
    results.append(
        AssertionResult(
            name="reload_proven", passed=not problems, message="; ".join(problems or notes) or "ok"
        )
    )

    # 2. answers unchanged, judged against the noise floor measured the same way
    best, reference = reload_vs_cold, "cold"
    if reload_vs_warm is not None and reload_vs_warm.matches > best.matches:
        best, reference = reload_vs_warm, "warm"
    ok = best.matches >= noise_floor.matches
    message = f"reload matched cold on {reload_vs_cold.matches}/{reload_vs_cold.total}"
    if reload_vs_warm is not None:
        message += f", warm on {reload_vs_warm.matches}/{reload_vs_warm.total}"
    message += f"; noise floor (second cold run) {noise_floor.matches}/{noise_floor.total}"
    if ok:
        message += f" (reference: {reference} run)"
    else:
        message += f"; reload differs from the {reference} run on questions {best.mismatched[:20]}"
    results.append(AssertionResult(name="answers_unchanged", passed=ok, message=message))

    # 3. accuracy held
    if settings.accuracy_threshold is None:
        results.append(
            AssertionResult(
                name="accuracy_held",
                passed=True,
                skipped=True,
                message="no accuracy threshold for this model",
            )
        )
    else:
        floor = settings.accuracy_threshold - settings.tolerance
        low = {k: r.accuracy for k, r in runs.items() if k in ("cold", "reload") and r.accuracy < floor}
        accs = ", ".join(f"{k} {runs[k].accuracy:.3f}" for k in ("cold", "reload"))
        results.append(
            AssertionResult(
                name="accuracy_held",
                passed=not low,
                message=f"{accs} vs floor {floor:.3f}" + (f"; below: {sorted(low)}" if low else ""),
            )
        )

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


def run_check(
    io: CheckIO,
    settings: CheckSettings,
    *,
    case: CheckCase | None = None,
    num_questions: int = 0,
    concurrency: int | None = 1,
    clock: Callable[[], float] = time.monotonic,
    extra_timings: Mapping[str, float] | None = None,
) -> OffloadCheckReport:
    """Run the sequence against ``io`` and judge it. Never raises on a failed assertion: see ``.passed``."""
    timings: dict[str, float] = dict(extra_timings or {})
    start = clock()

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = clock()
        value = fn()
        timings[name] = clock() - t0
        return value

    version = io.version()
    m0 = io.metrics()
    io.mark_stores()
    cold = timed("cold_run_s", lambda: io.run_gsm8k("cold"))
    warm: GSM8KResult | None = None
    m_warm: MetricsSnapshot | None = None
    if settings.warm_run:
        m_warm = io.metrics()
        warm = timed("warm_run_s", lambda: io.run_gsm8k("warm"))
    settle_cold: SettleResult = timed("settle_cold_s", io.settle_stores)
    stored_cold = io.cpu_blocks_stored()
    m1 = io.metrics()
    barrier_gpu: BarrierResult = timed("reset_gpu_s", lambda: io.reset_prefix_cache(False))
    m2 = io.metrics()
    reload = timed("reload_run_s", lambda: io.run_gsm8k("reload"))
    # Connector stats reach /metrics with the next engine step's output: step once before reading.
    io.step_engine()
    m3 = io.metrics()
    barrier_all: BarrierResult = timed("reset_all_s", lambda: io.reset_prefix_cache(True))
    stored_before_cold2 = io.cpu_blocks_stored()
    m4 = io.metrics()
    io.mark_stores()
    cold2 = timed("cold2_run_s", lambda: io.run_gsm8k("cold2"))
    settle_cold2: SettleResult = timed("settle_cold2_s", io.settle_stores)
    stored_after_cold2 = io.cpu_blocks_stored()
    m5 = io.metrics()
    timings["check_s"] = clock() - start

    runs = {"cold": cold, "reload": reload, "cold2": cold2}
    if warm is not None and m_warm is not None:
        runs["warm"] = warm
        windows = {"cold": m_warm.delta(m0), "warm": m1.delta(m_warm)}
    else:
        windows = {"cold": m1.delta(m0)}
    windows |= {"reload": m3.delta(m2), "cold2": m5.delta(m4)}
    stored: dict[str, int | None] = {
        "cold": stored_cold,
        "cold2": None
        if stored_after_cold2 is None or stored_before_cold2 is None
        else stored_after_cold2 - stored_before_cold2,
    }
    reload_vs_cold = compare_answers(cold, reload)
    reload_vs_warm = compare_answers(warm, reload) if warm is not None else None
    noise = compare_answers(cold, cold2)
    assertions = judge(
        settings,
        runs=runs,
        windows=windows,
        cpu_blocks_stored=stored,
        reload_vs_cold=reload_vs_cold,
        reload_vs_warm=reload_vs_warm,
        noise_floor=noise,
        frontend_observed=version.frontend,
    )
    texts_cold = {q.index: q.text for q in cold.questions}
    texts_reload = {q.index: q.text for q in reload.questions}
    examples = [
        Mismatch(index=i, cold=texts_cold[i][:400], other=texts_reload[i][:400])
        for i in reload_vs_cold.mismatched[:3]
    ]
    profile = case.profile if case is not None else None
    return OffloadCheckReport(
        case_id=case.id if case is not None else "adhoc",
        profile=profile.name if profile else "",
        model=profile.model if profile else "",
        connector=case.connector if case is not None else "",
        frontend=case.frontend if case is not None else "",
        connector_extra=dict(case.connector_extra) if case is not None else {},
        num_questions=num_questions or cold.num_questions,
        concurrency=concurrency,
        accuracy_threshold=settings.accuracy_threshold,
        tolerance=settings.tolerance,
        vllm_version=version.version,
        rust_frontend_version=version.rust_frontend_version,
        frontend_observed=version.frontend,
        kv_events=stored_cold is not None,
        runs={k: RunSummary.of(v) for k, v in runs.items()},
        windows=windows,
        cpu_blocks_stored=stored,
        settle={"cold": settle_cold, "cold2": settle_cold2},
        barriers={"gpu_only": barrier_gpu, "full": barrier_all},
        reload_vs_cold=reload_vs_cold,
        reload_vs_warm=reload_vs_warm,
        warm_vs_cold=compare_answers(cold, warm) if warm is not None else None,
        noise_floor=noise,
        mismatch_examples=examples,
        assertions=assertions,
        passed=all(a.passed for a in assertions),
        timings={k: round(v, 3) for k, v in timings.items()},
        created_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


def settle(
    probe: Callable[[], float | None],
    step: Callable[[], None],
    *,
    method: Literal["kv_events", "metrics", "steps"],
    quiet_s: float = 1.0,
    timeout: float = 180.0,
    poll_s: float = 0.25,
    min_steps: int = 3,
    expect_growth: bool = True,
    baseline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SettleResult:
    """Step the engine until ``probe`` (stored blocks or bytes) stops growing for ``quiet_s``.

    Stepping matters: the scheduler only learns that an offload store finished when the engine runs a
    step. With ``expect_growth`` the value must have grown past ``baseline`` first (default: its value
    when the wait starts; pass the value from before the workload, since stores start during it).
    vLLM's CI waits the same way. A probe that answers None (nothing to watch) just gets ``min_steps``
    steps. Never raises: a timeout is reported in the result, and the check's assertions say what it means.
    """
    start = clock()
    first = probe()
    steps = 0
    if first is None:
        for _ in range(min_steps):
            step()
            steps += 1
        return SettleResult(method="steps", seconds=clock() - start, engine_steps=steps)
    last = first
    changed_at = clock()
    while True:
        step()
        steps += 1
        sleep(poll_s)
        value = probe()
        now = clock()
        if value is not None and value != last:
            last = value
            changed_at = now
        grown = last > (first if baseline is None else baseline) or not expect_growth
        if grown and steps >= min_steps and now - changed_at >= quiet_s:
            return SettleResult(
                method=method, seconds=now - start, engine_steps=steps, start_value=first, end_value=last
            )
        if now - start >= timeout:
            return SettleResult(
                method=method,
                seconds=now - start,
                engine_steps=steps,
                start_value=first,
                end_value=last,
                timed_out=True,
            )


# ---------------------------------------------------------------------------------------------------
# The real I/O: a running server, its /metrics and its KV-events stream
# ---------------------------------------------------------------------------------------------------


class StoreWatcher(Protocol):
    """Counts CPU-tier BlockStored blocks seen on the KV-events stream."""

    def cpu_blocks(self) -> int: ...
    def close(self) -> None: ...


def open_store_watcher(settings: KVEventsSettings) -> StoreWatcher:
    """A KV-events subscriber (bound or connected as ``settings`` says) that counts CPU stores."""
    from vllm_devclient.kv_events import KVEventSubscriber

    subscriber = KVEventSubscriber(
        settings.subscriber_endpoint, topic=settings.topic, bind=settings.subscriber_binds
    )
    return _KVEventsStoreWatcher(subscriber)


class _KVEventsStoreWatcher:
    def __init__(self, subscriber: Any) -> None:
        self._sub = subscriber

    def cpu_blocks(self) -> int:
        # Drain what has arrived with a short non-zero wait: a zero timeout may return before the
        # sockets are read at all (seen with KVEventSubscriber.poll(0.0) / count_stored()).
        while self._sub.poll(0.005) is not None:
            pass
        return int(self._sub.tally.stored("CPU"))

    def close(self) -> None:
        self._sub.close()


class ServerIO:
    """:class:`CheckIO` over HTTP for a running server."""

    def __init__(
        self,
        base_url: str,
        prompts: Sequence[GSM8KPrompt],
        *,
        concurrency: int | None = 1,
        max_tokens: int = 256,
        model: str | None = None,
        watcher: StoreWatcher | None = None,
        settle_timeout: float = 180.0,
        barrier_timeout: float = 60.0,
        progress: bool | None = None,
    ) -> None:
        from vllm_devclient.client import DevClient

        self.base_url = base_url
        self.prompts = list(prompts)
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.model = model
        self.watcher = watcher
        self.settle_timeout = settle_timeout
        self.barrier_timeout = barrier_timeout
        self.progress = progress
        self.client = DevClient(base_url, timeout=120.0, model=model)
        self._store_mark: float | None = None

    def close(self) -> None:
        self.client.close()

    def version(self) -> VersionInfo:
        return self.client.version()

    def metrics(self) -> MetricsSnapshot:
        return fetch_metrics(self.base_url)

    def run_gsm8k(self, label: str) -> GSM8KResult:
        return asyncio.run(
            evaluate_gsm8k_async(
                self.base_url,
                prompts=self.prompts,
                concurrency=self.concurrency,
                max_tokens=self.max_tokens,
                model=self.model,
                progress=self.progress,
            )
        )

    def step_engine(self) -> None:
        self.client.step_engine()

    def cpu_blocks_stored(self) -> int | None:
        return None if self.watcher is None else self.watcher.cpu_blocks()

    def _store_progress(self) -> float | None:
        if self.watcher is not None:
            return float(self.watcher.cpu_blocks())
        return self.metrics().gpu_to_cpu_bytes

    def mark_stores(self) -> None:
        self._store_mark = self._store_progress()

    def settle_stores(self) -> SettleResult:
        return settle(
            self._store_progress,
            self.step_engine,
            method="kv_events" if self.watcher is not None else "metrics",
            timeout=self.settle_timeout,
            baseline=self._store_mark,
        )

    def reset_prefix_cache(self, reset_external: bool) -> BarrierResult:
        return self.client.reset_prefix_cache_until_success(
            timeout=self.barrier_timeout, reset_external=reset_external
        )


def server_config_for(
    case: CheckCase,
    *,
    model: str | None = None,
    served_model_name: str | None = None,
    cpu_gib: float | None = None,
    offload_block_size: int | None = None,
    kv_events: KVEventsSettings | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    log_path: Path | None = None,
    startup_timeout: float | None = None,
) -> ServerConfig:
    """The :class:`ServerConfig` for a case (profile defaults, overridable)."""
    p = case.profile
    return ServerConfig(
        model=model or p.model,
        served_model_name=served_model_name or p.served_model_name,
        connector=case.connector,
        cpu_gib=cpu_gib if cpu_gib is not None else p.cpu_gib,
        offload_block_size=(offload_block_size if offload_block_size is not None else p.offload_block_size)
        if case.connector == "OffloadingConnector"
        else None,
        connector_extra=dict(case.connector_extra),
        kv_events=kv_events,
        frontend=case.frontend,
        extra_args=(*p.server_args, *extra_args),
        env=dict(env or {}),
        startup_timeout=startup_timeout if startup_timeout is not None else p.startup_timeout,
        log_path=log_path,
    )


def run_case(
    case: CheckCase,
    *,
    report_dir: str | os.PathLike[str] | None = None,
    num_questions: int | None = None,
    concurrency: int | None = 1,
    max_tokens: int = 256,
    accuracy_threshold: float | Literal["profile"] | None = "profile",
    use_kv_events: bool | None = None,
    kv_events_bind: Literal["subscriber", "publisher"] = "subscriber",
    gsm8k_dir: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    warm_run: bool = True,
    **server_overrides: Any,
) -> OffloadCheckReport:
    """Start the server for ``case``, run the check, stop the server, write ``{case.id}.json``.

    ``use_kv_events=None`` turns KV events on for the OffloadingConnector (the one that announces its
    CPU stores). ``server_overrides`` go to :func:`server_config_for`.
    """
    n = num_questions if num_questions is not None else case.profile.num_questions
    threshold = case.profile.accuracy_threshold if accuracy_threshold == "profile" else accuracy_threshold
    events = case.connector == "OffloadingConnector" if use_kv_events is None else use_kv_events
    train, test = load_gsm8k(data_dir=gsm8k_dir)
    prompts = build_prompts(train, test, n)
    out_dir = Path(report_dir) if report_dir is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        server_overrides.setdefault("log_path", out_dir / f"{case.id}.server.log")

    watcher: StoreWatcher | None = None
    settings: KVEventsSettings | None = None
    if events:
        settings = KVEventsSettings.on_free_port(bind=kv_events_bind)
        # The subscriber is up before the server starts, so no early event is missed.
        watcher = open_store_watcher(settings)
    try:
        config = server_config_for(case, kv_events=settings, **server_overrides)
        t0 = time.monotonic()
        with VllmServer(config) as server:
            startup = time.monotonic() - t0
            io = ServerIO(
                server.base_url,
                prompts,
                concurrency=concurrency,
                max_tokens=max_tokens,
                model=config.served_model_name,
                watcher=watcher,
                progress=progress,
            )
            try:
                report = run_check(
                    io,
                    CheckSettings(
                        accuracy_threshold=threshold,
                        tolerance=case.profile.tolerance,
                        expect_cpu_store_events=events and case.connector == "OffloadingConnector",
                        expected_frontend=case.frontend,
                        warm_run=warm_run,
                    ),
                    case=case,
                    num_questions=n,
                    concurrency=concurrency,
                    extra_timings={"server_startup_s": startup},
                )
            finally:
                io.close()
    finally:
        if watcher is not None:
            watcher.close()
    report = report.model_copy(update={"model": config.model})
    if out_dir is not None:
        (out_dir / f"{case.id}.json").write_text(report.model_dump_json(indent=2) + "\n")
    return report


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m vllm_devclient.offload_check",
        description="Offload-reload GSM8K check: cold and warm runs, GPU-only reset, reload run, full reset, "
        "second cold run.",
    )
    p.add_argument(
        "--profile", default="small", choices=sorted(PROFILES), help="model profile (default small)"
    )
    p.add_argument("--model", help="model id or folder (default: the profile's)")
    p.add_argument("--served-model-name")
    p.add_argument(
        "--connector",
        default="OffloadingConnector",
        help="OffloadingConnector, SimpleCPUOffloadConnector (or offloading, simple); comma-separated",
    )
    p.add_argument("--frontend", default="python", help="python, rust, or python,rust")
    p.add_argument("--num-questions", type=int, help="GSM8K questions per run (default: the profile's)")
    p.add_argument(
        "--concurrency", type=int, default=1, help="requests in flight (default 1: batching controlled)"
    )
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--threshold", type=float, help="accuracy threshold (default: the profile's)")
    p.add_argument("--cpu-gib", type=float, help="CPU tier size (default: the profile's)")
    p.add_argument("--offload-block-size", type=int, help="OffloadingConnector block_size in tokens")
    p.add_argument(
        "--connector-extra", type=json.loads, default={}, help="JSON merged into kv_connector_extra_config"
    )
    p.add_argument("--label", default="", help="suffix for the case id (for example 'mutation')")
    p.add_argument(
        "--server-arg",
        action="append",
        default=[],
        help="extra vllm serve argument(s), shell-split; repeatable",
    )
    p.add_argument("--no-kv-events", action="store_true", help="do not subscribe to KV events")
    p.add_argument("--kv-events-bind", choices=("subscriber", "publisher"), default="subscriber")
    p.add_argument("--report-dir", default="offload-check-reports")
    p.add_argument("--gsm8k-dir", help="folder with train.jsonl/test.jsonl (no download)")
    p.add_argument("--startup-timeout", type=float)
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--no-warm-run",
        action="store_true",
        help="skip the warm reference run (the cold run is the only reference)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the check for each requested case; exit 0 when all passed, 1 when one failed, 2 on error."""
    args = _parser().parse_args(argv)
    try:
        connectors = [_connector(c) for c in args.connector.split(",") if c.strip()]
        frontends: list[Frontend] = []
        for f in args.frontend.split(","):
            if f.strip() not in FRONTENDS:
                raise InvalidParameterError(f"unknown frontend {f!r}: use python, rust or python,rust")
            frontends.append(f.strip())
        profile = PROFILES[args.profile]
        if args.model:
            profile = replace(profile, model=args.model)
        extra_args = [a for chunk in args.server_arg for a in shlex.split(chunk)]
        threshold: float | Literal["profile"] | None = "profile" if args.threshold is None else args.threshold
        failed = False
        for connector in connectors:
            for frontend in frontends:
                case = CheckCase(
                    profile, connector, frontend, connector_extra=args.connector_extra, label=args.label
                )
                overrides: dict[str, Any] = {"extra_args": extra_args}
                for key, value in (
                    ("served_model_name", args.served_model_name),
                    ("cpu_gib", args.cpu_gib),
                    ("offload_block_size", args.offload_block_size),
                    ("startup_timeout", args.startup_timeout),
                ):
                    if value is not None:
                        overrides[key] = value
                report = run_case(
                    case,
                    report_dir=args.report_dir,
                    num_questions=args.num_questions,
                    concurrency=args.concurrency,
                    max_tokens=args.max_tokens,
                    accuracy_threshold=threshold,
                    use_kv_events=False if args.no_kv_events else None,
                    kv_events_bind=args.kv_events_bind,
                    gsm8k_dir=args.gsm8k_dir,
                    progress=False if args.no_progress else None,
                    warm_run=not args.no_warm_run,
                    **overrides,
                )
                print(report.summary(), flush=True)
                failed = failed or not report.passed
    except DevClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
