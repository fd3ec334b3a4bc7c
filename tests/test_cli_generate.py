"""The generator of the command line: client signatures and docstrings -> subcommands. Written against made-up
methods shaped like the ones the client is growing (keyword-only flags, `deadline=` and `request_timeout=` on
waits, per-call options, `on_attempt`, new routes), so a signature change on the client needs no change in
the CLI."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import click
import pytest
from click.testing import CliRunner

from vllm_devclient import AsyncDevClient
from vllm_devclient.cli import _generate, _signature, cli
from vllm_devclient.cli._overrides import Override
from vllm_devclient.cli._signature import REQUIRED, parse_docstring, read_method
from vllm_devclient.client import NOT_GIVEN, TimeoutArg
from vllm_devclient.fleet import CLIENT_METHODS
from vllm_devclient.models import WeightInfo

if TYPE_CHECKING:
    from vllm_devclient.metrics import MetricsSnapshot  # only for type checkers, like the client's

A = "http://a.test"


def test_docstring_summary_and_google_args() -> None:
    doc = """Load a LoRA adapter into the engine,
    from a local folder.

    More detail that is not the summary.

    Args:
        lora_name: The name requests
            use to select it.
        lora_path (str): Where it is.
        *extra: ignored.

    Returns:
        lora_path: not a parameter here.
    """
    summary, helps = parse_docstring(doc)
    assert summary == "Load a LoRA adapter into the engine, from a local folder."
    assert helps == {
        "lora_name": "The name requests use to select it.",
        "lora_path": "Where it is.",
        "extra": "ignored.",
    }


def test_docstring_sphinx_params_and_none() -> None:
    summary, helps = parse_docstring(
        "Reset.\n\n:param str reset_external: Also the\n    CPU tier.\n:returns: x"
    )
    assert summary == "Reset." and helps == {"reset_external": "Also the CPU tier."}
    assert parse_docstring(None) == ("", {})


class Fake:
    """Methods shaped like the client's next release (string annotations, as under `from __future__`)."""

    async def weight_checker(
        self,
        action: Literal["start", "check"],
        *,
        baseline: Mapping[str, Any] | None = None,
        strict: bool = True,
        verbose: bool = False,
        limit: int | None = None,
        tags: Sequence[str] | None = None,
        fields: Sequence[Mapping[str, Any]] = (),
        timeout: TimeoutArg = NOT_GIVEN,
        extra_headers: Mapping[str, str] | None = None,
        extra_query: Mapping[str, object] | None = None,
        extra_body: object | None = None,
    ) -> WeightInfo:
        """Check the weights.

        Args:
            action: What to do.
            baseline: Checksums to compare with.
        """
        raise NotImplementedError

    async def wait_until_loaded(
        self,
        *,
        deadline: float = 90.0,
        request_timeout: float = 5.0,
        interval: float = 0.05,
        on_attempt: Callable[[int, object], None] | None = None,
        timeout: float | None = None,  # the deprecated alias of deadline
    ) -> MetricsSnapshot:
        raise NotImplementedError

    async def wait_legacy(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        raise NotImplementedError


def test_roles_and_shapes_come_from_the_signature() -> None:
    info = read_method("weight_checker", Fake.weight_checker)
    assert info.summary == "Check the weights."
    by = {p.name: p for p in info.params}
    assert (by["action"].role, by["action"].shape, by["action"].choices) == (
        "argument",
        "choice",
        ("start", "check"),
    )
    assert (by["baseline"].shape, by["baseline"].json_kinds, by["baseline"].optional) == (
        "json",
        (dict,),
        True,
    )
    assert (by["strict"].shape, by["strict"].default, by["verbose"].default) == ("bool", True, False)
    assert (by["limit"].shape, by["limit"].optional) == ("int", True)
    assert by["tags"].shape == "multiple" and by["fields"].json_kinds == (list,)
    assert {p.name for p in info.params if p.role == "per_call"} == {
        "timeout", "extra_headers", "extra_query", "extra_body",
    }  # fmt: skip
    assert by["baseline"].help == "Checksums to compare with." and by["action"].default is REQUIRED

    wait = {p.name: p for p in read_method("wait_until_loaded", Fake.wait_until_loaded).params}
    assert (wait["deadline"].role, wait["request_timeout"].role, wait["on_attempt"].role) == (
        "deadline", "request_timeout", "hook",
    )  # fmt: skip
    assert wait["timeout"].role == "per_call"  # a method with deadline=: timeout is never the deadline
    legacy = read_method("wait_legacy", Fake.wait_legacy).params[0]
    assert (legacy.name, legacy.role, legacy.default) == ("timeout", "deadline", 60.0)


def _options(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if not getattr(p, "hidden", False) and p.name}


def test_click_parameters_of_a_new_route() -> None:
    command = _generate.build_command(read_method("weight_checker", Fake.weight_checker), Override())
    assert command.name == "weight-checker" and command.help == "Check the weights."
    params = _options(command)
    assert set(params) == {"action", "baseline", "strict", "verbose", "limit", "tags", "fields"}
    assert isinstance(params["action"], click.Argument) and params["action"].type.choices == (
        "start",
        "check",
    )  # type: ignore[attr-defined]
    assert params["strict"].opts == ["--strict"] and params["strict"].secondary_opts == ["--no-strict"]  # type: ignore[attr-defined]
    assert params["verbose"].is_flag and not params["verbose"].secondary_opts  # type: ignore[attr-defined]
    assert params["tags"].multiple and params["limit"].type is click.INT  # type: ignore[attr-defined]
    assert isinstance(params["baseline"].type, _generate.JSONParam)
    for param in params.values():
        if isinstance(param, click.Option):
            assert param.help, param.name
    wait = _generate.build_command(read_method("wait_until_loaded", Fake.wait_until_loaded), Override())
    assert set(_options(wait)) == {"deadline", "interval"}
    assert _options(wait)["deadline"].opts == ["--deadline"] and _options(wait)["deadline"].default == 90.0
    assert _options(wait)["interval"].metavar == "SECONDS"  # type: ignore[attr-defined]


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The fake methods on AsyncDevClient and in the method table, recording their calls; the CLI rebuilt."""
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def recording(name: str, original: Any, answer: Any) -> Any:
        async def method(self: AsyncDevClient, *args: Any, **kwargs: Any) -> Any:
            calls.append((name, args, kwargs))
            if kwargs.get("on_attempt"):
                kwargs["on_attempt"](1, None)
            return answer

        method.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
        method.__doc__ = original.__doc__
        return method

    checker = recording("weight_checker", Fake.weight_checker, {"ok": 1.23456789})
    monkeypatch.setattr(AsyncDevClient, "weight_checker", checker, raising=False)
    wait = recording("wait_until_loaded", Fake.wait_until_loaded, None)
    monkeypatch.setattr(AsyncDevClient, "wait_until_loaded", wait, raising=False)
    monkeypatch.setattr(
        _signature, "CLIENT_METHODS", CLIENT_METHODS | {"weight_checker", "wait_until_loaded"}
    )
    for command, category, aliases in _generate.method_commands():
        monkeypatch.setitem(cli.commands, command.name, command)  # type: ignore[attr-defined]
        for alias in aliases:
            monkeypatch.setitem(cli.aliases, alias, command.name)  # type: ignore[attr-defined]
        monkeypatch.setitem(cli.categories, command.name, category)  # type: ignore[attr-defined]
    return calls


def run(*args: str) -> Any:
    return CliRunner().invoke(
        cli, ["--url", A, *args], env={"VLLM_DEVCLIENT_URL": ""}, catch_exceptions=False
    )


def test_a_new_route_is_a_subcommand_with_aliases_and_only_given_options_are_sent(
    routes: list[tuple[str, tuple[Any, ...], dict[str, Any]]],
) -> None:
    result = run("--json", "weight-checker", "check", "--baseline", '{"w": 1}', "--no-strict", "--tags", "a")
    assert result.exit_code == 0, result.output
    assert routes[-1] == (
        "weight_checker",
        (),
        {"action": "check", "baseline": {"w": 1}, "strict": False, "tags": ["a"]},
    )
    assert json.loads(result.stdout)["targets"][A]["result"] == {"ok": 1.234568}
    assert run("weight_checker", "start").exit_code == 0 and routes[-1][2] == {"action": "start"}
    bad = run("weight-checker", "stop")
    assert bad.exit_code == 2 and "'stop' is not one of 'start', 'check'" in bad.stderr
    assert "weight-checker" in run("--help").stdout


def test_a_wait_with_deadline_request_timeout_and_on_attempt(
    routes: list[tuple[str, tuple[Any, ...], dict[str, Any]]],
) -> None:
    result = run("--json", "wait-until-loaded", "--deadline", "5")
    assert result.exit_code == 0, result.output
    name, _, kwargs = routes[-1]
    assert name == "wait_until_loaded" and kwargs["deadline"] == 5.0 and callable(kwargs["on_attempt"])
    assert "request_timeout" not in kwargs and "timeout" not in kwargs
    assert json.loads(result.stdout)["targets"][A]["result"] == {}  # a None answer is not null
    assert run("--timeout", "0.5", "wait-until-loaded").exit_code == 0
    assert routes[-1][2]["request_timeout"] == 0.5 and "deadline" not in routes[-1][2]


def test_every_generated_command_leaves_out_the_per_call_options() -> None:
    for command, _, _ in _generate.method_commands():
        names = {opt for p in command.params if not getattr(p, "hidden", False) for opt in p.opts}
        for per_call in (
            "--extra-headers",
            "--extra-query",
            "--extra-body",
            "--request-timeout",
            "--on-attempt",
        ):
            assert per_call not in names, (command.name, per_call)
        assert "--timeout" not in names, command.name
