"""vllm_devclient.offload_check on the CPU: sequencing, metrics deltas, the three assertions, the report.

`FakeServer` behaves like a vLLM server with a CPU-offloading connector (GPU prefix cache, CPU tier,
counters on /metrics in either exposition format, CPU stores announced on KV events), with switches for
the ways things go wrong: no reload, loads in a cold run, corrupted reloads, noisy greedy decoding, a
frontend without offload metrics. Its /metrics bodies go through the real parser.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import pytest
import zmq

from vllm_devclient import DevClient
from vllm_devclient.errors import InvalidParameterError
from vllm_devclient.kv_events import AllBlocksCleared, BlockStored
from vllm_devclient.metrics import MetricsSnapshot, parse_metrics
from vllm_devclient.models import BarrierResult, VersionInfo
from vllm_devclient.offload_check import (
    PROFILES,
    CheckCase,
    CheckSettings,
    GroupEventAccount,
    OffloadCheckReport,
    ServerIO,
    SettleResult,
    case_skip_reason,
    compare_answers,
    main,
    matrix,
    model_available,
    open_event_watcher,
    run_case,
    run_check,
    settle,
)
from vllm_devclient.offload_check.gsm8k import GSM8KResult, QuestionResult, build_prompts, load_gsm8k
from vllm_devclient.offload_check.server import KVEventsSettings
from vllm_devclient.testing.engine import ScriptedEngine
from vllm_devclient.testing.frontends import RustFrontend

from .conftest import GSM8K_DIR

N = 8
# The client accepts a base URL ending in /v1 (it drops the /v1) from the lead's client rewrite on.
CLIENT_DROPS_V1 = not DevClient("http://x/v1").base_url.endswith("/v1")


@dataclass
class FakeServer:
    """A vLLM server with an offloading connector, reduced to what the check can observe."""

    frontend: str = "python"
    offload_metrics: bool = True  # the Rust frontend exports no kv_offload_* metrics
    external_metrics: bool = True
    stream: bool = True  # a KV-events stream (the OffloadingConnector announces its CPU stores)
    reload_works: bool = True  # False: the connector never loads (offloading silently skipped)
    load_in_cold: bool = False  # a cold run that loads from CPU (stale CPU tier)
    warm_loads_last_block: bool = False  # OffloadingConnector: a block-aligned prompt's last block
    corrupt: set[int] = field(default_factory=set)  # questions whose reloaded KV comes back wrong
    noise: dict[str, set[int]] = field(default_factory=dict)  # run label -> questions decoded differently
    restart_before_cold2: bool = False
    split_sensitive: set[int] = field(
        default_factory=set
    )  # greedy text changes when only the tail is computed
    accuracy: dict[str, int] = field(default_factory=dict)  # run label -> number of correct answers
    fail: dict[str, set[int]] = field(default_factory=dict)  # run label -> questions whose request failed
    groups: dict[int, str] = field(default_factory=lambda: {0: "full_attention"})  # GPU groups and kinds
    cpu_groups: set[int] | None = None  # groups the connector stores (None: all of them)
    clears_on_reset: bool = True
    raise_in: str | None = None  # a run label whose call raises (server died)

    def __post_init__(self) -> None:
        self.gpu: set[int] = set()
        self.cpu: set[int] = set()
        self.c = dict.fromkeys(("queries", "hits", "ext_queries", "ext_hits", "load", "store"), 0)
        self.pending_events = 0
        self.cpu_blocks_seen = 0
        self.calls: list[str] = []
        self.now = 100.0
        self.account = GroupEventAccount()

    # -- CheckIO
    def version(self) -> VersionInfo:
        self.calls.append("version")
        return VersionInfo(
            version="0.26.0", rust_frontend_version="0.1.0" if self.frontend == "rust" else None
        )

    def metrics(self) -> MetricsSnapshot:
        self.calls.append("metrics")
        self.now += 1
        return parse_metrics(self.body(), self.content_type(), taken_at=self.now)

    def run_gsm8k(self, label: str, concurrency: int | None = None) -> GSM8KResult:
        self.calls.append(f"run:{label}")
        if label == self.raise_in:
            raise ConnectionError("server went away")
        if label == "cold2" and self.restart_before_cold2:
            self.c = dict.fromkeys(self.c, 0)
        questions = []
        for i in range(N):
            tokens = 1000
            self.c["queries"] += tokens
            loaded = False
            tail_only = i in self.gpu
            if i in self.gpu:
                self.c["hits"] += tokens
                if self.warm_loads_last_block and i == 0:
                    self.c["ext_hits"] += 16
                    self.c["load"] += 256
            else:
                self.c["ext_queries"] += tokens
                if (i in self.cpu and self.reload_works) or (self.load_in_cold and label != "reload"):
                    self.c["ext_hits"] += tokens
                    self.c["load"] += 4096
                    loaded = tail_only = True
                if i not in self.cpu:
                    self.cpu.add(i)
                    self.c["store"] += 4096
                    self.pending_events += 2
                    self._gpu_stores(i)
            self.gpu.add(i)
            text = f" The answer is {i}."
            if tail_only and i in self.split_sensitive:
                text = f" The answer is {i}, computed from the cached prefix."
            if loaded and i in self.corrupt:
                text = " !!!!!!!!"
            if i in self.noise.get(label, set()):
                text = f" The answer is {i} (decoded differently)."
            correct = i < self.accuracy.get(label, 0)
            failed = i in self.fail.get(label, set())
            if failed:
                questions.append(
                    QuestionResult(
                        index=i,
                        label=-1,
                        text="",
                        prediction=None,
                        correct=False,
                        output_tokens=0,
                        latency_s=0.1,
                        error="InternalServerError: 500",
                    )
                )
                continue
            questions.append(
                QuestionResult(
                    index=i,
                    label=i if correct else -1,
                    text=text,
                    prediction=i,
                    correct=correct,
                    output_tokens=5,
                    latency_s=0.1,
                )
            )
        n_ok = sum(q.correct for q in questions)
        n_failed = sum(q.error is not None for q in questions)
        return GSM8KResult(
            failed_requests=n_failed,
            num_questions=N,
            num_shots=5,
            max_tokens=256,
            concurrency=1,
            accuracy=n_ok / N,
            invalid_rate=n_failed / N,
            latency_s=0.8,
            questions_per_s=N / 0.8,
            output_tokens=5 * N,
            output_tokens_per_s=5 * N / 0.8,
            mean_request_latency_s=0.1,
            questions=questions,
        )

    def _gpu_stores(self, i: int) -> None:
        for group, kind in self.groups.items():
            self.account.add(
                [
                    BlockStored(
                        block_hashes=[i * 100 + group],
                        medium="GPU",
                        group_idx=group,
                        kv_cache_spec_kind=kind,
                        block_size=16,
                        token_ids=[1] * 16,
                    )
                ]
            )

    def step_engine(self) -> None:
        self.calls.append("step")

    def mark_stores(self) -> None:
        self.calls.append("mark")

    def settle_stores(self) -> SettleResult:
        self.calls.append("settle")
        if self.stream:
            for k in range(self.pending_events):
                group = sorted(self.groups)[k % len(self.groups)]
                if self.cpu_groups is None or group in self.cpu_groups:
                    self.account.add(
                        [
                            BlockStored(
                                block_hashes=[10_000 + self.cpu_blocks_seen + k],
                                medium="CPU",
                                group_idx=group,
                            )
                        ]
                    )
        self.cpu_blocks_seen += self.pending_events
        self.pending_events = 0
        return SettleResult(method="kv_events" if self.stream else "metrics", seconds=0.5, engine_steps=3)

    def reset_prefix_cache(self, reset_external: bool) -> BarrierResult:
        self.calls.append(f"reset:{'all' if reset_external else 'gpu'}")
        self.gpu.clear()
        if self.clears_on_reset:
            self.account.add([AllBlocksCleared()])
        if reset_external:
            self.cpu.clear()
        return BarrierResult(attempts=2, engine_steps=1, elapsed_s=0.05)

    def events(self) -> GroupEventAccount | None:
        return self.account if self.stream else None

    def cpu_blocks_stored(self) -> int | None:
        return self.cpu_blocks_seen if self.stream else None

    # -- /metrics, as each frontend writes it
    def content_type(self) -> str:
        return "application/openmetrics-text; version=1.0.0" if self.frontend == "rust" else "text/plain"

    def body(self) -> str:
        counters = {"vllm:prefix_cache_queries": self.c["queries"], "vllm:prefix_cache_hits": self.c["hits"]}
        if self.external_metrics:
            counters["vllm:external_prefix_cache_queries"] = self.c["ext_queries"]
            counters["vllm:external_prefix_cache_hits"] = self.c["ext_hits"]
        if self.offload_metrics and self.frontend == "python":
            counters["vllm:kv_offload_load_bytes"] = self.c["load"]
            counters["vllm:kv_offload_store_bytes"] = self.c["store"]
        lines = []
        for name, value in counters.items():
            lines += [f"# TYPE {name} counter", f'{name}_total{{model_name="m",engine="0"}} {value}']
        if self.frontend == "rust":
            lines.append("# EOF")
        return "\n".join(lines) + "\n"


def check(server: FakeServer, **settings: object) -> OffloadCheckReport:
    defaults: dict[str, object] = {
        "expect_cpu_store_events": server.stream,
        "expected_frontend": server.frontend,
    }
    defaults.update(settings)
    return run_check(server, CheckSettings(**defaults), num_questions=N)  # type: ignore[arg-type]


# ---- sequencing and the healthy path ---------------------------------------------------------------------


def test_sequence_is_cold_settle_reset_reload_reset_cold() -> None:
    server = FakeServer()
    check(server)
    order = [c for c in server.calls if c != "metrics"]
    assert order == [
        "version",
        "mark",  # store progress before the cold run: the settle waits for growth past it
        "run:cold",
        "run:warm",  # same prompts from the GPU prefix cache: the reference with the reload's prefill split
        "settle",
        "reset:gpu",
        "run:reload",
        "step",  # flushes the connector stats into /metrics before the reload window closes
        "reset:all",
        "step",  # the reset's events go out with the next engine step
        "mark",
        "run:cold2",
        "settle",
    ]
    # each window is bracketed by snapshots
    assert server.calls.count("metrics") == 7


def test_healthy_offloading_passes_with_the_numbers() -> None:
    report = check(FakeServer())
    assert report.passed, report.summary()
    reload, cold, cold2 = report.windows["reload"], report.windows["cold"], report.windows["cold2"]
    assert reload.external_prefix_cache_hits == N * 1000
    assert reload.cpu_to_gpu_bytes == N * 4096
    assert cold.external_prefix_cache_hits == 0 and cold.cpu_to_gpu_bytes == 0
    assert cold2.external_prefix_cache_hits == 0 and cold2.cpu_to_gpu_bytes == 0
    assert cold.gpu_to_cpu_bytes == N * 4096  # stores happen in the cold run
    warm = report.windows["warm"]
    assert warm.prefix_cache_hits == N * 1000 and warm.external_prefix_cache_hits == 0
    assert report.reload_vs_warm is not None and report.reload_vs_warm.matches == N
    assert report.cpu_blocks_stored == {"cold": 2 * N, "cold2": 2 * N}
    assert report.reload_vs_cold.matches == N and report.noise_floor.matches == N
    assert report.assertion("accuracy_held").skipped
    assert report.vllm_version == "0.26.0" and report.frontend_observed == "python"
    assert report.barriers["gpu_only"].attempts == 2
    assert set(report.timings) >= {"cold_run_s", "reload_run_s", "cold2_run_s", "settle_cold_s", "check_s"}
    assert report.kv_events is True


def test_rust_frontend_without_offload_metrics_still_proves_the_reload() -> None:
    report = check(FakeServer(frontend="rust"))
    assert report.passed, report.summary()
    assert report.windows["reload"].cpu_to_gpu_bytes is None
    assert "not exported" in report.assertion("reload_proven").message
    assert report.rust_frontend_version == "0.1.0"


def test_simple_connector_without_events() -> None:
    report = check(FakeServer(stream=False))
    assert report.passed, report.summary()
    assert report.cpu_blocks_stored == {"cold": None, "cold2": None}
    assert report.kv_events is False


# ---- assertion 1: the reload happened --------------------------------------------------------------------


def test_loads_in_the_warm_run_are_reported_not_failed() -> None:
    # Seen on vLLM 0.26 with the OffloadingConnector: +32 tokens from the CPU tier during the warm run.
    report = check(FakeServer(warm_loads_last_block=True))
    assert report.windows["warm"].external_prefix_cache_hits == 16
    assert report.passed, report.summary()


def test_no_reload_fails() -> None:
    report = check(FakeServer(reload_works=False))
    first = report.assertion("reload_proven")
    assert not first.passed and "did not grow in the reload run" in first.message
    assert not report.passed


def test_missing_external_counter_cannot_prove_anything() -> None:
    report = check(FakeServer(external_metrics=False))
    assert "cannot be proven" in report.assertion("reload_proven").message
    assert not report.passed


def test_loads_during_a_cold_run_fail() -> None:
    report = check(FakeServer(load_in_cold=True))
    message = report.assertion("reload_proven").message
    assert "grew in the cold run" in message and not report.passed


def test_no_cpu_store_events_fail_when_expected() -> None:
    server = FakeServer()
    server.settle_stores = lambda: SettleResult(
        method="kv_events", seconds=180, engine_steps=900, timed_out=True
    )  # type: ignore[method-assign]
    report = check(server)
    assert "no CPU-tier BlockStored events" in report.assertion("reload_proven").message


def test_restart_between_windows_fails() -> None:
    report = check(FakeServer(restart_before_cold2=True))
    assert "restarted" in report.assertion("reload_proven").message


# ---- assertion 2: answers unchanged, against the noise floor ---------------------------------------------


def test_corrupted_reload_fails_answers_unchanged_only() -> None:
    report = check(FakeServer(corrupt={1, 5}))
    assert report.assertion("reload_proven").passed
    second = report.assertion("answers_unchanged")
    assert not second.passed
    assert report.reload_vs_cold.mismatched == [1, 5]
    assert report.reload_vs_cold.matches == N - 2 and report.noise_floor.matches == N
    assert "[1, 5]" in second.message
    assert [m.index for m in report.mismatch_examples] == [1, 5]
    assert report.mismatch_examples[0].other == " !!!!!!!!"


def test_reload_as_good_as_the_noise_floor_passes() -> None:
    report = check(FakeServer(noise={"reload": {2}, "cold2": {3, 4}}))
    assert report.assertion("answers_unchanged").passed
    assert (report.reload_vs_cold.matches, report.noise_floor.matches) == (N - 1, N - 2)


def test_prefill_split_changes_are_judged_against_the_warm_run() -> None:
    # Recomputing only the tail changes greedy text for some prompts; the reload reproduces the warm run.
    report = check(FakeServer(split_sensitive={0, 3, 6}))
    assert report.reload_vs_cold.mismatched == [0, 3, 6]
    assert report.warm_vs_cold is not None and report.warm_vs_cold.mismatched == [0, 3, 6]
    assert report.reload_vs_warm is not None and report.reload_vs_warm.matches == N
    second = report.assertion("answers_unchanged")
    assert second.passed and "reference: warm run" in second.message
    # ...and a corruption still shows against both references
    bad = check(FakeServer(split_sensitive={0, 3, 6}, corrupt={5}))
    assert not bad.assertion("answers_unchanged").passed


def test_without_the_warm_run_the_cold_run_is_the_only_reference() -> None:
    server = FakeServer(split_sensitive={0})
    report = check(server, warm_run=False)
    assert "run:warm" not in server.calls and "warm" not in report.windows
    assert report.reload_vs_warm is None
    assert not report.assertion("answers_unchanged").passed


def test_reload_worse_than_the_noise_floor_fails() -> None:
    report = check(FakeServer(noise={"reload": {2, 3}, "cold2": {4}}))
    assert not report.assertion("answers_unchanged").passed


def test_compare_answers_needs_the_same_questions() -> None:
    a = FakeServer().run_gsm8k("cold")
    b = a.model_copy(update={"questions": a.questions[:-1]})
    with pytest.raises(InvalidParameterError):
        compare_answers(a, b)
    assert compare_answers(a, a).rate == 1.0


# ---- assertion 3: accuracy held --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cold", "reload", "passed"),
    [(4, 4, True), (4, 3, False), (3, 4, False)],  # threshold 0.55 - 0.05 = 0.5 = 4/8
)
def test_accuracy_threshold_with_tolerance(cold: int, reload: int, passed: bool) -> None:
    report = check(FakeServer(accuracy={"cold": cold, "reload": reload}), accuracy_threshold=0.55)
    result = report.assertion("accuracy_held")
    assert result.passed is passed and not result.skipped
    assert "0.500" in result.message


def test_wrong_frontend_is_reported() -> None:
    report = check(FakeServer(frontend="python"), expected_frontend="rust")
    assert not report.assertion("frontend").passed and not report.passed


def test_report_json_and_summary() -> None:
    report = check(FakeServer(corrupt={0}))
    data = json.loads(report.model_dump_json())
    assert data["windows"]["reload"]["external_prefix_cache_hits"] == N * 1000
    assert data["passed"] is False
    assert data["runs"]["cold"]["predictions"] == list(range(N))
    again = OffloadCheckReport.model_validate_json(report.model_dump_json())
    assert again == report
    text = report.summary()
    assert "FAILED" in text and f"+{N * 1000} tokens" in text and "[FAIL] answers_unchanged" in text


# ---- settle ----------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def test_settle_waits_for_growth_then_quiet() -> None:
    clock = Clock()
    values = iter([0, 0, 0, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8])
    steps: list[float] = []
    result = settle(
        lambda: next(values),
        lambda: steps.append(clock.t),
        method="kv_events",
        quiet_s=1.0,
        clock=clock,
        sleep=clock.sleep,
        poll_s=0.25,
    )
    assert not result.timed_out
    assert result.start_value == 0 and result.end_value == 8
    assert result.engine_steps == len(steps) >= 3
    assert result.seconds >= 1.0


def test_settle_counts_growth_from_the_baseline() -> None:
    # The stores were announced during the run already: the value does not move during the wait itself.
    clock = Clock()
    result = settle(lambda: 12, lambda: None, method="kv_events", baseline=0, clock=clock, sleep=clock.sleep)
    assert not result.timed_out and result.seconds < 5
    stuck = settle(
        lambda: 12, lambda: None, method="kv_events", baseline=12, timeout=2, clock=clock, sleep=clock.sleep
    )
    assert stuck.timed_out


def test_settle_times_out_without_growth() -> None:
    clock = Clock()
    result = settle(lambda: 5, lambda: None, method="metrics", timeout=3.0, clock=clock, sleep=clock.sleep)
    assert result.timed_out and result.end_value == 5 and result.seconds >= 3.0


def test_settle_without_growth_expected() -> None:
    clock = Clock()
    result = settle(
        lambda: 5, lambda: None, method="metrics", expect_growth=False, clock=clock, sleep=clock.sleep
    )
    assert not result.timed_out and result.engine_steps >= 3


def test_settle_with_nothing_to_watch_just_steps() -> None:
    steps: list[int] = []
    result = settle(lambda: None, lambda: steps.append(1), method="metrics", min_steps=3)
    assert result.method == "steps" and len(steps) == 3


# ---- the matrix ------------------------------------------------------------------------------------------


def test_matrix_covers_every_profile_connector_and_frontend() -> None:
    cases = matrix()
    real = [p for p in PROFILES.values() if not p.tiny]
    assert len(cases) == sum(len(p.connectors) for p in real) * 2
    assert len({c.id for c in cases}) == len(cases)
    # DeepSeek-V2-Lite (TieringOffloadingSpec) has no SimpleCPUOffloadConnector case upstream.
    assert not any(
        c.profile.name.startswith("deepseek-v2") and c.connector != "OffloadingConnector" for c in cases
    )
    assert PROFILES["qwen3.5-35b"].gpus == 2 and PROFILES["deepseek-v4-flash"].gpus == 4
    assert "--tensor-parallel-size" in PROFILES["deepseek-v4-flash"].server_args
    assert [c.id for c in matrix(["small"])] == [
        "small-offloading-python",
        "small-offloading-rust",
        "small-simple-python",
        "small-simple-rust",
    ]
    tiny = matrix([n for n, p in PROFILES.items() if p.tiny])
    assert {c.profile.family for c in tiny} >= {"llama", "gemma3", "gemma4", "nemotron-h", "qwen3-next"}
    with pytest.raises(InvalidParameterError):
        matrix(["gpt-5"])


def test_skip_reasons() -> None:
    ds = CheckCase(PROFILES["deepseek-v4-flash"], "OffloadingConnector", "python")
    reason = case_skip_reason(ds, gpu_count=1, model_available=True)
    assert reason is not None and "needs 4 GPUs" in reason and "has 1" in reason
    small = CheckCase(PROFILES["small"], "SimpleCPUOffloadConnector", "rust")
    assert case_skip_reason(small, gpu_count=1, model_available=True) is None
    assert "not available offline" in (case_skip_reason(small, gpu_count=8, model_available=False) or "")
    mutation = CheckCase(PROFILES["small"], "OffloadingConnector", "python", label="mutation")
    assert mutation.id == "small-offloading-python-mutation"


def test_model_availability(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert model_available(str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert not model_available("nobody/no-such-model")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert model_available("nobody/no-such-model")  # online it would be downloaded


def test_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--frontend", "go"]) == 2
    assert "unknown frontend" in capsys.readouterr().err
    assert main(["--connector", "lmcache"]) == 2
    assert "unknown connector" in capsys.readouterr().err


def test_cli_runs_the_requested_cases(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, dict[str, object]]] = []

    def fake_run_case(case: CheckCase, **kw: object) -> OffloadCheckReport:
        seen.append((case.id, kw))
        if "--fast" in str(kw) or kw.get("warm_run") is False:
            assert case.env == {"VLLM_BATCH_INVARIANT": "1"}
        server = FakeServer(frontend=case.frontend, corrupt={0} if case.frontend == "rust" else set())
        return run_check(server, CheckSettings(expected_frontend=case.frontend), case=case)

    monkeypatch.setattr("vllm_devclient.offload_check.check.run_case", fake_run_case)
    code = main(
        [
            "--model", "/models/smol", "--connector", "offloading,simple", "--frontend", "python,rust",
            "--num-questions", "24", "--server-arg", "--dtype bfloat16", "--cpu-gib", "2",
        ]
    )  # fmt: skip
    assert code == 1  # the rust cases fail (corrupted), so the run fails
    assert [s[0] for s in seen] == [
        "small-offloading-python",
        "small-offloading-rust",
        "small-simple-python",
        "small-simple-rust",
    ]
    kw = seen[0][1]
    assert kw["num_questions"] == 24 and kw["extra_args"] == ["--dtype", "bfloat16"] and kw["cpu_gib"] == 2
    assert kw["concurrency"] == 1 and kw["warm_run"] is True and kw["second_cold_run"] is True
    out = capsys.readouterr().out
    assert "small-offloading-python: PASSED" in out and "small-offloading-rust: FAILED" in out
    seen.clear()
    assert (
        main(["--fast", "--concurrency", "0", "--agreement", "1,8", "--env", "VLLM_BATCH_INVARIANT=1"]) == 0
    )
    kw = seen[0][1]
    assert kw["warm_run"] is False and kw["second_cold_run"] is False
    assert kw["concurrency"] is None and kw["agreement_concurrencies"] == [1, 8]


# ---- the real I/O: ServerIO against the real Rust frontend, a KV-events watcher over real ZMQ ------------


@pytest.fixture(scope="module")
def frontend() -> Iterator[RustFrontend]:
    with RustFrontend(engine=ScriptedEngine(token_ids=(19, 26), max_model_len=4096)) as fe:
        yield fe


def test_server_io_drives_a_real_frontend_and_refuses_an_unproven_reload(frontend: RustFrontend) -> None:
    train, test = load_gsm8k(data_dir=GSM8K_DIR)
    io = ServerIO(
        frontend.base_url, build_prompts(train, test, 3), max_tokens=2, concurrency=1, progress=False
    )
    try:
        report = run_check(io, CheckSettings(expected_frontend="rust"), num_questions=3)
    finally:
        io.close()
    assert report.frontend_observed == "rust" and report.vllm_version
    assert report.runs["cold"].num_questions == 3
    assert report.reload_vs_cold is not None and report.noise_floor is not None
    assert report.reload_vs_cold.matches == 3 == report.noise_floor.matches  # scripted engine: same text
    assert report.settle["cold"].method == "steps"  # nothing to watch: vllm-rs exports no offload bytes
    # args = (reset_running_requests, reset_external): the GPU-only barrier first, then the full one.
    resets = [c.args for c in frontend.engine.calls_for("reset_prefix_cache")]
    assert resets[-2:] == [(False, False), (False, True)]
    # No connector loaded anything, and the check says so instead of passing.
    assert report.windows["reload"].external_prefix_cache_hits == 0
    assert not report.assertion("reload_proven").passed
    assert report.assertion("answers_unchanged").passed
    assert frontend.engine.requests_added >= 9


def _cpu_store_batch(hashes: list[int]) -> bytes:
    event = {
        "type": "BlockStored",
        "block_hashes": hashes,
        "parent_block_hash": None,
        "token_ids": [],
        "block_size": 0,
        "lora_id": None,
        "medium": "CPU",
        "lora_name": None,
    }
    return msgspec.msgpack.encode([time.time(), [event], None])


@pytest.mark.parametrize("bind", ["subscriber", "publisher"])
def test_event_watcher_counts_cpu_blocks_over_real_zmq(bind: str) -> None:
    settings = KVEventsSettings.on_free_port(bind=bind, topic="kv-events")  # type: ignore[arg-type]
    endpoint = settings.server_config()["endpoint"]
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    watcher = None
    try:
        if settings.subscriber_binds:
            watcher = open_event_watcher(settings)
            pub.connect(endpoint)
        else:
            pub.bind(endpoint)
            watcher = open_event_watcher(settings)
        deadline = time.monotonic() + 10
        seq = 0
        while watcher.cpu_blocks() == 0 and time.monotonic() < deadline:
            pub.send_multipart(
                [b"kv-events", seq.to_bytes(8, "big"), _cpu_store_batch([seq * 10 + 1, seq * 10 + 2])]
            )
            seq += 1
            time.sleep(0.05)
        assert watcher.cpu_blocks() >= 2
        assert watcher.cpu_blocks() % 2 == 0
        assert watcher.drain().summary().cpu_stored_groups == []  # these old-style events name no group
    finally:
        if watcher is not None:
            watcher.close()
        pub.close(linger=0)
        ctx.term()


def test_run_case_wires_server_check_and_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run_case end to end, with the real Rust frontend standing in for `vllm serve`."""
    configs = []

    class StandIn:
        def __init__(self, config: object) -> None:
            configs.append(config)

        def __enter__(self) -> StandIn:
            self.fe = RustFrontend(engine=ScriptedEngine(token_ids=(19, 26), max_model_len=4096)).start()
            # A base URL ending in /v1 is passed through to the client (which drops the /v1).
            self.base_url = self.fe.base_url + ("/v1" if CLIENT_DROPS_V1 else "")
            self.command = ["python", "-m", "vllm.entrypoints.cli.main", "serve", "m", "--port", "1"]
            return self

        def __exit__(self, *exc: object) -> None:
            self.fe.stop()

    monkeypatch.setattr("vllm_devclient.offload_check.check.VllmServer", StandIn)
    monkeypatch.setenv("VLLM_DEVCLIENT_GSM8K_DIR", str(GSM8K_DIR))
    case = CheckCase(PROFILES["small"], "SimpleCPUOffloadConnector", "rust")
    report = run_case(
        case,
        report_dir=tmp_path,
        num_questions=2,
        max_tokens=2,
        progress=False,
        extra_args=["--dtype", "half"],
    )
    (config,) = configs
    assert config.connector == "SimpleCPUOffloadConnector" and config.frontend == "rust"
    assert config.offload_block_size is None and config.spec_name is None  # OffloadingConnector settings
    assert config.kv_events is not None  # events on for the Simple connector too (GPU events, resets)
    assert list(config.extra_args)[-2:] == ["--dtype", "half"]
    assert "--no-disable-hybrid-kv-cache-manager" in config.extra_args  # upstream's flags
    assert not config.enforce_eager and config.max_model_len is None  # ...given once, by the profile
    assert config.log_path == tmp_path / "small-simple-rust.server.log"
    saved = OffloadCheckReport.model_validate_json((tmp_path / "small-simple-rust.json").read_text())
    assert saved == report
    assert report.case_id == "small-simple-rust" and report.num_questions == 2
    assert report.num_shots == PROFILES["small"].num_shots == 6  # what the prompts were built with
    assert report.connector == "SimpleCPUOffloadConnector" and report.frontend_observed == "rust"
    assert report.status == "failed"  # nothing was offloaded by the scripted engine, and the check says so
    assert report.family == "llama" and report.architectures == ["LlamaForCausalLM"]
    assert report.gpus == 0 and report.gpus_used == 1 and report.server_args[:2] == ["serve", "m"]
    assert report.timings["server_startup_s"] >= 0 and report.timings["case_s"] >= report.timings["check_s"]
    assert (
        report.events is not None and report.reset_visible is False
    )  # the scripted engine publishes nothing
