"""Messages that name the culprit (issue 37): the URL at fault, a path prefix behind a 404, the subcommand's
own usage for its bad option, the choices an option takes."""

from __future__ import annotations

import pytest
from click.testing import CliRunner, Result

from vllm_devclient import APITimeoutError, AsyncDevClient, DevClient, InvalidParameterError, NotFoundError
from vllm_devclient.cli import ExitCode, cli
from vllm_devclient.testing.misbehaving import Hang, MisbehavingServer


def invoke(*args: str) -> Result:
    env = {"VLLM_DEVCLIENT_URL": "", "VLLM_API_KEY": "", "VLLM_DEVCLIENT_TIMEOUT": ""}
    return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("localhost:8000", "'localhost:8000'"),
        ("ftp://user:hunter2@host:21/x", "'ftp://user:***@host:21/x'"),
        ("http://h:99999", "'http://h:99999'"),
        ("http://user:hunter2@h:8000/?key=k", "'http://user:***@h:8000/'"),
    ],
)
def test_a_url_error_names_the_url_never_its_password(url: str, shown: str) -> None:
    with pytest.raises(InvalidParameterError) as caught:
        DevClient(url)
    assert shown in str(caught.value) and "hunter2" not in str(caught.value)


def test_a_url_without_a_scheme_suggests_one() -> None:
    with pytest.raises(InvalidParameterError, match=r"\('http://localhost:8000'\?\)"):
        DevClient("localhost:8000")


def test_with_several_urls_the_cli_names_the_one_at_fault_under_the_commands_usage() -> None:
    result = invoke("--url", "http://127.0.0.1:8000", "--url", "localhost:8001", "health")
    assert result.exit_code == ExitCode.USAGE
    assert "'localhost:8001'" in result.output and "health [OPTIONS]" in result.output


def test_a_404_under_a_path_prefix_says_to_drop_the_prefix() -> None:
    with MisbehavingServer() as server, DevClient(server.base_url + "/api/") as client:  # 404 everywhere
        with pytest.raises(NotFoundError) as caught:
            client.health()
    assert "the base URL has the path '/api'" in str(caught.value)
    assert "vLLM serves its routes at the root" in str(caught.value)
    with MisbehavingServer() as server, DevClient(server.base_url) as client:
        with pytest.raises(NotFoundError) as caught:
            client.health()
    assert "path" not in str(caught.value)  # no prefix, no such hint


def test_a_bad_option_shows_the_subcommands_usage_and_lists_the_choices() -> None:
    result = invoke("sleep", "--level", "5")
    assert result.exit_code == ExitCode.USAGE
    assert "sleep [OPTIONS]" in result.output and "Try 'cli sleep --help'" in result.output
    assert "'5' is not one of '0', '1', '2'" in result.output
    assert "--level [0|1|2]" in invoke("sleep", "--help").output


def test_the_sdk_refusing_an_argument_shows_the_subcommands_usage() -> None:
    result = invoke("--url", "http://127.0.0.1:1", "wait-ready", "--deadline", "nan")
    assert result.exit_code == ExitCode.USAGE and "wait-ready [OPTIONS]" in result.output


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_timed_out_completion_names_the_exchange_that_timed_out_and_why(kind: str) -> None:
    # Without model= a completion first looks the model up on /v1/models: a hang there says so.
    with MisbehavingServer() as server:
        server.script("/v1/models", Hang())
        server.script("/v1/completions", Hang())

        async def complete(**kw: str) -> None:
            if kind == "sync":
                with DevClient(server.base_url, timeout=0.5, max_retries=0) as client:
                    client.completion("hi", **kw)
            else:
                async with AsyncDevClient(server.base_url, timeout=0.5, max_retries=0) as aclient:
                    await aclient.completion("hi", **kw)

        with pytest.raises(APITimeoutError) as lookup:
            await complete()
        with pytest.raises(APITimeoutError) as sent:
            await complete(model="m")
    assert str(lookup.value).startswith("GET /v1/models timed out") and lookup.value.path == "/v1/models"
    assert "looking up the model for POST /v1/completions (model= skips it)" in str(lookup.value)
    assert str(sent.value).startswith("POST /v1/completions timed out") and "/v1/models" not in str(
        sent.value
    )


def test_pythons_own_argument_errors_name_the_public_class_never_a_private_base() -> None:
    import asyncio

    from vllm_devclient.fleet import AsyncFleet, Fleet

    client, aclient = DevClient("http://vllm-0.invalid:8000"), AsyncDevClient("http://vllm-0.invalid:8000")
    fleet, afleet = Fleet(["http://vllm-0.invalid:8000"]), AsyncFleet(["http://vllm-0.invalid:8000"])
    calls = {
        "DevClient.completion()": lambda: client.completion(),  # type: ignore[call-arg]
        "DevClient.health()": lambda: client.health(1),  # type: ignore[call-arg]
        "DevClient.wait_until_ready()": lambda: client.wait_until_ready(1, 2, 3),  # type: ignore[misc]
        "DevClient.weight_update()": lambda: client.weight_update(1, 2),  # type: ignore[call-arg]
        "DevClient.paused()": lambda: client.paused(1, 2, 3, 4),  # type: ignore[call-arg]
        "DevClient.with_options()": lambda: client.with_options(1),  # type: ignore[misc]
        "DevClient.health() takes": lambda: client.with_raw_response.health(1),  # type: ignore[call-arg]
        "AsyncDevClient.health()": lambda: asyncio.run(aclient.health(1)),  # type: ignore[call-arg]
        "Fleet.health()": lambda: fleet.health(1),  # type: ignore[call-arg]
        "AsyncFleet.is_paused()": lambda: afleet.is_paused(1),  # type: ignore[call-arg]
    }
    for public, call in calls.items():
        with pytest.raises(TypeError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(public) and not message.split(".")[0].startswith("_"), message
