"""The command line's logic, in-process (click's CliRunner + respx). The real binary against real frontends is
in contract_tests/test_cli_live.py."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from click.testing import CliRunner, Result

from vllm_devclient import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BarrierTimeoutError,
    DevModeDisabledError,
    EngineCallError,
    InvalidParameterError,
    PermissionDeniedError,
    WaitTimeoutError,
)
from vllm_devclient.cli import ExitCode, cli, combine, exit_code_for
from vllm_devclient.fleet import CLIENT_METHODS

A, B, C = "http://a.test", "http://b.test", "http://c.test"


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    base_env = {"VLLM_DEVCLIENT_URL": "", "VLLM_API_KEY": ""}
    return CliRunner().invoke(cli, list(args), env={**base_env, **(env or {})}, catch_exceptions=False)


def doc(result: Result) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.fixture
def mock() -> respx.MockRouter:
    with respx.mock(assert_all_called=False) as router:
        yield router


def _status(cls: type[Any], status: int, path: str = "/x") -> Any:
    return cls("m", status_code=status, method="POST", path=path, body="", frontend="rust")


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (APIConnectionError("x", method="GET", url="u"), ExitCode.CONNECTION),
        (APITimeoutError("x", method="GET", url="u"), ExitCode.CONNECTION),
        (WaitTimeoutError("x", waited_s=1.0), ExitCode.DEADLINE),
        (BarrierTimeoutError("x", waited_s=1.0, attempts=3, engine_steps=2, last=None), ExitCode.DEADLINE),
        (_status(DevModeDisabledError, 404), ExitCode.DEV_MODE),
        (_status(AuthenticationError, 401), ExitCode.AUTH),
        (_status(PermissionDeniedError, 403), ExitCode.AUTH),
        (InvalidParameterError("x"), ExitCode.USAGE),
        (
            EngineCallError(
                "x",
                engine_method="m",
                engine_message="b",
                status_code=500,
                method="POST",
                path="/x",
                body="",
                frontend="rust",
            ),
            ExitCode.FAILED,
        ),
        (RuntimeError("anything else"), ExitCode.FAILED),
    ],
)
def test_exit_code_for_each_error_kind(error: BaseException, code: ExitCode) -> None:
    assert exit_code_for(error) is code


def test_combined_exit_code_is_the_shared_kind_or_one() -> None:
    assert combine([0, 0]) == 0
    assert combine([0, 3, 3]) == 3
    assert combine([5, 0]) == 5
    assert combine([3, 5]) == 1
    assert combine([4, 1]) == 1


def test_help_documents_the_exit_codes_and_never_shows_the_key() -> None:
    result = invoke("--help", env={"VLLM_API_KEY": "sk-very-secret"})
    assert result.exit_code == 0
    for line in ("0  every target succeeded", "3  a target could not be reached", "5  dev mode is off"):
        assert line in result.stdout
    assert "sk-very-secret" not in result.output
    sub = invoke("barrier", "--help")
    assert "4  a barrier / wait-* / kv-events deadline passed" in sub.stdout


def test_every_client_method_has_a_subcommand() -> None:
    ctx = cli.make_context("vllm-devclient", ["--help"], resilient_parsing=True)
    for name in CLIENT_METHODS:
        command = cli.get_command(ctx, name.replace("_", "-"))
        assert command is not None, f"no subcommand for {name}"
    assert cli.get_command(ctx, "barrier") is cli.get_command(ctx, "reset-prefix-cache-until-success")
    assert cli.get_command(ctx, "wait-ready") is cli.get_command(ctx, "wait-until-ready")


def test_single_target_human_output(mock: respx.MockRouter) -> None:
    mock.get(f"{A}/version").respond(200, json={"version": "0.33.0", "rust_frontend_version": "0.33.0"})
    result = invoke("--url", A, "version")
    assert result.exit_code == 0
    assert result.stdout.strip() == "vllm 0.33.0 (rust frontend 0.33.0)"


def test_fleet_json_has_an_entry_per_target_with_its_exit_code(mock: respx.MockRouter) -> None:
    mock.post(f"{A}/reset_prefix_cache").respond(200, json={"success": True})
    mock.post(f"{B}/reset_prefix_cache").respond(404)
    mock.post(f"{C}/reset_prefix_cache").mock(side_effect=httpx.ConnectError("refused"))
    result = invoke("--url", A, "--url", B, "--url", C, "--retries", "0", "--json", "reset-prefix-cache")
    assert result.exit_code == ExitCode.FAILED  # two different kinds of failure
    data = doc(result)
    assert data["command"] == "reset-prefix-cache" and data["ok"] is False and data["exit_code"] == 1
    assert list(data["targets"]) == [A, B, C]
    a, b, c = (data["targets"][u] for u in (A, B, C))
    assert a == {"ok": True, "exit_code": 0, "result": {"success": True, "status_code": 200}} | {
        "error": None,
        "elapsed_s": a["elapsed_s"],
    }
    assert b["exit_code"] == 5 and b["error"]["type"] == "DevModeDisabledError"
    assert b["error"]["status_code"] == 404 and b["error"]["path"] == "/reset_prefix_cache"
    assert c["exit_code"] == 3 and c["error"]["type"] == "APIConnectionError"


def test_options_after_the_subcommand_override_and_env_gives_a_fleet(mock: respx.MockRouter) -> None:
    for url in (A, B):
        mock.post(f"{url}/reset_prefix_cache").mock(side_effect=httpx.ConnectError("refused"))
    env = {"VLLM_DEVCLIENT_URL": f"{A} {B}"}
    both = invoke("reset-prefix-cache", "--json", "--retries", "0", env=env)
    assert both.exit_code == ExitCode.CONNECTION
    assert list(doc(both)["targets"]) == [A, B]
    mock.post(f"{C}/reset_prefix_cache").respond(200, json={"success": True})
    only_c = invoke("--url", A, "reset-prefix-cache", "--url", C, "--json", env=env)
    assert only_c.exit_code == 0 and list(doc(only_c)["targets"]) == [C]


def test_success_false_exits_one_with_a_hint(mock: respx.MockRouter) -> None:
    route = mock.post(f"{A}/reset_prefix_cache").respond(200, json={"success": False})
    result = invoke("--url", A, "reset-prefix-cache", "--reset-external")
    assert result.exit_code == ExitCode.FAILED
    assert "success=false" in result.stdout
    assert "retry with `barrier`" in result.stderr
    assert route.calls.last.request.url.params["reset_external"] == "true"


@pytest.mark.parametrize(
    ("answer", "code", "error_type"),
    [
        (httpx.Response(404), ExitCode.DEV_MODE, "DevModeDisabledError"),
        (httpx.Response(401, json={"error": "Unauthorized"}), ExitCode.AUTH, "AuthenticationError"),
        (httpx.ConnectError("refused"), ExitCode.CONNECTION, "APIConnectionError"),
        (httpx.ReadTimeout("slow"), ExitCode.CONNECTION, "APITimeoutError"),
        (
            httpx.Response(500, json={"error": {"message": "Call to sleep method failed: oom"}}),
            1,
            "EngineCallError",
        ),
    ],
)
def test_each_failure_kind_gives_its_exit_code(
    mock: respx.MockRouter, answer: httpx.Response | Exception, code: int, error_type: str
) -> None:
    mock.post(f"{B}/sleep").respond(200, json={"status": "sleeping", "level": 2})
    route = mock.post(f"{A}/sleep")
    if isinstance(answer, Exception):
        route.mock(side_effect=answer)
    else:
        route.mock(return_value=answer)
    result = invoke(
        "--url", A, "--url", B, "--retries", "0", "--json", "sleep", "--level", "2", "--mode", "wait"
    )
    assert result.exit_code == code
    target = doc(result)["targets"][A]
    assert target["exit_code"] == code and target["error"]["type"] == error_type
    assert route.calls.last.request.url.params["level"] == "2"


def test_engine_failure_json_carries_the_engine_method_and_message(mock: respx.MockRouter) -> None:
    body = {"error": {"message": "Call to collective_rpc method failed: no such method"}}
    route = mock.post(f"{A}/collective_rpc").respond(500, json=body)
    result = invoke(
        "--url", A, "--json", "collective-rpc", "ping", "--args", "[1, 2]", "--kwargs", '{"x": 1}'
    )
    assert result.exit_code == 1
    error = doc(result)["targets"][A]["error"]
    assert error["engine_method"] == "collective_rpc" and error["engine_message"] == "no such method"
    sent = json.loads(route.calls.last.request.content)
    assert sent == {"method": "ping", "args": [1, 2], "kwargs": {"x": 1}}


def test_barrier_deadline_exits_four(mock: respx.MockRouter) -> None:
    mock.post(f"{A}/reset_prefix_cache").respond(200, json={"success": False})
    mock.post(f"{B}/reset_prefix_cache").respond(200, json={"success": True})
    result = invoke("--url", A, "--url", B, "--json", "barrier", "--deadline", "0.2", "--no-step")
    assert result.exit_code == ExitCode.DEADLINE
    data = doc(result)
    assert data["targets"][B]["ok"] and data["targets"][B]["result"]["attempts"] == 1
    error = data["targets"][A]["error"]
    assert error["type"] == "BarrierTimeoutError" and error["attempts"] >= 2 and error["engine_steps"] == 0


def test_wait_ready_alias_and_deadline(mock: respx.MockRouter) -> None:
    mock.get(f"{A}/health").mock(side_effect=httpx.ConnectError("refused"))
    result = invoke("--url", A, "wait-until-ready", "--deadline", "0.2")
    assert result.exit_code == ExitCode.DEADLINE
    assert "WaitTimeoutError" in result.stderr
    mock.get(f"{B}/health").respond(200)
    assert invoke("--url", B, "wait-ready").stdout.strip() == "ready"


def test_pause_rollback_in_json(mock: respx.MockRouter) -> None:
    mock.post(f"{A}/pause").respond(200, json={"status": "paused"})
    mock.post(f"{B}/pause").respond(404)
    resume_a = mock.post(f"{A}/resume").respond(200, json={"status": "resumed"})
    resume_b = mock.post(f"{B}/resume").respond(200, json={"status": "resumed"})
    result = invoke("--url", A, "--url", B, "--json", "pause", "--rollback", "--mode", "keep")
    assert result.exit_code == ExitCode.DEV_MODE
    data = doc(result)
    assert list(data["rollback"]) == [A] and data["rollback"][A]["ok"]
    assert resume_a.call_count == 1 and resume_b.call_count == 0
    human = invoke("--url", A, "--url", B, "pause", "--rollback")
    assert "rolled back: resumed 1 paused targets: http://a.test" in human.stderr
    assert "1 of 2 targets ok" in human.stderr


def test_api_key_is_sent_and_never_printed(mock: respx.MockRouter) -> None:
    route = mock.get(f"{A}/v1/models").respond(401, json={"error": "Unauthorized"})
    for args in (["--api-key", "sk-top-secret"], []):
        result = invoke("--url", A, *args, "models", env={"VLLM_API_KEY": "sk-top-secret"})
        assert result.exit_code == ExitCode.AUTH
        assert "sk-top-secret" not in result.output
        assert route.calls.last.request.headers["authorization"] == "Bearer sk-top-secret"
        as_json = invoke("--url", A, *args, "--json", "models", env={"VLLM_API_KEY": "sk-top-secret"})
        assert "sk-top-secret" not in as_json.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["abort-requests"], "give request ids or --all"),
        (["abort-requests", "r1", "--all"], "give request ids or --all"),
        (["--url", "not-a-url", "health"], "http:// or https://"),
        (["--url", A, "--url", A, "health"], "listed twice"),
        (["sleep", "--level", "5"], "5 is not in the range"),
        (["collective-rpc", "m", "--args", '{"a": 1}'], "must be a list"),
        (["collective-rpc", "m", "--args", "[1,"], "not valid JSON"),
        (["update-weights", "--update-info", "@/nonexistent/file.json"], "cannot read"),
        (["request", "GET", "/x", "--param", "novalue"], "expected KEY=VALUE"),
        (["request", "GET", "no-slash"], "must start with '/'"),
        (["--timeout", "0", "health"], "0.0 is not in the range"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_exit_two_and_send_nothing(
    mock: respx.MockRouter, args: list[str], message: str
) -> None:
    result = invoke(*args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.stderr
    assert mock.calls.call_count == 0


def test_request_escape_hatch_and_abort_ids(mock: respx.MockRouter) -> None:
    route = mock.get(f"{A}/custom").respond(200, json={"x": 1})
    result = invoke("--url", A, "--json", "request", "GET", "/custom", "--param", "k=v", "--param", "b=")
    assert result.exit_code == 0
    assert doc(result)["targets"][A]["result"] == {"status_code": 200, "body": {"x": 1}}
    assert str(route.calls.last.request.url.params) == "k=v&b="
    abort = mock.post(f"{A}/abort_requests").respond(200, json={"status": "ok", "aborted": 2})
    assert invoke("--url", A, "abort-requests", "r1", "r2").exit_code == 0
    assert json.loads(abort.calls.last.request.content) == {"request_ids": ["r1", "r2"]}
    assert invoke("--url", A, "abort-requests", "--all").exit_code == 0
    assert json.loads(abort.calls.last.request.content) == {"request_ids": []}


def test_wake_up_partial_fails_only_without_tags(mock: respx.MockRouter) -> None:
    route = mock.post(f"{A}/wake_up").respond(200, json={"status": "sleeping", "tags": ["weights"]})
    assert invoke("--url", A, "wake-up", "--tag", "weights").exit_code == 0
    assert route.calls.last.request.url.params.get_list("tags") == ["weights"]
    full = invoke("--url", A, "wake-up")
    assert full.exit_code == ExitCode.FAILED and "still sleeping" in full.stderr


def test_metrics_text_prints_the_text_and_metrics_the_snapshot(mock: respx.MockRouter) -> None:
    mock.get(f"{A}/metrics").respond(200, text="vllm:prefix_cache_hits_total 7\n")
    result = invoke("--url", A, "metrics-text")
    assert result.exit_code == 0 and result.stdout == "vllm:prefix_cache_hits_total 7\n"
    snapshot = doc(invoke("--url", A, "--json", "metrics"))["targets"][A]["result"]
    assert snapshot["prefix_cache_hits"] == 7


def test_kv_event_sources_json_keys_are_ranks(mock: respx.MockRouter) -> None:
    sources = {"0": {"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": ""}}
    mock.get(f"{A}/kv_event_sources").respond(200, json=sources)
    result = invoke("--url", A, "--json", "kv-event-sources")
    assert doc(result)["targets"][A]["result"]["0"]["endpoint"] == "tcp://*:5557"
    human = invoke("--url", A, "kv-event-sources")
    assert human.stdout.strip() == "rank 0: tcp://*:5557 replay=tcp://*:5558"


def test_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(coro: Any) -> Any:
        coro.close()
        raise KeyboardInterrupt

    monkeypatch.setattr("vllm_devclient.cli.asyncio.run", interrupted)
    result = invoke("--url", A, "health")
    assert result.exit_code == ExitCode.INTERRUPTED
    assert "interrupted" in result.stderr


# ---- parity, against the interface of vllm_devclient.testing.parity --------------------------------------


class FakeReport:
    def __init__(self, mismatches: list[str]) -> None:
        self.rows = ["health", "version", "wake_up"]
        self.differences = ["health"]  # raw answers differ: what the SDK hides, not a failure
        self.sdk_mismatches = mismatches

    def to_markdown(self) -> str:
        return "| scenario | python | rust |\n| --- | --- | --- |\n| reset | 200 | 200 |"

    def to_json(self) -> str:
        return json.dumps({"sdk_mismatches": self.sdk_mismatches})


@pytest.fixture
def fake_parity(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    module = types.ModuleType("vllm_devclient.testing.parity")

    def run_parity(urls: Any = None, **kw: Any) -> FakeReport:
        calls.append({"urls": urls, **kw})
        if kw.get("report_path") is not None:
            Path(kw["report_path"]).write_text("table")
        return FakeReport(["wake_up"] if urls and "diff" in urls[0] else [])

    module.run_parity = run_parity  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm_devclient.testing.parity", module)
    return calls


def test_parity_embedded_by_default_and_ignores_the_env_url(
    fake_parity: list[dict[str, Any]], tmp_path: Path
) -> None:
    report = tmp_path / "parity.md"
    result = invoke("parity", "--report", str(report), env={"VLLM_DEVCLIENT_URL": A, "VLLM_API_KEY": "k"})
    assert result.exit_code == 0
    assert fake_parity == [{"urls": None, "report_path": report, "api_key": None, "allow_reset": False}]
    assert "| reset | 200 | 200 |" in result.stdout and report.read_text() == "table"
    assert "3 scenarios; raw answers differ in 1; SDK mismatches: 0" in result.stderr


def test_parity_two_live_urls_json_and_mismatches_exit_one(fake_parity: list[dict[str, Any]]) -> None:
    result = invoke("parity", "--url", "http://diff.test", "--url", B, "--json", "--api-key", "k")
    assert result.exit_code == ExitCode.FAILED
    assert json.loads(result.stdout) == {"sdk_mismatches": ["wake_up"]}
    assert fake_parity[-1]["urls"] == ["http://diff.test", B] and fake_parity[-1]["api_key"] == "k"
    same = invoke("--url", A, "--url", B, "parity", "--allow-reset")
    assert same.exit_code == 0 and fake_parity[-1]["urls"] == [A, B] and fake_parity[-1]["allow_reset"]


def test_parity_needs_zero_or_two_urls(fake_parity: list[dict[str, Any]]) -> None:
    result = invoke("parity", "--url", A)
    assert result.exit_code == ExitCode.USAGE and "give --url twice" in result.stderr
    assert fake_parity == []


def test_parity_without_the_harness_exits_seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_devclient.testing.parity", None)
    result = invoke("parity")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert "parity harness is not available" in result.stderr


# ---- kv-events tail, with the subscriber replaced (the real publisher is in contract_tests) ----------------


class FakeSubscriber:
    """Hands out real KVEventBatch objects, then nothing (like a quiet stream)."""

    made: list[FakeSubscriber] = []

    def __init__(self, endpoint: str | None = None, **kw: Any) -> None:
        from vllm_devclient.kv_events import (
            AllBlocksCleared,
            BlockStored,
            EventsLost,
            KVEventBatch,
            KVEventTally,
        )

        self.endpoint, self.kw = endpoint, kw
        lost = (EventsLost(rank=0, first_seq=2, last_seq=4, reason="not_in_replay_buffer"),)
        self.batches = [
            KVEventBatch(
                rank=0, seq=0, ts=1.0, events=[BlockStored([1, 2], medium="GPU")], data_parallel_rank=0
            ),
            KVEventBatch(
                rank=0, seq=1, ts=2.0, events=[AllBlocksCleared()], data_parallel_rank=0, replayed=True
            ),
            KVEventBatch(
                rank=0, seq=5, ts=3.0, events=[BlockStored([b"\xab" * 4], medium="CPU")], data_parallel_rank=0
            ),
        ]
        if kw.get("lossy"):
            self.batches[2] = KVEventBatch(
                rank=0, seq=5, ts=3.0, events=[], data_parallel_rank=0, losses=lost
            )
        self.tally = KVEventTally()
        self.closed = False
        FakeSubscriber.made.append(self)

    @classmethod
    def from_client(cls, client: Any, **kw: Any) -> FakeSubscriber:
        sources = client.kv_event_sources()
        return cls(None, sources=sources, **kw)

    def poll(self, timeout: float = 0.0) -> Any:
        if not self.batches:
            return None
        batch = self.batches.pop(0)
        self.tally.add(batch)
        if batch.losses:
            self.tally.lost_batches += 3
        return batch

    def __enter__(self) -> FakeSubscriber:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed = True


@pytest.fixture
def fake_subscriber(monkeypatch: pytest.MonkeyPatch) -> type[FakeSubscriber]:
    import vllm_devclient.kv_events as kv

    FakeSubscriber.made = []
    monkeypatch.setattr(kv, "KVEventSubscriber", FakeSubscriber)
    return FakeSubscriber


def test_kv_events_tail_human_and_json(fake_subscriber: type[FakeSubscriber]) -> None:
    human = invoke("kv-events", "tail", "--endpoint", "tcp://127.0.0.1:5557", "--count", "3", "--topic", "kv")
    assert human.exit_code == 0, human.output
    assert human.stdout.splitlines() == [
        "rank 0 seq 0: stored GPU 2 blocks [1, 2]",
        "rank 0 seq 1 (replayed): all blocks cleared",
        "rank 0 seq 5: stored CPU 1 block [abababab]",
    ]
    assert "3 batches; blocks stored: GPU 2, CPU 1; removed: 0; cleared: 1; lost batches: 0" in human.stderr
    sub = fake_subscriber.made[-1]
    assert sub.endpoint == "tcp://127.0.0.1:5557" and sub.kw["topic"] == "kv" and sub.closed
    as_json = invoke("kv-events", "tail", "--endpoint", "tcp://127.0.0.1:5557", "--count", "2", "--json")
    lines = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [b["seq"] for b in lines] == [0, 1]
    assert lines[0]["events"][0] | {"type": "BlockStored"} == lines[0]["events"][0]
    assert lines[0]["events"][0]["block_hashes"] == [1, 2]


def test_kv_events_tail_deadline_and_losses(
    fake_subscriber: type[FakeSubscriber], monkeypatch: pytest.MonkeyPatch
) -> None:
    short = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--count", "5", "--duration", "0.3")
    assert short.exit_code == ExitCode.DEADLINE
    assert len(short.stdout.splitlines()) == 3

    class Lossy(FakeSubscriber):
        def __init__(self, endpoint: str | None = None, **kw: Any) -> None:
            super().__init__(endpoint, lossy=True, **kw)

    monkeypatch.setattr("vllm_devclient.kv_events.KVEventSubscriber", Lossy)
    lossy = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--duration", "0.3")
    assert lossy.exit_code == ExitCode.FAILED
    assert "lost: rank 0 batches 2..4 (not_in_replay_buffer)" in lossy.stderr


def test_kv_events_tail_discovers_sources_from_the_server(
    fake_subscriber: type[FakeSubscriber], mock: respx.MockRouter
) -> None:
    sources = {"0": {"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": "kv"}}
    mock.get(f"{A}/kv_event_sources").respond(200, json=sources)
    result = invoke("--url", A, "kv-events", "tail", "--count", "1", "--no-backlog")
    assert result.exit_code == 0
    kw = fake_subscriber.made[-1].kw
    assert kw["backlog"] is False and kw["sources"][0].endpoint == "tcp://*:5557"
    mock.get(f"{B}/kv_event_sources").mock(side_effect=httpx.ConnectError("refused"))
    unreachable = invoke("--url", B, "--retries", "0", "kv-events", "tail")
    assert unreachable.exit_code == ExitCode.CONNECTION
    assert invoke("--url", A, "--url", B, "kv-events", "tail").exit_code == ExitCode.USAGE


def test_kv_events_tail_without_zmq_exits_seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_devclient.kv_events", None)
    result = invoke("kv-events", "tail", "--endpoint", "tcp://h:1")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert "pip install 'vllm-devclient[zmq]'" in result.stderr
