"""The command line built from records: a made-up route record and a made-up wait record (the shapes the
client is growing: keyword-only flags, choices, JSON, lists, `deadline`, `request_timeout`, a hook) become
commands with no change in the CLI; and every record of the package has its command, help and result
schema."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import click
import jsonschema
import pytest
from click.testing import CliRunner

from vllm_devclient import AsyncDevClient
from vllm_devclient._base_client import WaitOptions
from vllm_devclient.answers import model_reader
from vllm_devclient.calls import CALLS
from vllm_devclient.cli import _generate, cli
from vllm_devclient.models import WeightInfo
from vllm_devclient.records import Call, Cli, Param, Route
from vllm_devclient.routes import ROUTES

A = "http://a.test"
ROOT = Path(__file__).resolve().parents[1]

CHECKER = Route(
    name="weight_checker_next",
    method="POST",
    path="/weight_checker_next",
    reader=model_reader(WeightInfo),
    doc="Check the weights (a route of the next release).",
    answer=WeightInfo,
    params=(
        Param(name="action", type=Literal["start", "check"], positional=True, help="What to do."),
        Param(
            name="baseline", type=Mapping[str, Any] | None, default=None, help="Checksums to compare with."
        ),
        Param(name="strict", type=bool, default=True, help="Refuse partial matches."),
        Param(name="verbose", type=bool, default=False, help="Say more."),
        Param(name="limit", type=int | None, default=None, help="At most this many."),
        Param(name="tags", type=Sequence[str] | None, default=None, option="--tag", help="A tag; repeat."),
        Param(name="fields", type=Sequence[Mapping[str, Any]], default=(), help="Field specs."),
        Param(
            name="ids",
            type=Iterable[str] | None,
            default=None,
            argument=True,
            none_flag=("--every", "Every one of them."),
            help="The ids.",
        ),
    ),
    cli=Cli(topic="weights", verdict=lambda value, given: "refused" if value == "no" else None),
)
LOADED = Call(
    name="wait_until_loaded",
    doc="Wait until the weights are loaded.",
    answer=None,
    params=(
        Param(name="deadline", type=float, default=90.0, role="deadline", help="Seconds for the whole wait."),
        Param(name="request_timeout", type=float, default=5.0, role="request_timeout", help="Each try."),
        Param(name="interval", type=float, default=0.05, help="Seconds between tries."),
        Param(
            name="on_attempt",
            type=Callable[[int, object], None] | None,
            default=None,
            role="hook",
            help="Called after each try.",
        ),
    ),
    options="wait",
    cli=Cli(topic="wait", command="wait-loaded"),
)


def _options(command: click.Command) -> dict[str, click.Parameter]:
    return {p.name: p for p in command.params if not getattr(p, "hidden", False) and p.name}


def test_the_parameters_of_a_new_route_become_arguments_and_options_with_their_help() -> None:
    command = _generate.build_command(CHECKER)
    assert command.name == "weight-checker-next" and command.help == CHECKER.doc
    params = _options(command)
    assert set(params) == {
        "action",
        "baseline",
        "strict",
        "verbose",
        "limit",
        "tags",
        "fields",
        "ids",
        "none_ids",
    }
    assert isinstance(params["action"], click.Argument)
    assert params["action"].type.choices == ("start", "check")  # type: ignore[attr-defined]
    assert isinstance(params["ids"], click.Argument) and params["ids"].nargs == -1
    assert params["none_ids"].opts == ["--every"]
    assert params["strict"].opts == ["--strict"] and params["strict"].secondary_opts == ["--no-strict"]  # type: ignore[attr-defined]
    assert params["verbose"].is_flag and not params["verbose"].secondary_opts  # type: ignore[attr-defined]
    assert params["tags"].opts == ["--tag"] and params["tags"].multiple  # type: ignore[attr-defined]
    assert params["limit"].type is click.INT
    assert isinstance(params["baseline"].type, _generate.JSONParam) and params["baseline"].type.kinds == (
        dict,
    )
    assert params["fields"].type.kinds == (list,)  # type: ignore[attr-defined]
    by_name = {p.name: p for p in CHECKER.params}
    for name, param in params.items():
        if isinstance(param, click.Option) and name in by_name:
            assert by_name[name].help in (param.help or ""), name


def test_a_wait_shows_deadline_and_interval_and_hides_each_tries_bound_and_the_hook() -> None:
    wait = _options(_generate.build_command(LOADED))
    assert set(wait) == {"deadline", "interval"}
    assert wait["deadline"].opts == ["--deadline"] and wait["deadline"].default == 90.0  # type: ignore[attr-defined]
    assert "Exit 4" in (wait["deadline"].help or "")  # type: ignore[attr-defined]
    assert wait["interval"].metavar == "SECONDS"  # type: ignore[attr-defined]


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, dict[str, Any]]]:
    """The made-up methods on AsyncDevClient, recording their calls; their commands in the CLI."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def recording(name: str, answer: Any) -> Any:
        async def method(self: AsyncDevClient, **kwargs: Any) -> Any:
            calls.append((name, kwargs))
            if kwargs.get("on_attempt"):
                kwargs["on_attempt"](1, None)
            return answer

        return method

    monkeypatch.setattr(
        AsyncDevClient, CHECKER.name, recording(CHECKER.name, {"ok": 1.23456789}), raising=False
    )
    monkeypatch.setattr(AsyncDevClient, LOADED.name, recording(LOADED.name, None), raising=False)
    for command, category, aliases in _generate.method_commands((CHECKER, LOADED)):
        monkeypatch.setitem(cli.commands, command.name, command)  # type: ignore[attr-defined]
        for alias in aliases:
            monkeypatch.setitem(cli.aliases, alias, command.name)  # type: ignore[attr-defined]
        monkeypatch.setitem(cli.categories, command.name, category)  # type: ignore[attr-defined]
    return calls


