"""The offload-reload check: the sequence on one server, the real server I/O, and one case end to end.

Sequence (one server per case = model x connector x frontend, started once for every run):

1. cold run; then (``warm_run``) a warm run of the same prompts from the GPU prefix cache;
2. wait until the CPU-tier stores settle (KV events where the connector sends them, else metrics);
3. ``reset_prefix_cache_until_success(reset_external=False)``: GPU prefix cache dropped, CPU tier kept;
4. reload run: the same prompts, whose KV must now come back through the connector;
5. ``reset_prefix_cache_until_success(reset_external=True)``: both tiers dropped;
6. (``second_cold_run``) second cold run: the noise floor;
7. (``agreement_concurrencies``) for each concurrency, two cold runs with full resets: how often greedy
   answers agree at that concurrency (and with the concurrency-1 answers).

The fast mode turns the warm run and the second cold run off. :func:`run_check` only talks to a
:class:`CheckIO`; :class:`ServerIO` is the real one. Every phase is timed, and a failure half-way still
yields a report (``status="error"``) with what was measured until then.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from vllm_devclient.metrics import MetricsDelta, MetricsSnapshot
from vllm_devclient.models import BarrierResult, VersionInfo

from .events import EventWatcher, GroupEventAccount, open_event_watcher
from .gsm8k import GSM8KPrompt, GSM8KResult, build_prompts, evaluate_gsm8k_async, load_gsm8k
from .judge import CheckSettings, compare_answers, judge, status_of
from .profiles import CheckCase, gpu_count, resolve_model
from .report import AgreementRow, AnswerComparison, Mismatch, OffloadCheckReport, RunSummary, SettleResult
from .server import KVEventsSettings, ServerConfig, VllmServer

__all__ = ["CheckIO", "ServerIO", "run_case", "run_check", "server_config_for", "settle"]


class CheckIO(Protocol):
    """What the check needs from a server; :class:`ServerIO` is the real one."""

    def version(self) -> VersionInfo: ...
    def metrics(self) -> MetricsSnapshot: ...
    def run_gsm8k(self, label: str, concurrency: int | None = ...) -> GSM8KResult: ...
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

    def events(self) -> GroupEventAccount | None:
        """The per-group event account, drained up to now; None without a stream."""
        ...


@dataclass
class _Measured:
    """What the sequence has measured so far (kept for a partial report when it stops half-way)."""

    version: VersionInfo | None = None
    results: dict[str, GSM8KResult] = field(default_factory=dict)
    windows: dict[str, MetricsDelta] = field(default_factory=dict)
    stored: dict[str, int | None] = field(default_factory=dict)
    settle: dict[str, SettleResult] = field(default_factory=dict)
    barriers: dict[str, BarrierResult] = field(default_factory=dict)
    agreement: list[AgreementRow] = field(default_factory=list)
    reset_visible: bool | None = None
    timings: dict[str, float] = field(default_factory=dict)


def _sequence(io: CheckIO, settings: CheckSettings, m: _Measured, clock: Callable[[], float]) -> None:
    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = clock()
        try:
            return fn()
        finally:
            m.timings[name] = clock() - t0

    m.version = io.version()
    m0 = io.metrics()
    io.mark_stores()
    m.results["cold"] = timed("cold_run_s", lambda: io.run_gsm8k("cold"))
    m_warm = io.metrics()
    m.windows["cold"] = m_warm.delta(m0)
    if settings.warm_run:
        m.results["warm"] = timed("warm_run_s", lambda: io.run_gsm8k("warm"))
    m.settle["cold"] = timed("settle_cold_s", io.settle_stores)
    m.stored["cold"] = io.cpu_blocks_stored()
    m1 = io.metrics()
    if settings.warm_run:
        m.windows["warm"] = m1.delta(m_warm)
    m.barriers["gpu_only"] = timed("reset_gpu_s", lambda: io.reset_prefix_cache(False))
    m2 = io.metrics()
    m.results["reload"] = timed("reload_run_s", lambda: io.run_gsm8k("reload"))
    # Connector stats reach /metrics with the next engine step's output: step once before reading.
    io.step_engine()
    m.windows["reload"] = io.metrics().delta(m2)
    account = io.events()
    if account is not None:
        account.mark("before_full_reset")
    m.barriers["full"] = timed("reset_all_s", lambda: io.reset_prefix_cache(True))
    io.step_engine()  # events of the reset go out with the next engine step
    account = io.events()
    if account is not None:
        delta = account.since("before_full_reset")
        m.reset_visible = delta.cleared > 0 or delta.removed("CPU") + delta.removed("GPU") > 0
    if settings.second_cold_run:
        before = io.cpu_blocks_stored()
        m4 = io.metrics()
        io.mark_stores()
        m.results["cold2"] = timed("cold2_run_s", lambda: io.run_gsm8k("cold2"))
        m.settle["cold2"] = timed("settle_cold2_s", io.settle_stores)
        after = io.cpu_blocks_stored()
        m.stored["cold2"] = None if after is None or before is None else after - before
        m.windows["cold2"] = io.metrics().delta(m4)
    reference = m.results["cold"] if m.results["cold"].concurrency == 1 else None
    for c in settings.agreement_concurrencies:
        t0 = clock()
        io.reset_prefix_cache(True)
        first = io.run_gsm8k(f"agree{c}a", c)
        io.reset_prefix_cache(True)
        second = io.run_gsm8k(f"agree{c}b", c)
        if c == 1 and reference is None:
            reference = first
        m.agreement.append(
            AgreementRow(
                concurrency=c,
                cold_vs_cold=compare_answers(first, second),
                vs_sequential=compare_answers(reference, first) if reference is not None else None,
                latency_s=first.latency_s,
            )
        )
        m.timings[f"agreement_c{c}_s"] = clock() - t0


def _case_fields(case: CheckCase | None) -> dict[str, Any]:
    """What a report says of its case (a check run without a case is "adhoc")."""
    if case is None:
        return {
            "case_id": "adhoc",
            "profile": "",
            "family": "",
            "architectures": [],
            "connector": "",
            "frontend": "",
            "connector_extra": {},
        }
    p = case.profile
    return {
        "case_id": case.id,
        "profile": p.name,
        "family": p.family,
        "architectures": list(p.architectures),
        "connector": case.connector,
        "frontend": case.frontend,
        "connector_extra": dict(case.connector_extra),
    }


def run_check(
    io: CheckIO,
    settings: CheckSettings,
    *,
    case: CheckCase | None = None,
    num_questions: int = 0,
    concurrency: int | None = 1,
    clock: Callable[[], float] = time.monotonic,
    extra_timings: Mapping[str, float] | None = None,
    report_fields: Mapping[str, Any] | None = None,
) -> OffloadCheckReport:
    """Run the sequence against ``io`` and judge it. Never raises on a failed assertion (see ``.status``);
    an exception half-way gives a report with ``status="error"`` and what was measured until then."""
    m = _Measured(timings=dict(extra_timings or {}))
    start = clock()
    error: str | None = None
    try:
        _sequence(io, settings, m, clock)
    except Exception as exc:  # the report keeps the partial result
        error = f"{type(exc).__name__}: {exc}"
    m.timings["check_s"] = clock() - start
    events_account = None
    try:
        events_account = io.events()
    except Exception as exc:  # a broken stream must not hide the runs
        error = error or f"{type(exc).__name__}: {exc}"
    events = events_account.summary() if events_account is not None else None

    runs = m.results
    cold, reload_, warm, cold2 = (runs.get(k) for k in ("cold", "reload", "warm", "cold2"))
    comparisons: dict[str, AnswerComparison | None] = {}
    assertions = []
    floor_measured = cold2 is not None
    if error is None and cold is not None and reload_ is not None:
        reload_vs_cold = compare_answers(cold, reload_)
        reload_vs_warm = compare_answers(warm, reload_) if warm is not None else None
        if cold2 is not None:
            noise = compare_answers(cold, cold2)
        else:  # fast mode: no measured floor, so the reload must match a reference on every question
            noise = AnswerComparison(
                matches=cold.num_questions, total=cold.num_questions, rate=1.0, mismatched=[]
            )
        comparisons = {
            "reload_vs_cold": reload_vs_cold,
            "reload_vs_warm": reload_vs_warm,
            "warm_vs_cold": compare_answers(cold, warm) if warm is not None else None,
            "noise_floor": noise,
        }
        assertions = judge(
            settings,
            runs={k: v for k, v in runs.items() if not k.startswith("agree")},
            windows=m.windows,
            cpu_blocks_stored=m.stored,
            reload_vs_cold=reload_vs_cold,
            reload_vs_warm=reload_vs_warm,
            noise_floor=noise,
            frontend_observed=m.version.frontend if m.version else None,
            events=events,
            reset_visible=m.reset_visible,
            floor_measured=floor_measured,
        )
    examples: list[Mismatch] = []
    if cold is not None and reload_ is not None and comparisons.get("reload_vs_cold") is not None:
        texts_cold = {q.index: q.text for q in cold.questions}
        texts_reload = {q.index: q.text for q in reload_.questions}
        mismatched = comparisons["reload_vs_cold"].mismatched  # type: ignore[union-attr]
        examples = [
            Mismatch(index=i, cold=texts_cold[i][:400], other=texts_reload[i][:400]) for i in mismatched[:3]
        ]
    status = "error" if error is not None else status_of(assertions)
    total = sum(v for k, v in m.timings.items() if k in ("check_s", "server_startup_s"))
    phases = {k: v for k, v in m.timings.items() if k not in ("check_s",)}
    profile = case.profile if case is not None else None
    version = m.version
    fields: dict[str, Any] = {
        **_case_fields(case),
        "model": profile.model if profile else "",
        "num_questions": num_questions or (cold.num_questions if cold else 0),
        "num_shots": cold.num_shots if cold else None,
        "max_tokens": cold.max_tokens if cold else None,
        "concurrency": concurrency,
        "accuracy_threshold": settings.accuracy_threshold,
        "tolerance": settings.tolerance,
        "max_failed_rate": settings.max_failed_rate,
        "vllm_version": version.version if version else None,
        "rust_frontend_version": version.rust_frontend_version if version else None,
        "frontend_observed": version.frontend if version else None,
        "kv_events": m.stored.get("cold") is not None,
        "runs": {k: RunSummary.of(v) for k, v in runs.items()},
        "windows": m.windows,
        "cpu_blocks_stored": m.stored,
        "events": events,
        "reset_visible": m.reset_visible,
        "settle": m.settle,
        "barriers": m.barriers,
        **comparisons,
        "noise_floor_measured": floor_measured,
        "mismatch_examples": examples,
        "agreement": m.agreement,
        "assertions": assertions,
        "status": status,
        "passed": status == "passed",
        "error": error,
        "timings": {k: round(v, 3) for k, v in m.timings.items()},
        "phase_shares": {k: round(v / total, 3) for k, v in phases.items()} if total > 0 else {},
    }
    fields.update(report_fields or {})
    return OffloadCheckReport(**fields)


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

    Stepping matters: the scheduler only learns that an offload store finished when the engine runs a step.
    With ``expect_growth`` the value must have grown past ``baseline`` first (default: its value when the
    wait starts; pass the value from before the workload, since stores start during it). A probe answering
    None (nothing to watch) just gets ``min_steps`` steps. Never raises: a timeout is in the result.
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


class ServerIO:
    """:class:`CheckIO` over the client for a running server (``base_url`` may end in ``/v1``)."""

    def __init__(
        self,
        base_url: str,
        prompts: Sequence[GSM8KPrompt],
        *,
        concurrency: int | None = 1,
        max_tokens: int = 256,
        num_shots: int = 5,
        model: str | None = None,
        watcher: EventWatcher | None = None,
        store_events: bool = True,
        settle_timeout: float = 180.0,
        barrier_timeout: float = 60.0,
        request_timeout: float = 600.0,
        progress: bool | None = None,
    ) -> None:
        from vllm_devclient.client import DevClient

        self.base_url = base_url
        self.prompts = list(prompts)
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.num_shots = num_shots  # what the prompts were built with, for the report
        self.model = model
        self.watcher = watcher
        # Settle on KV events only where the connector announces its CPU stores (vLLM 0.26's Simple one
        # does not): otherwise on /metrics, or a few engine steps when nothing is exported.
        self.store_events = store_events and watcher is not None
        self.settle_timeout = settle_timeout
        self.barrier_timeout = barrier_timeout
        self.request_timeout = request_timeout
        self.progress = progress
        self.client = DevClient(base_url, timeout=120.0, model=model)
        self._store_mark: float | None = None

    def close(self) -> None:
        self.client.close()

    def version(self) -> VersionInfo:
        return self.client.version()

    def metrics(self) -> MetricsSnapshot:
        return self.client.metrics()

    def run_gsm8k(self, label: str, concurrency: int | None = None) -> GSM8KResult:
        return asyncio.run(self._run(concurrency if concurrency is not None else self.concurrency))

    async def _run(self, concurrency: int | None) -> GSM8KResult:
        from vllm_devclient.client import AsyncDevClient

        async with AsyncDevClient(self.base_url, timeout=self.request_timeout, model=self.model) as client:
            return await evaluate_gsm8k_async(
                client=client,
                prompts=self.prompts,
                concurrency=concurrency,
                max_tokens=self.max_tokens,
                num_shots=self.num_shots,
                model=self.model,
                request_timeout=self.request_timeout,
                progress=self.progress,
            )

    def step_engine(self) -> None:
        self.client.step_engine()

    def cpu_blocks_stored(self) -> int | None:
        return None if self.watcher is None else self.watcher.cpu_blocks()

    def events(self) -> GroupEventAccount | None:
        return None if self.watcher is None else self.watcher.drain()

    def _store_progress(self) -> float | None:
        if self.store_events and self.watcher is not None:
            return float(self.watcher.cpu_blocks())
        return self.metrics().gpu_to_cpu_bytes

    def mark_stores(self) -> None:
        self._store_mark = self._store_progress()

    def settle_stores(self) -> SettleResult:
        return settle(
            self._store_progress,
            self.step_engine,
            method="kv_events" if self.store_events else "metrics",
            timeout=self.settle_timeout,
            baseline=self._store_mark,
        )

    def reset_prefix_cache(self, reset_external: bool) -> BarrierResult:
        return self.client.reset_prefix_cache_until_success(
            deadline=self.barrier_timeout, reset_external=reset_external
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
    """The :class:`ServerConfig` for a case: the profile's flags (upstream's, which already hold
    ``--enforce-eager``, ``--max-model-len`` and ``--enable-prefix-caching``), overridable."""
    p = case.profile
    args = (*p.server_args, *extra_args)
    offloading = case.connector == "OffloadingConnector"
    extra = dict(case.connector_extra)
    if case.self_describing_events and offloading:
        extra.setdefault("self_describing_kv_events", True)
    return ServerConfig(
        model=model or resolve_model(p),
        served_model_name=served_model_name or p.served_model_name,
        connector=case.connector,
        cpu_gib=cpu_gib if cpu_gib is not None else case.settings.cpu_gib,
        offload_block_size=(offload_block_size if offload_block_size is not None else p.offload_block_size)
        if offloading
        else None,
        spec_name=case.settings.spec_name if offloading else None,
        connector_extra=extra,
        kv_events=kv_events,
        frontend=case.frontend,
        enforce_eager="--enforce-eager" not in args,
        max_model_len=None if "--max-model-len" in args else 4096,
        enable_prefix_caching="--enable-prefix-caching" not in args,
        extra_args=args,
        env={**p.env, **case.env, **(env or {})},
        startup_timeout=startup_timeout if startup_timeout is not None else p.startup_timeout,
        log_path=log_path,
    )


def _gpu_name() -> str | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = sorted({line.strip() for line in out.splitlines() if line.strip()})
    return ", ".join(names) or None


def run_case(
    case: CheckCase,
    *,
    report_dir: str | os.PathLike[str] | None = None,
    num_questions: int | None = None,
    concurrency: int | None = 1,
    max_tokens: int | None = None,
    accuracy_threshold: float | Literal["profile"] | None = "profile",
    use_kv_events: bool = True,
    kv_events_bind: Literal["subscriber", "publisher"] = "subscriber",
    gsm8k_dir: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    warm_run: bool = True,
    second_cold_run: bool = True,
    agreement_concurrencies: Sequence[int] = (),
    **server_overrides: Any,
) -> OffloadCheckReport:
    """Start the server for ``case`` once, run the check on it, stop it, write ``{case.id}.json``.

    KV events are on for both connectors (only the OffloadingConnector announces CPU stores, and only its
    stores are required). ``server_overrides`` go to :func:`server_config_for`.
    """
    p = case.profile
    n = num_questions if num_questions is not None else p.num_questions
    threshold = case.settings.threshold if accuracy_threshold == "profile" else accuracy_threshold
    train, test = load_gsm8k(data_dir=gsm8k_dir)
    prompts = build_prompts(train, test, n, p.num_shots)
    out_dir = Path(report_dir) if report_dir is not None else None
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        server_overrides.setdefault("log_path", out_dir / f"{case.id}.server.log")
    watcher: EventWatcher | None = None
    kv_settings: KVEventsSettings | None = None
    if use_kv_events:
        kv_settings = KVEventsSettings.on_free_port(bind=kv_events_bind)
        # The subscriber is up before the server starts, so no early event is missed.
        watcher = open_event_watcher(kv_settings, self_describing=case.self_describing_events)
    config = server_config_for(case, kv_events=kv_settings, **server_overrides)
    settings = CheckSettings(
        accuracy_threshold=threshold,
        tolerance=p.tolerance,
        expect_cpu_store_events=use_kv_events and case.connector == "OffloadingConnector",
        expected_frontend=case.frontend,
        warm_run=warm_run,
        second_cold_run=second_cold_run,
        agreement_concurrencies=tuple(agreement_concurrencies),
    )
    report_fields: dict[str, Any] = {
        "model": config.model,
        "gpus": gpu_count(),
        "gpus_used": p.gpus,
        "gpu_name": _gpu_name(),
        "server_env": {k: v for k, v in config.env.items() if k.startswith("VLLM_")},
    }
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    try:
        with VllmServer(config) as server:
            timings["server_startup_s"] = time.monotonic() - t0
            report_fields["server_args"] = server.command[len(config.launcher) :]
            io = ServerIO(
                server.base_url,
                prompts,
                concurrency=concurrency,
                max_tokens=max_tokens if max_tokens is not None else p.max_tokens,
                num_shots=p.num_shots,
                model=config.served_model_name,
                watcher=watcher,
                store_events=settings.expect_cpu_store_events,
                progress=progress,
            )
            try:
                report = run_check(
                    io,
                    settings,
                    case=case,
                    num_questions=n,
                    concurrency=concurrency,
                    extra_timings=timings,
                    report_fields=report_fields,
                )
            finally:
                io.close()
    except Exception as exc:  # the server never came up: an error report, not a crash of the matrix
        timings["server_startup_s"] = time.monotonic() - t0
        report = OffloadCheckReport(
            **_case_fields(case),
            num_questions=n,
            concurrency=concurrency,
            accuracy_threshold=threshold,
            tolerance=p.tolerance,
            status="error",
            error=f"{type(exc).__name__}: {exc}"[-4000:],
            timings={k: round(v, 3) for k, v in timings.items()},
            **report_fields,
        )
    finally:
        if watcher is not None:
            watcher.close()
    timings["case_s"] = time.monotonic() - t0
    report = report.model_copy(update={"timings": {**report.timings, "case_s": round(timings["case_s"], 3)}})
    if out_dir is not None:
        (out_dir / f"{case.id}.json").write_text(report.model_dump_json(indent=2) + "\n")
    return report
