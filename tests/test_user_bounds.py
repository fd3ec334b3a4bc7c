"""A timeout the user sets holds on every route, and the barrier tells an unreachable server from a busy one
(issue 37): against a raw server that never answers and a port nobody listens on, through the SDK and the
command line as a user runs them."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result

from vllm_devclient import (
    APITimeoutError,
    AsyncDevClient,
    AsyncFleet,
    BarrierTimeoutError,
    BarrierUnreachableError,
    DevClient,
    Fleet,
    FleetError,
)
from vllm_devclient.cli import ExitCode, cli
from vllm_devclient.testing.bounds import timeout_bound
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer, Hang
from vllm_devclient.testing.processes import free_port


@pytest.fixture
def silent() -> Iterator[MisbehavingServer]:
    """A server that reads every request and never answers any."""
    with MisbehavingServer(default=Hang()) as server:
        yield server


@pytest.fixture
def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nobody listens there


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    base = {"VLLM_DEVCLIENT_URL": "", "VLLM_API_KEY": "", "VLLM_DEVCLIENT_TIMEOUT": ""}
    return CliRunner().invoke(cli, list(args), env={**base, **(env or {})}, catch_exceptions=False)


# ---- timeouts --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("transport", [None, "httpx"])
def test_a_client_timeout_bounds_a_long_route(silent: MisbehavingServer, transport: str | None) -> None:
    with DevClient(silent.base_url, timeout=0.5, transport=transport) as client:  # type: ignore[arg-type]
        start = time.monotonic()
        with pytest.raises(APITimeoutError) as caught:
            client.collective_rpc("m")
    assert time.monotonic() - start < timeout_bound(0.5)
    # The message names the tries and the timeout per try, each by its own word, and no deadline.
    message = str(caught.value)
    assert "POST /collective_rpc timed out" in message and "1 try, timeout 0.5 s per try" in message
    assert "deadline" not in message
    assert silent.count("/collective_rpc") == 1  # never resent


def test_with_options_the_environment_and_a_fleet_bound_long_routes(
    silent: MisbehavingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with DevClient(silent.base_url) as client, pytest.raises(APITimeoutError):
        client.with_options(timeout=0.3).update_weights({"names": []})
    monkeypatch.setenv("VLLM_DEVCLIENT_TIMEOUT", "0.3")
    with DevClient(silent.base_url) as client:
        assert client._config.timeout_given
        with pytest.raises(APITimeoutError):
            client.start_weight_update()
    monkeypatch.delenv("VLLM_DEVCLIENT_TIMEOUT")
    with Fleet([silent.base_url], timeout=0.3) as fleet, pytest.raises(FleetError) as raised:
        fleet.collective_rpc("m")
    assert isinstance(raised.value.errors[silent.base_url], APITimeoutError)

    async def in_async() -> None:
        async with AsyncDevClient(silent.base_url, timeout=0.3) as client:
            with pytest.raises(APITimeoutError):
                await client.wake_up()
        async with AsyncFleet([silent.base_url], timeout=0.3, raise_on_error=False) as fleet:
            assert not (await fleet.collective_rpc("m")).all_ok

    asyncio.run(in_async())


def test_only_the_default_leaves_a_long_route_unbounded(silent: MisbehavingServer) -> None:
    with DevClient(silent.base_url) as client:
        assert not client._config.timeout_given
        assert client._timeouts({}, long_running=True).total is None
        assert client._timeouts({}, long_running=False).total == 30.0
    with DevClient(silent.base_url, timeout=7) as client:
        assert client._timeouts({}, long_running=True).total == 7


def test_a_retried_timeout_names_every_try(silent: MisbehavingServer) -> None:
    with DevClient(silent.base_url, timeout=0.2, max_retries=2) as client:
        with pytest.raises(APITimeoutError) as caught:
            client.is_paused()
    assert "3 tries, timeout 0.2 s per try" in str(caught.value)
    assert silent.count("/is_paused") == 3


def test_cli_timeout_bounds_collective_rpc_and_help_says_what_the_default_leaves(
    silent: MisbehavingServer,
) -> None:
    start = time.monotonic()
    result = invoke("--url", silent.base_url, "--timeout", "0.5", "-o", "json", "collective-rpc", "m")
    assert time.monotonic() - start < 0.5 + 1.0  # one try (never resent) and the command's own start
    assert result.exit_code == ExitCode.CONNECTION
    error = json.loads(result.stdout)["targets"][silent.base_url]["error"]
    assert error["type"] == "APITimeoutError" and "timeout 0.5 s per try" in error["message"]
    # The environment works like --timeout.
    result = invoke("--url", silent.base_url, "collective-rpc", "m", env={"VLLM_DEVCLIENT_TIMEOUT": "0.3"})
    assert result.exit_code == ExitCode.CONNECTION
    helped = " ".join(invoke("--help").stdout.split())
    assert "Seconds per try (default 30, long routes unbounded)" in helped


# ---- the barrier -----------------------------------------------------------------------------------------


def test_the_barrier_against_a_dead_server_says_unreachable(dead_url: str) -> None:
    with DevClient(dead_url) as client, pytest.raises(BarrierUnreachableError) as caught:
        client.reset_prefix_cache_until_success(deadline=0.5)
    err = caught.value
    assert isinstance(err, BarrierTimeoutError)  # still caught by code that catches the deadline
    assert err.reached == 0 and err.refused == 0 and err.attempts >= 1
    message = str(err)
    assert f"{dead_url} is unreachable" in message and "0 reached the server" in message
    assert "Blocks are still held" not in message


def test_the_barrier_of_a_busy_engine_counts_the_refusals_and_hints_in_keywords() -> None:
    with MisbehavingServer() as server:
        server.script("/reset_prefix_cache", [Answer(200, json={"success": False})])
        with DevClient(server.base_url) as client, pytest.raises(BarrierTimeoutError) as caught:
            client.reset_prefix_cache_until_success(deadline=0.3, step_engine=False)
    err = caught.value
    assert not isinstance(err, BarrierUnreachableError)
    assert err.reached == err.refused == err.attempts == server.count("/reset_prefix_cache")
    assert f"{err.refused} refused by the engine" in str(err)
    assert "pass reset_running_requests=True" in str(err) and "--reset" not in str(err)


def test_the_cli_barrier_exits_three_on_a_dead_server_and_hints_in_flags(dead_url: str) -> None:
    result = invoke("--url", dead_url, "barrier", "--deadline", "0.5")
    assert result.exit_code == ExitCode.CONNECTION, result.output
    assert "is unreachable" in result.output
    with MisbehavingServer() as server:
        server.script("/reset_prefix_cache", [Answer(200, json={"success": False})])
        result = invoke("--url", server.base_url, "barrier", "--deadline", "0.3", "--no-step-engine")
    assert result.exit_code == ExitCode.DEADLINE, result.output
    flat = " ".join(result.output.split())
    assert "--reset-running-requests" in flat and "reset_running_requests=True" not in flat
