"""What the command line's tests (tests/test_cli_*.py) share: the CLI run in-process (click's CliRunner),
every JSON document checked against the documented schema, and a respx `mock` for whole target URLs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import respx
from click.testing import CliRunner, Result

import vllm_devclient.errors as sdk_errors
from vllm_devclient.cli import cli

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


@pytest.fixture(name="mock")
def cli_mock() -> respx.MockRouter:
    """respx for whole target URLs (A, B, C): a module that imports this fixture gets it as `mock`, in place
    of tests/conftest.py's, whose one base URL the CLI's fleets do not share."""
    with respx.mock(assert_all_called=False) as router:
        yield router


def all_commands() -> list[list[str]]:
    paths = []
    for name, command in cli.commands.items():
        sub = getattr(command, "commands", None)
        paths += [[name, s] for s in sub] if sub else [[name]]
    return paths
