"""What the command line prints and sends, in-process (click's CliRunner + respx): human, JSON and TSV
output for one target and a fleet, the options sent, keys never printed, the progress display. Every JSON
document is checked against the documented schema; exit codes are in test_cli_exit_codes.py, the generator
in test_cli_generate.py, the real binary against real frontends in contract_tests/test_cli_live.py."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx

from vllm_devclient.cli import ExitCode, cli

from .cli_support import (
    A,
    B,
    C,
    cli_mock,  # noqa: F401  (the `mock` fixture: respx without a base URL)
    doc,
    invoke,
)


def test_single_target_human_output_and_a_v1_url(mock: respx.MockRouter) -> None:
    route = mock.get(f"{A}/version").respond(
        200, json={"version": "0.33.0", "rust_frontend_version": "0.33.0"}
    )
    result = invoke("--url", f"{A}/v1/", "version")
    assert result.exit_code == 0
    assert result.stdout.strip() == "vllm 0.33.0 (rust frontend 0.33.0)"
    assert route.call_count == 1


def test_fleet_json_has_an_entry_per_target_with_its_exit_code(mock: respx.MockRouter) -> None:
    mock.post(f"{A}/reset_prefix_cache").respond(200, json={"success": True})
    mock.post(f"{B}/reset_prefix_cache").respond(404)
    mock.get(f"{B}/reset_prefix_cache").respond(404)  # no dev route served: dev mode off
    mock.post(f"{C}/reset_prefix_cache").mock(side_effect=httpx.ConnectError("refused"))
    result = invoke("--url", A, "--url", B, "--url", C, "--retries", "0", "--json", "reset-prefix-cache")
    assert result.exit_code == ExitCode.FAILED  # two different kinds of failure
    data = doc(result)
    assert (data["schema"], data["command"], data["ok"], data["exit_code"]) == (
        1,
        "reset-prefix-cache",
        False,
        1,
    )
    assert data["result"] is None and data["error"] is None and data["rollback"] is None
    assert list(data["targets"]) == [A, B, C]
    a, b, c = (data["targets"][u] for u in (A, B, C))
    assert a == {"ok": True, "exit_code": 0, "result": {"success": True, "status_code": 200}} | {
        "error": None,
        "elapsed_s": a["elapsed_s"],
    }
    assert b["exit_code"] == 5 and b["error"]["type"] == "DevModeDisabledError"
    assert (b["error"]["status_code"], b["error"]["http_method"], b["error"]["path"]) == (
        404,
        "POST",
        "/reset_prefix_cache",
    )
    assert c["exit_code"] == 3 and c["error"]["type"] == "APIConnectionError"


def test_tsv_is_one_tab_separated_line_per_target(mock: respx.MockRouter) -> None:
    mock.get(f"{A}/is_paused").respond(200, json={"is_paused": True})
    mock.get(f"{B}/is_paused").respond(404)
    mock.get(f"{B}/reset_prefix_cache").respond(404)
    mock.get(f"{C}/is_paused").respond(404)
    mock.get(f"{C}/reset_prefix_cache").respond(405)  # C serves dev routes: its release lacks /is_paused
    result = invoke("--url", A, "--url", B, "--url", C, "-o", "tsv", "is-paused")
    assert result.exit_code == ExitCode.FAILED
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    assert [r[:3] for r in rows] == [[A, "ok", "0"], [B, "FAIL", "5"], [C, "FAIL", "1"]]
    assert rows[0][4] == "true" and rows[1][4] == "dev mode off: 404 on /is_paused"
    assert rows[2][4] == "route missing from this release: 404 on /is_paused"
    assert all(len(r) == 5 for r in rows) and float(rows[0][3]) >= 0


def test_options_after_the_subcommand_override_and_env_gives_a_fleet(mock: respx.MockRouter) -> None:
    for url in (A, B):
        mock.post(f"{url}/reset_prefix_cache").mock(side_effect=httpx.ConnectError("refused"))
    env = {"VLLM_DEVCLIENT_URL": f"{A} {B}"}
    both = invoke("reset-prefix-cache", "-o", "json", "--retries", "0", env=env)
    assert both.exit_code == ExitCode.CONNECTION
    assert list(doc(both)["targets"]) == [A, B]
    mock.post(f"{C}/reset_prefix_cache").respond(200, json={"success": True})
    only_c = invoke("--url", A, "-o", "table", "reset-prefix-cache", "--url", C, "--json", env=env)
    assert only_c.exit_code == 0 and list(doc(only_c)["targets"]) == [C]


def test_timeout_given_bounds_each_try_of_a_wait(mock: respx.MockRouter) -> None:
    seen: list[Any] = []

    def health(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"]["read"])
        return httpx.Response(200)

    mock.get(f"{A}/health").mock(side_effect=health)
    assert invoke("--url", A, "wait-ready").exit_code == 0
    assert invoke("--url", A, "--timeout", "0.7", "wait-ready").exit_code == 0
    assert seen[0] > 0.9 and 0.6 < seen[1] <= 0.7  # the default 1 s try, then --timeout's


def test_pause_rollback_in_json(mock: respx.MockRouter) -> None:
    mock.post(f"{A}/pause").respond(200, json={"status": "paused"})
    mock.post(f"{B}/pause").respond(404)
    mock.get(f"{B}/reset_prefix_cache").respond(404)
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


def test_a_key_or_password_the_server_echoes_is_never_printed(mock: respx.MockRouter) -> None:
    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            400, json={"error": {"message": f"bad header {request.headers['authorization']}"}}
        )

    mock.get(f"{A}/v1/models").mock(side_effect=echo)
    for output in ("json", "table", "tsv"):
        result = invoke("--url", A, "-o", output, "--api-key", "sk-echoed-secret\n", "models")
        assert result.exit_code == 1 and "Bearer ***" in result.output, result.output
        assert "sk-echoed-secret" not in result.output
    mock.get("http://b.test/health").mock(side_effect=httpx.ConnectError("refused"))
    result = invoke("--url", "http://user:pw-secret-1@b.test", "--retries", "0", "--json", "health")
    assert result.exit_code == 3 and "pw-secret-1" not in result.output
    assert list(doc(result)["targets"]) == ["http://user:***@b.test"]


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


def test_only_the_options_given_are_sent(mock: respx.MockRouter) -> None:
    route = mock.post(f"{A}/v1/completions").respond(
        200, json={"choices": [{"text": " 4", "index": 0, "finish_reason": "length"}]}
    )
    assert invoke("--url", A, "completion", "2+2=", "--model", "m").stdout.strip() == "4"
    assert json.loads(route.calls.last.request.content) == {
        "model": "m", "prompt": "2+2=", "max_tokens": 16, "temperature": 0,
    }  # fmt: skip
    invoke("--url", A, "completion", "x", "--model", "m", "--stop", "a", "--stop", "b", "--seed", "3")
    sent = json.loads(route.calls.last.request.content)
    assert sent["stop"] == ["a", "b"] and sent["seed"] == 3


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


# ---- progress ----------------------------------------------------------------------------------------------


def test_progress_names_pending_targets_attempts_and_time_left() -> None:
    from rich.console import Console

    from vllm_devclient.cli._progress import FleetProgress
    from vllm_devclient.fleet import TargetOutcome
    from vllm_devclient.models import ResetPrefixCacheResult

    now = [100.0]
    urls = tuple(f"http://h{i}:8000" for i in range(8))
    shown = FleetProgress("barrier", urls, deadline=20, console=Console(), clock=lambda: now[0])
    shown.finished(TargetOutcome(urls[0], None, None, 0.1))
    shown.attempt_hook(urls[1])(7, ResetPrefixCacheResult(success=False, status_code=200))
    now[0] += 5.5
    console = Console(width=100, record=True, file=open("/dev/null", "w"))
    console.print(shown.renderable())
    text = console.export_text()
    assert "barrier  1/8 targets done  14.5 s left" in text
    assert "http://h1:8000  attempt 7, last: success=false, status_code=200" in text
    assert "http://h2:8000  waiting for an answer" in text
    assert "... and 2 more pending" in text and "http://h0:8000" not in text


def test_progress_shows_only_on_a_terminal() -> None:
    from rich.console import Console

    from vllm_devclient.cli._progress import FleetProgress

    piped = FleetProgress("x", (A,), console=Console(file=open("/dev/null", "w")), delay=0)
    piped.tick()
    assert piped._live is None
    tty = Console(force_terminal=True, file=open("/dev/null", "w"))
    shown = FleetProgress("x", (A,), console=tty, delay=0)
    shown.tick()
    assert shown._live is not None
    shown.close()
    assert FleetProgress("x", (A,), console=tty, delay=0, enabled=False)._enabled is False


def test_barrier_gives_each_target_an_on_attempt_hook_when_the_client_takes_one(
    mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from vllm_devclient import AsyncDevClient
    from vllm_devclient.models import BarrierResult

    hooks: dict[str, Any] = {}

    async def barrier(
        self: AsyncDevClient, *, deadline: float = 60.0, on_attempt: Any = None
    ) -> BarrierResult:
        hooks[self.base_url] = on_attempt
        on_attempt(1, None)
        return BarrierResult(attempts=1, engine_steps=0, elapsed_s=0.0123456)

    monkeypatch.setattr(AsyncDevClient, "reset_prefix_cache_until_success", barrier)
    from vllm_devclient.cli import _generate

    monkeypatch.setitem(
        cli.commands, "barrier", next(c for c, _, _ in _generate.method_commands() if c.name == "barrier")
    )
    result = invoke("--url", A, "--url", B, "--json", "barrier", "--deadline", "3")
    assert result.exit_code == 0, result.output
    assert set(hooks) == {A, B} and all(callable(h) for h in hooks.values())
    assert doc(result)["targets"][A]["result"]["elapsed_s"] == 0.012
