"""Scenarios of one's own beside the built-in ones (issue 37): `--scenarios-from` for parity and for the
fixture tools' record and drift (`python -m tools.fixtures`), `drift` taking record's selection, its fix hint
repeating the options used. On the real vllm-rs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tools.fixtures import load_fixtures, write_documents
from tools.fixtures.cli import cli
from vllm_devclient.cli import ExitCode
from vllm_devclient.testing.own_scenarios import ScenarioSourceError, catalogue, load, select
from vllm_devclient.testing.scenarios import SCENARIOS

PINS = """
from vllm_devclient.testing.contract import Scenario, call, returns

SCENARIOS = (
    Scenario(
        "my_pause_is_seen",
        "pause (keep), then /is_paused says so",
        lambda c: (c.pause(mode="keep"), c.is_paused())[1],
        returns(True),
        (call("pause_generation", "keep", True), call("is_scheduler_paused")),
    ),
)
"""


@pytest.fixture
def pins(tmp_path: Path) -> Path:
    path = tmp_path / "my_pins.py"
    path.write_text(PINS)
    return path


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_a_module_of_ones_own_joins_the_built_in_scenarios(pins: Path, tmp_path: Path) -> None:
    (mine,) = load(str(pins))
    assert mine.name == "my_pause_is_seen"
    every = catalogue([str(pins)])
    assert every[: len(SCENARIOS)] == SCENARIOS and every[-1].name == mine.name
    chosen = select("health,my_pause_is_seen", [str(pins)])
    assert chosen is not None and [s.name for s in chosen] == ["health", "my_pause_is_seen"]
    assert select(None, ()) is None  # the built-in ones, as before
    clash = tmp_path / "clash.py"
    clash.write_text(PINS.replace("my_pause_is_seen", "health"))
    with pytest.raises(ScenarioSourceError, match="'health' is taken by the built-in scenarios"):
        catalogue([str(clash)])
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(ScenarioSourceError, match="has no SCENARIOS"):
        load(str(empty))
    with pytest.raises(ScenarioSourceError, match="give --scenarios-from"):
        select("my_pause_is_seen")


def test_record_then_drift_of_ones_own_selection_repeats_the_options_in_the_hint(
    pins: Path, tmp_path: Path
) -> None:
    out = str(tmp_path / "pins")
    selection = [
        "--frontends",
        "rust",
        "--scenarios",
        "health,my_pause_is_seen",
        "--scenarios-from",
        str(pins),
    ]
    recorded = invoke("record", "--out", out, *selection)
    assert recorded.exit_code == ExitCode.OK, recorded.output
    recorded = load_fixtures(out)
    assert [(f.frontend, f.scenario) for f in recorded] == [("rust", "health"), ("rust", "my_pause_is_seen")]
    mine = json.loads(json.dumps(recorded[-1].doc))
    assert mine["outcome"] == {
        "fields": {"": True},
        "kind": "result",
        "type": "bool",
    }  # the kit kept the pause
    # Checked with the same selection: no drift (on main, drift had no --scenarios: 100+ "newly recorded").
    same = invoke("drift", "--fixtures", out, *selection)
    assert same.exit_code == ExitCode.OK, same.output
    # A pinned answer that changed is drift, and the hint repeats the tree and the selection.
    mine["description"] = "what it said before"
    write_documents(out, [mine])
    drifted = invoke("drift", "--fixtures", out, *selection)
    assert drifted.exit_code == ExitCode.FAILED
    hint = next(line for line in drifted.stdout.splitlines() if line.startswith("re-record with:"))
    assert f"python -m tools.fixtures record --out {out} " + " ".join(selection) in hint
    # --against compares two trees with the same selection.
    against = invoke("drift", "--fixtures", out, "--against", out, "--scenarios", "health")
    assert against.exit_code == ExitCode.OK


def test_an_unknown_name_or_module_is_a_usage_error_naming_its_option(pins: Path) -> None:
    result = invoke("record", "--scenarios", "nope", "--scenarios-from", str(pins))
    assert result.exit_code == ExitCode.USAGE and "--scenarios" in result.output and "nope" in result.output
    result = invoke("drift", "--scenarios-from", "no_such_module_here")
    assert result.exit_code == ExitCode.USAGE and "--scenarios-from" in result.output
