"""The command line's exit codes and error types: one code per kind of failure (and what a fleet's mixed
failures combine to), usage errors, deadlines, a missing extra, an interrupt; the error in the JSON document
is the documented one. The output formats are in test_cli_output.py."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest
import respx

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
from vllm_devclient.cli import ExitCode, UnsuccessfulResultError, combine, exit_code_for

from .cli_support import (
    A,
    B,
    cli_mock,  # noqa: F401  (the `mock` fixture: respx without a base URL)
    doc,
    invoke,
)


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


# ---- each failure, through a command -----------------------------------------------------------------------


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


def test_a_transport_without_its_package_exits_seven_naming_the_extra(
    mock: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_DEVCLIENT_TRANSPORT", "httpx2")
    monkeypatch.setitem(sys.modules, "httpx2", None)
    result = invoke("--url", A, "health")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "needs the [httpx2] extra" in result.stderr
    assert "pip install 'vllm-devclient[httpx2]'" in result.stderr
    assert mock.calls.call_count == 0


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