def run(*args: str) -> Any:
    return CliRunner().invoke(
        cli, ["--url", A, *args], env={"VLLM_DEVCLIENT_URL": ""}, catch_exceptions=False
    )


def test_a_new_route_runs_with_its_aliases_and_only_the_given_options_are_sent(
    routes: list[tuple[str, dict[str, Any]]],
) -> None:
    result = run(
        "--json", "weight-checker-next", "check", "x", "--baseline", '{"w": 1}', "--no-strict", "--tag", "a"
    )
    assert result.exit_code == 0, result.output
    assert routes[-1] == (
        "weight_checker_next",
        {"action": "check", "baseline": {"w": 1}, "strict": False, "tags": ["a"], "ids": ["x"]},
    )
    assert json.loads(result.stdout)["targets"][A]["result"] == {"ok": 1.234568}
    assert run("weight_checker_next", "start", "--every").exit_code == 0
    assert routes[-1][1] == {"action": "start", "ids": None}  # None asked for with its flag
    assert run("weight-checker-next", "start").exit_code == 2  # neither ids nor --every
    bad = run("weight-checker-next", "stop", "--every")
    assert bad.exit_code == 2 and "'stop' is not one of 'start', 'check'" in bad.stderr
    assert "weight-checker-next" in run("--help").stdout


def test_a_wait_gets_deadline_its_hook_and_the_global_timeout_for_each_try(
    routes: list[tuple[str, dict[str, Any]]],
) -> None:
    result = run("--json", "wait-loaded", "--deadline", "5")
    assert result.exit_code == 0, result.output
    name, kwargs = routes[-1]
    assert name == "wait_until_loaded" and kwargs["deadline"] == 5.0 and callable(kwargs["on_attempt"])
    assert "request_timeout" not in kwargs and "timeout" not in kwargs
    assert json.loads(result.stdout)["targets"][A]["result"] == {}  # a None answer is not null
    assert run("--timeout", "0.5", "wait_until_loaded").exit_code == 0
    assert routes[-1][1]["request_timeout"] == 0.5 and "deadline" not in routes[-1][1]


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


def test_every_record_is_a_command_with_its_doc_and_every_option_its_help() -> None:
    commands = {command.name: command for command, _, _ in _generate.method_commands()}
    for record in (*ROUTES, *CALLS):
        command = commands[record.command]
        assert command.help == record.doc
        helps = {p.name: p.help for p in command.params if isinstance(p, click.Option) and not p.hidden}
        for p in record.params:
            if p.name in helps:
                assert p.help in (helps[p.name] or ""), (record.name, p.name)


def test_every_record_has_a_result_schema_and_it_checks_the_answer_type() -> None:
    schema = json.loads((ROOT / "vllm_devclient" / "cli" / "schema.json").read_text())
    rules = {
        rule["if"]["properties"]["command"]["const"]: rule for rule in schema["$defs"]["results"]["allOf"]
    }
    assert set(rules) == {r.command for r in (*ROUTES, *CALLS)}
    validator = jsonschema.Draft202012Validator(schema)

    def envelope(command: str, result: Any) -> dict[str, Any]:
        target = {"ok": True, "exit_code": 0, "result": result, "error": None, "elapsed_s": 0.1}
        return {
            "schema": 1, "command": command, "ok": True, "exit_code": 0, "elapsed_s": 0.1,
            "targets": {A: target}, "result": None, "error": None, "rollback": None,
        }  # fmt: skip

    assert validator.is_valid(envelope("reset-prefix-cache", {"success": True, "status_code": 200}))
    assert not validator.is_valid(envelope("reset-prefix-cache", {"success": "yes", "status_code": 200}))
    assert validator.is_valid(envelope("is-paused", False)) and not validator.is_valid(
        envelope("is-paused", {})
    )
    assert validator.is_valid(envelope("reset-mm-cache", {})) and not validator.is_valid(
        envelope("reset-mm-cache", 1)
    )
    assert validator.is_valid(envelope("wait-ready", {"state": "ready"}))
    assert not validator.is_valid(envelope("barrier", {"attempts": 1}))


def test_the_hand_written_methods_have_the_signatures_and_docs_their_records_give() -> None:
    """A `Call` record describes a method written by hand: the two must agree (names, order, kinds and
    defaults of the parameters; the docstring starts with the record's doc and holds each parameter's help
    as its `Args:` line)."""
    for record in CALLS:
        method = getattr(AsyncDevClient, record.name)
        doc = inspect.getdoc(method) or ""
        assert doc.splitlines()[0] == record.doc, record.name
        flat = " ".join(doc.split())
        for p in record.params if record.options != "wait" else ():
            assert f"{p.name}: {p.help[:1].lower()}{p.help[1:]}" in flat, (record.name, p.name)
        params = list(inspect.signature(method).parameters.values())[1:]
        if record.options == "wait":
            (wait,) = params
            assert wait.kind is wait.VAR_KEYWORD and "WaitOptions" in str(wait.annotation), record.name
            assert list(WaitOptions.__annotations__) == [p.name for p in record.params], record.name
            continue
        if record.options == "request":
            assert params[-1].kind is params[-1].VAR_KEYWORD and "RequestOptions" in str(
                params[-1].annotation
            )
            params = params[:-1]
        assert [p.name for p in params] == [p.name for p in record.params], record.name
        for p, want in zip(params, record.params, strict=True):
            positional = p.kind is p.POSITIONAL_OR_KEYWORD
            assert positional == want.positional, (record.name, p.name)
            default = want.default if not want.required else inspect.Parameter.empty
            assert p.default == default, (record.name, p.name)
