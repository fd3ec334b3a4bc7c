"""The command line's help and docs/cli.md: every command listed once, every help a screen with every
option explained, client method names as aliases, and the documented schema and examples the ones shipped."""

from __future__ import annotations

import json

import jsonschema
import pytest
import respx

from vllm_devclient.calls import CALLS
from vllm_devclient.cli import cli
from vllm_devclient.cli._settings import GLOBAL_OPTIONS
from vllm_devclient.routes import ROUTES

from .cli_support import (
    ROOT,
    SCHEMA,
    A,
    all_commands,
    check_schema,
    cli_mock,  # noqa: F401  (the `mock` fixture: respx without a base URL)
    doc,
    invoke,
)


def test_group_help_fits_a_screen_lists_every_command_once_and_never_shows_the_key() -> None:
    result = invoke("--help", env={"VLLM_API_KEY": "sk-very-secret"})
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    # 42, one line for --total-timeout, two for the checkpoint commands (vLLM 0.34) in the sleep, wait rows.
    assert len(lines) <= 45, result.stdout
    assert "sk-very-secret" not in result.output
    first = lines.index(next(x for x in lines if x.startswith("Commands"))) + 1
    listed: list[str] = []
    for line in lines[first : lines.index("", first)]:
        words = line.split()
        listed += words[1:] if line[2] != " " else words  # a category starts the line
    assert sorted(listed) == sorted(cli.commands)
    for needle in ("--timeout SECONDS", "-o, --output FORMAT", "--json", "Exit codes: 0 ok", "4 --deadline"):
        assert needle in result.stdout


@pytest.mark.parametrize("path", all_commands(), ids=lambda p: " ".join(p))
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


# ---- docs/cli.md -------------------------------------------------------------------------------------------


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
    commands = {" ".join(p) for p in all_commands()}
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
    (usage,) = [json.loads(b) for b in others if json.loads(b)["error"] is not None]
    # The usage error is what the command prints today (`sleep --level 5`, as the page says).
    result = invoke("-o", "json", "sleep", "--level", "5")
    printed = json.loads(result.stdout)
    assert (printed["command"], printed["exit_code"], printed["error"]) == (
        usage["command"],
        usage["exit_code"],
        usage["error"],
    )
