"""The command line's logic, in-process (click's CliRunner + respx); every JSON document is checked against
the documented schema. The generator itself is in test_cli_generate.py; the real binary against real
frontends in contract_tests/test_cli_live.py."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import respx
from click.testing import CliRunner, Result

import vllm_devclient.errors as sdk_errors
from vllm_devclient import (
    APIConnectionError,
    APITimeoutError,
    AuthenticationError,
    BarrierTimeoutError,
    DevModeDisabledError,
    EngineCallError,
    InvalidParameterError,
    PermissionDeniedError,
    RouteNotServedError,
    WaitTimeoutError,
)
from vllm_devclient.calls import CALLS
from vllm_devclient.cli import ExitCode, UnsuccessfulResultError, cli, combine, exit_code_for
from vllm_devclient.cli._settings import GLOBAL_OPTIONS
from vllm_devclient.routes import ROUTES

from .conftest import GSM8K_DIR

A, B, C = "http://a.test", "http://b.test", "http://c.test"
ROOT = Path(__file__).resolve().parents[1]
SCHEMA = json.loads((ROOT / "vllm_devclient" / "cli" / "schema.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)  # checked once, in test_the_documented_schema_...
# Names error.type may take besides the SDK's own classes (see schema.json).
CLI_ERROR_TYPES = {"UnsuccessfulResultError", "ImportError", "KeyboardInterrupt"}


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    base_env = {"VLLM_DEVCLIENT_URL": "", "VLLM_API_KEY": ""}
    return CliRunner().invoke(cli, list(args), env={**base_env, **(env or {})}, catch_exceptions=False)


def check_schema(doc: dict[str, Any]) -> dict[str, Any]:
    VALIDATOR.validate(doc)
    errors = [doc["error"], *(t["error"] for t in doc["targets"].values())]
    for error in filter(None, errors):
        assert hasattr(sdk_errors, error["type"]) or error["type"] in CLI_ERROR_TYPES, error
    return doc


def doc(result: Result) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(result.stdout)
    return check_schema(data)


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
        (
            BarrierTimeoutError("x", waited_s=1, attempts=3, engine_steps=2, last=None, reached=3, refused=3),
            ExitCode.DEADLINE,
        ),
        (_status(DevModeDisabledError, 404), ExitCode.DEV_MODE),
        (_status(RouteNotServedError, 404), ExitCode.FAILED),
        (_status(AuthenticationError, 401), ExitCode.AUTH),
        (_status(PermissionDeniedError, 403), ExitCode.AUTH),
        (InvalidParameterError("x"), ExitCode.USAGE),
        (ImportError("x", name="zmq"), ExitCode.UNAVAILABLE),
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
        (UnsuccessfulResultError("success=false"), ExitCode.FAILED),
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


# ---- help --------------------------------------------------------------------------------------------------


def _all_commands() -> list[list[str]]:
    paths = []
    for name, command in cli.commands.items():
        sub = getattr(command, "commands", None)
        paths += [[name, s] for s in sub] if sub else [[name]]
    return paths


def test_group_help_fits_a_screen_lists_every_command_once_and_never_shows_the_key() -> None:
    result = invoke("--help", env={"VLLM_API_KEY": "sk-very-secret"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert len(lines) <= 42, result.stdout
    assert "sk-very-secret" not in result.output
    first = lines.index(next(x for x in lines if x.startswith("Commands"))) + 1
    listed: list[str] = []
    for line in lines[first : lines.index("", first)]:
        words = line.split()
        listed += words[1:] if line[2] != " " else words  # a category starts the line
    assert sorted(listed) == sorted(cli.commands)
    for needle in ("--timeout SECONDS", "-o, --output FORMAT", "--json", "Exit codes: 0 ok", "4 --deadline"):
        assert needle in result.stdout


@pytest.mark.parametrize("path", _all_commands(), ids=lambda p: " ".join(p))
def test_every_subcommand_help_fits_a_screen_and_every_option_has_help(path: list[str]) -> None:
    result = invoke(*path, "--help")
    assert result.exit_code == 0, result.output
    assert len(result.stdout.splitlines()) <= 40, result.stdout
    # Global options are on the group only.
    assert "--api-key" not in result.stdout and "--retries" not in result.stdout
    command = cli
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    for param in command.params:
        if param.param_type_name == "option" and not param.hidden:  # type: ignore[attr-defined]
            assert (param.help or "").strip(), f"{' '.join(path)} {param.opts} has no help"  # type: ignore[attr-defined]
        elif param.param_type_name == "option":
            # The only hidden options are the global ones, accepted after the subcommand too: no older names.
            assert param.name in GLOBAL_OPTIONS, f"{' '.join(path)}: hidden {param.opts}"  # type: ignore[attr-defined]
    # One time vocabulary: --timeout is global, --deadline bounds a whole wait.
    for old in ("--request-timeout", "--duration"):
        assert old not in result.stdout


def test_every_client_method_has_a_subcommand_and_its_names_are_aliases() -> None:
    from vllm_devclient.fleet import CLIENT_METHODS

    ctx = cli.make_context("vllm-devclient", ["--help"], resilient_parsing=True)
    for name in CLIENT_METHODS:
        command = cli.get_command(ctx, name)
        assert command is not None, f"no subcommand for {name}"
        assert cli.get_command(ctx, name.replace("_", "-")) is command
    assert cli.get_command(ctx, "barrier") is cli.get_command(ctx, "reset-prefix-cache-until-success")
    assert cli.get_command(ctx, "wait-ready") is cli.get_command(ctx, "wait_until_ready")


def test_an_alias_runs_the_command_under_its_canonical_name(mock: respx.MockRouter) -> None:
    mock.post(f"{A}/reset_prefix_cache").respond(200, json={"success": True})
    result = invoke("--url", A, "--json", "reset_prefix_cache")
    assert result.exit_code == 0 and doc(result)["command"] == "reset-prefix-cache"


# ---- output ------------------------------------------------------------------------------------------------


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


def test_success_false_exits_one_under_the_documented_error_type(mock: respx.MockRouter) -> None:
    route = mock.post(f"{A}/reset_prefix_cache").respond(200, json={"success": False})
    result = invoke("--url", A, "reset-prefix-cache", "--reset-external")
    assert result.exit_code == ExitCode.FAILED
    assert "success=false" in result.stdout
    assert "retry with `barrier`" in result.stderr
    assert route.calls.last.request.url.params["reset_external"] == "true"
    entry = doc(invoke("--url", A, "--json", "reset-prefix-cache"))["targets"][A]
    assert entry["result"] == {"success": False, "status_code": 200}
    assert entry["error"]["type"] == "UnsuccessfulResultError" and entry["exit_code"] == 1


@pytest.mark.parametrize(
    ("answer", "code", "error_type"),
    [
        (httpx.Response(404), ExitCode.DEV_MODE, "DevModeDisabledError"),
        (httpx.Response(404), ExitCode.FAILED, "RouteNotServedError"),
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
    # After a dev route's 404 the client asks whether any dev route is served (405: yes, 404: no).
    mock.get(f"{A}/reset_prefix_cache").respond(405 if error_type == "RouteNotServedError" else 404)
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
        "--url", A, "--json", "collective-rpc", "ping", "--args", "[1, 2]", "--kwargs", '{"x": 1}',
        "--rpc-timeout", "5",
    )  # fmt: skip
    assert result.exit_code == 1
    error = doc(result)["targets"][A]["error"]
    assert error["engine_method"] == "collective_rpc" and error["engine_message"] == "no such method"
    sent = json.loads(route.calls.last.request.content)
    assert sent == {"method": "ping", "args": [1, 2], "kwargs": {"x": 1}, "timeout": 5.0}


def test_barrier_deadline_exits_four_and_floats_are_rounded(mock: respx.MockRouter) -> None:
    mock.post(f"{A}/reset_prefix_cache").respond(200, json={"success": False})
    mock.post(f"{B}/reset_prefix_cache").respond(200, json={"success": True})
    result = invoke("--url", A, "--url", B, "--json", "barrier", "--deadline", "0.2", "--no-step-engine")
    assert result.exit_code == ExitCode.DEADLINE
    data = doc(result)
    done = data["targets"][B]["result"]
    assert done["attempts"] == 1 and done["engine_steps"] == 0
    assert (
        round(done["elapsed_s"], 3) == done["elapsed_s"] and round(data["elapsed_s"], 3) == data["elapsed_s"]
    )
    error = data["targets"][A]["error"]
    assert error["type"] == "BarrierTimeoutError" and error["attempts"] >= 2 and error["engine_steps"] == 0
    assert round(error["waited_s"], 3) == error["waited_s"]
    # One name per option: the older --no-step is refused.
    assert invoke("--url", B, "barrier", "--no-step").exit_code == 2


def test_wait_results_say_what_was_reached_and_the_deadline_exits_four(mock: respx.MockRouter) -> None:
    mock.get(f"{A}/health").mock(side_effect=httpx.ConnectError("refused"))
    late = invoke("--url", A, "wait-until-ready", "--deadline", "0.2")
    assert late.exit_code == ExitCode.DEADLINE and "WaitTimeoutError" in late.stderr
    mock.get(f"{B}/health").respond(200)
    mock.get(f"{B}/is_sleeping").respond(200, json={"is_sleeping": True})
    assert invoke("--url", B, "wait-ready").stdout.strip() == "ready"
    for command, state in (("wait-ready", "ready"), ("wait-sleeping", "sleeping")):
        entry = doc(invoke("--url", B, "--json", command))["targets"][B]
        assert entry["result"] == {"state": state}


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


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["abort-requests"], "give REQUEST_IDS or --all"),
        (["abort-requests", "r1", "--all"], "give REQUEST_IDS or --all"),
        (["--url", "not-a-url", "health"], "http:// or https://"),
        (["--url", A, "--url", A, "health"], "listed twice"),
        (["sleep", "--level", "5"], "'5' is not one of '0', '1', '2'"),
        (["collective-rpc", "m", "--args", '{"a": 1}'], "must be a list"),
        (["collective-rpc", "m", "--args", "[1,"], "not valid JSON"),
        (["update-weights", "--update-info", "@/nonexistent/file.json"], "cannot read"),
        (["request", "GET", "/x", "--param", "novalue"], "expected KEY=VALUE"),
        (["request", "GET", "no-slash"], "must start with '/'"),
        (["--timeout", "0", "health"], "must be above 0"),
        (["-o", "yaml", "health"], "'yaml' is not one of"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_exit_two_send_nothing_and_are_json_under_json(
    mock: respx.MockRouter, args: list[str], message: str
) -> None:
    result = invoke(*args)
    assert result.exit_code == ExitCode.USAGE, result.output
    assert message in result.stderr
    as_json = invoke("--json", *args) if args[0] != "-o" else invoke(*args[:2], *args[2:], "--json")
    assert as_json.exit_code == ExitCode.USAGE
    data = doc(as_json)
    assert data["error"]["type"] == "InvalidParameterError" and message in data["error"]["message"]
    assert data["targets"] == {} and data["exit_code"] == 2
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


def test_metrics_without_the_extra_exits_seven_with_one_line(
    mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    mock.get(f"{A}/metrics").respond(200, text="vllm:prefix_cache_hits_total 7\n")
    for name in ("prometheus_client", "prometheus_client.parser", "prometheus_client.openmetrics.parser"):
        monkeypatch.setitem(sys.modules, name, None)
    result = invoke("--url", A, "metrics")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert (
        result.stderr.strip().splitlines() == [result.stderr.strip()]
        and "pip install 'vllm-devclient[metrics]'" in result.stderr
    )
    data = doc(invoke("--url", A, "--json", "metrics"))
    assert data["error"]["type"] == "ImportError" and data["exit_code"] == 7


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

    monkeypatch.setattr("vllm_devclient.cli._run.asyncio.run", interrupted)
    result = invoke("--url", A, "health")
    assert result.exit_code == ExitCode.INTERRUPTED
    assert "interrupted" in result.stderr
    data = doc(invoke("--url", A, "--json", "health"))
    assert (data["exit_code"], data["error"]["type"]) == (130, "KeyboardInterrupt")


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


# ---- the [cli] extra ---------------------------------------------------------------------------------------


def test_without_click_the_command_exits_seven_with_one_line() -> None:
    code = (
        "import sys; sys.modules['click'] = None; sys.argv = ['vllm-devclient', '--help']\n"
        "import vllm_devclient.cli as c\n"
        "c.main()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == ExitCode.UNAVAILABLE, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.splitlines()) == 1
    assert "pip install 'vllm-devclient[cli]'" in proc.stderr


def test_importing_the_cli_package_loads_no_command() -> None:
    # (httpx itself imports click and rich when they are installed; the commands must not need them.)
    code = "import sys, vllm_devclient.cli; print(sorted(m for m in sys.modules if m.startswith('vllm_devclient.cli.')))"  # noqa: E501
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "['vllm_devclient.cli._exit']", proc.stderr


# ---- parity, against the interface of vllm_devclient.testing.parity --------------------------------------


class FakeRow:
    def __init__(self, name: str, raw: bool, sdk_same: bool, why: str | None = None) -> None:
        self.scenario, self.raw_differs, self.sdk_same, self.sdk_difference = name, raw, sdk_same, why


class FakeReport:
    def __init__(self, mismatches: list[str]) -> None:
        self.labels = ["python", "rust"]
        self.rows = [
            FakeRow("health", True, True),
            FakeRow("version", False, False, "the Rust frontend reports its own version"),
            FakeRow("wake_up", False, not mismatches),
        ]
        self.differences = ["health"]  # raw answers differ: what the SDK hides, not a failure
        self.documented_sdk_differences = {"version": "the Rust frontend reports its own version"}
        self.sdk_mismatches = mismatches

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "harness", "sdk_mismatches": self.sdk_mismatches}

    def summary(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "scenarios": [row.scenario for row in self.rows],
            "raw_differences": self.differences,
            "sdk_differences_by_design": self.documented_sdk_differences,
            "sdk_mismatches": self.sdk_mismatches,
        }


@pytest.fixture
def fake_parity(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    from vllm_devclient.testing import parity

    module = types.ModuleType("vllm_devclient.testing.parity")

    def run_parity(urls: Any = None, **kw: Any) -> FakeReport:
        calls.append({"urls": urls, **kw})
        Path(kw["report_path"]).write_text("table")
        return FakeReport(["wake_up"] if urls and "diff" in urls[0] else [])

    module.run_parity = run_parity  # type: ignore[attr-defined]
    module.summary_lines = parity.summary_lines  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm_devclient.testing.parity", module)
    return calls


def test_parity_prints_a_summary_and_writes_the_table_to_the_report(
    fake_parity: list[dict[str, Any]], tmp_path: Path
) -> None:
    report = tmp_path / "parity.md"
    result = invoke("parity", "--report", str(report), env={"VLLM_DEVCLIENT_URL": A, "VLLM_API_KEY": "k"})
    assert result.exit_code == 0
    expected = {"urls": None, "report_path": report, "api_key": None, "allow_reset": False, "scenarios": None}
    assert fake_parity == [expected]
    assert report.read_text() == "table"
    assert result.stdout.splitlines() == [
        "3 scenarios, python vs rust",
        "  raw answers differ: 1 (what the SDK hides)",
        "  SDK outcome differs by design: 1: version (the Rust frontend reports its own version)",
        "  SDK mismatches: 0",
        f"full table: {report}",
    ]
    tsv = invoke("parity", "--report", str(report), "-o", "tsv")
    assert tsv.stdout.splitlines() == ["health\tdiffers\t=", "version\t=\tby design", "wake_up\t=\t="]


def test_parity_two_live_urls_json_and_mismatches_exit_one(
    fake_parity: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("parity", "--url", "http://diff.test", "--url", B, "--json", "--api-key", "k")
    assert result.exit_code == ExitCode.FAILED
    data = doc(result)
    assert data["result"] == {"mode": "harness", "sdk_mismatches": ["wake_up"]}
    assert data["error"]["type"] == "UnsuccessfulResultError" and "wake_up" in data["error"]["message"]
    assert fake_parity[-1]["urls"] == ["http://diff.test", B] and fake_parity[-1]["api_key"] == "k"
    assert fake_parity[-1]["report_path"] == Path("parity.md")
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
    assert len(result.stderr.strip().splitlines()) == 1
    assert "pip install 'vllm-devclient[testing]'" in result.stderr


# ---- gsm8k -------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not (GSM8K_DIR / "test.jsonl").is_file(), reason="no GSM8K copy beside the checkout")
def test_gsm8k_scores_each_target_and_writes_the_report(mock: respx.MockRouter, tmp_path: Path) -> None:
    # The first two test answers are 18 and 3: A answers both right, B gets one wrong.
    def answer(url: str, right: bool) -> Any:
        calls = iter(["The answer is 18.", "It takes 3 bolts." if right else "I think 7."])

        def respond(request: httpx.Request) -> httpx.Response:
            usage = {"completion_tokens": 5, "prompt_tokens": 1, "total_tokens": 6}
            return httpx.Response(200, json={"choices": [{"text": next(calls), "index": 0}], "usage": usage})

        mock.post(f"{url}/v1/completions").mock(side_effect=respond)
        mock.get(f"{url}/v1/models").respond(200, json={"data": [{"id": "m", "object": "model"}]})

    answer(A, True)
    answer(B, False)
    report = tmp_path / "gsm8k.json"
    args = [
        "--num-questions",
        "2",
        "--concurrency",
        "1",
        "--data-dir",
        str(GSM8K_DIR),
        "--report",
        str(report),
    ]
    result = invoke("--url", f"{A}/v1", "--url", B, "--json", "gsm8k", *args)
    assert result.exit_code == 0, result.output
    data = doc(result)
    assert data["command"] == "gsm8k"
    assert [data["targets"][u]["result"]["accuracy"] for u in (A, B)] == [1.0, 0.5]
    assert json.loads(report.read_text())[B]["result"]["questions"][1]["prediction"] == 7


@pytest.mark.skipif(not (GSM8K_DIR / "test.jsonl").is_file(), reason="no GSM8K copy beside the checkout")
def test_gsm8k_fans_out_through_the_fleet(mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_devclient.fleet import AsyncFleet

    mapped: list[tuple[str, ...]] = []
    original = AsyncFleet.map

    async def spy(self: AsyncFleet, fn: Any, **kw: Any) -> Any:
        mapped.append(self.urls)
        return await original(self, fn, **kw)

    monkeypatch.setattr(AsyncFleet, "map", spy)
    for url in (A, B):
        mock.get(f"{url}/v1/models").respond(200, json={"data": [{"id": "m", "object": "model"}]})
        mock.post(f"{url}/v1/completions").respond(200, json={"choices": [{"text": "18", "index": 0}]})
    args = ["--num-questions", "1", "--data-dir", str(GSM8K_DIR)]
    result = invoke("--url", A, "--url", B, "--json", "gsm8k", *args)
    assert result.exit_code == 0, result.output
    assert mapped == [(A, B)]  # one fan-out over every target, not a loop of its own


def test_gsm8k_without_its_data_is_one_error_of_the_command(tmp_path: Path) -> None:
    result = invoke("--json", "gsm8k", "--data-dir", str(tmp_path))
    data = json.loads(result.stdout)
    assert result.exit_code == data["exit_code"] != 0 and data["targets"] == {}
    assert data["error"]["type"] == "GSM8KDataError"


def test_gsm8k_without_its_module_exits_seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_devclient.gsm8k", None)
    result = invoke("gsm8k", "--num-questions", "1")
    assert result.exit_code == ExitCode.UNAVAILABLE and "pip install 'vllm-devclient[gsm8k]'" in result.stderr


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


def test_kv_events_tail_human_json_lines_and_tsv(fake_subscriber: type[FakeSubscriber]) -> None:
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
    *lines, last = [json.loads(line) for line in as_json.stdout.splitlines()]
    for line in lines:
        jsonschema.validate(line, {**SCHEMA["$defs"]["kv_batch"], "$defs": SCHEMA["$defs"]})
    assert [b["seq"] for b in lines] == [0, 1]
    assert lines[0]["events"][0]["type"] == "BlockStored" and lines[0]["events"][0]["block_hashes"] == [1, 2]
    check_schema(last)
    assert last["command"] == "kv-events tail" and last["result"]["batches"] == 2
    assert last["result"]["stored_blocks"] == {"GPU": 2}
    tsv = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--count", "1", "-o", "tsv")
    assert tsv.stdout.splitlines() == ["0\t0\tfalse\tstored GPU 2 blocks [1, 2]"]


def test_kv_events_tail_deadline_and_losses(
    fake_subscriber: type[FakeSubscriber], monkeypatch: pytest.MonkeyPatch
) -> None:
    short = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--count", "5", "--deadline", "0.3")
    assert short.exit_code == ExitCode.DEADLINE
    assert len(short.stdout.splitlines()) == 3
    as_json = invoke(
        "kv-events", "tail", "--endpoint", "tcp://h:1", "--count", "5", "--deadline", "0.3", "--json"
    )
    assert as_json.exit_code == ExitCode.DEADLINE
    assert check_schema(json.loads(as_json.stdout.splitlines()[-1]))["error"]["type"] == "WaitTimeoutError"
    assert invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--duration", "0.3").exit_code == 2

    class Lossy(FakeSubscriber):
        def __init__(self, endpoint: str | None = None, **kw: Any) -> None:
            super().__init__(endpoint, lossy=True, **kw)

    monkeypatch.setattr("vllm_devclient.kv_events.KVEventSubscriber", Lossy)
    lossy = invoke("kv-events", "tail", "--endpoint", "tcp://h:1", "--deadline", "0.3")
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
    as_json = invoke("--url", B, "--retries", "0", "--json", "kv-events", "tail")
    assert doc(as_json)["error"]["type"] == "APIConnectionError"
    assert invoke("--url", A, "--url", B, "kv-events", "tail").exit_code == ExitCode.USAGE


def test_kv_events_tail_without_zmq_exits_seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_devclient.kv_events", None)
    result = invoke("kv-events", "tail", "--endpoint", "tcp://h:1")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert "pip install 'vllm-devclient[zmq]'" in result.stderr
    assert (
        doc(invoke("--json", "kv-events", "tail", "--endpoint", "tcp://h:1"))["error"]["type"]
        == "ImportError"
    )


# ---- docs/cli.md ------------------------------------------------------------------------------------------


def test_the_documented_schema_is_the_one_shipped() -> None:
    text = (ROOT / "docs" / "cli.md").read_text()
    block = text.split("<!-- schema:start -->")[1].split("<!-- schema:end -->")[0]
    envelope = {**SCHEMA, "$defs": {k: v for k, v in SCHEMA["$defs"].items() if k != "results"}}
    assert json.loads(block.strip().removeprefix("```json").removesuffix("```")) == envelope
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_docs_examples_are_valid_and_cover_every_tool() -> None:
    import re

    text = (ROOT / "docs" / "cli.md").read_text()
    examples = text.split("<!-- examples:start")[1].split("<!-- examples:end -->")[0]
    found = dict(re.findall(r"#### `([^`]+)`\n\n```jsonl?\n(.*?)\n```", examples, flags=re.S))
    commands = {" ".join(p) for p in _all_commands()}
    # Every tool has one; a record's command may come later (its result schema is generated at once).
    records = {r.command for r in (*ROUTES, *CALLS)}
    assert commands - records <= set(found) <= commands
    for command, block in found.items():
        *lines, last = block.splitlines() if command == "kv-events tail" else [block]
        assert check_schema(json.loads(last))["command"] == command
        for line in lines:
            jsonschema.validate(json.loads(line), {**SCHEMA["$defs"]["kv_batch"], "$defs": SCHEMA["$defs"]})
    # The other envelopes the page shows (outside the examples) hold too.
    blocks = re.findall(r"```json\n(\{.*?)\n```", text, flags=re.S)
    others = [b for b in blocks if '"schema": 1, "command"' in b]
    assert all(check_schema(json.loads(b)) for b in others)
    assert any(json.loads(b)["error"] is not None for b in others)  # the usage error
