"""scripts/weight_sync_compare.py's scenarios against both real frontends and a misbehaving server: our
column holds what docs/weight-sync.md says, and the doc's table is the committed run's."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from vllm_devclient.testing.bounds import timeout_bound
from vllm_devclient.testing.frontends import Frontend
from vllm_devclient.testing.misbehaving import MisbehavingServer

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "weight_sync_compare.py"

pytestmark = pytest.mark.needs("vllm")


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("weight_sync_compare", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def compare() -> ModuleType:
    return _load()


@pytest.fixture(scope="module")
def ours(
    compare: ModuleType, python_frontend: Frontend, rust_frontend: Frontend
) -> dict[str, dict[str, Any]]:
    """Our column of every scenario (vLLM's takes ~8 s more, most of it the trickled answer)."""
    out: dict[str, dict[str, Any]] = {}
    with MisbehavingServer() as server:
        for scenario in compare.SCENARIOS:
            out[scenario.name] = compare.run_scenario(
                scenario, "ours", [python_frontend, rust_frontend], server
            )
    return out


@pytest.mark.frontend
def test_a_round_with_ipc_handles_goes_through(ours: dict[str, dict[str, Any]]) -> None:
    for where in ("python", "rust"):
        cell = ours["round_with_ipc_handles"][where]
        assert (cell.outcome, cell.left_open) == ("ok", [])


@pytest.mark.frontend
def test_an_engine_error_is_typed_and_the_update_finished(ours: dict[str, dict[str, Any]]) -> None:
    for where in ("python", "rust"):
        cell = ours["engine_fails_a_batch"][where]
        assert (
            cell.outcome.startswith("EngineCallError: POST /update_weights -> 500") and cell.left_open == []
        )


@pytest.mark.frontend
def test_deadlines_hold_where_vllms_read_timeout_does_not(
    compare: ModuleType, ours: dict[str, dict[str, Any]]
) -> None:
    for cell in [*ours["engine_hangs_at_start"].values(), ours["trickled_answer"]["raw"]]:
        assert cell.outcome.startswith("APITimeoutError") and cell.seconds <= timeout_bound(compare.TIMEOUT)


@pytest.mark.frontend
def test_a_partial_fleet_start_leaves_nothing_open(ours: dict[str, dict[str, Any]]) -> None:
    cell = ours["fleet_start_fails_on_one"]["fleet"]
    assert (
        cell.outcome.startswith("FleetError: start_weight_update failed on 1 of 2") and cell.left_open == []
    )


@pytest.mark.frontend
def test_nothing_that_may_have_arrived_is_sent_again(ours: dict[str, dict[str, Any]]) -> None:
    assert ours["dropped_after_read"]["raw"].outcome.startswith("APIConnectionError")
    assert ours["dropped_after_read"]["raw"].requests == 1
    assert ours["gateway_502"]["raw"].outcome.startswith("InternalServerError")
    assert ours["gateway_502"]["raw"].requests == 1
    assert ours["nothing_listens"]["raw"].outcome.endswith("(nothing was sent)")


def _masked(outcome: str) -> str:
    """Ports and engine call ids masked; cut short of the cell's end (a longer id moves the cut)."""
    masked = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", outcome)
    return re.sub(r"call_id=\d+", "call_id=N", masked)[:140]


@pytest.mark.frontend
def test_our_column_in_the_docs_is_what_the_sdk_says_today(ours: dict[str, dict[str, Any]]) -> None:
    # The committed run must not go stale: rerun the script (module docstring) when a message changes.
    run = json.loads((ROOT / "docs" / "weight_sync_compare.json").read_text())
    committed = {(r["name"], w): _masked(c["outcome"]) for r in run["rows"] for w, c in r["ours"].items()}
    live = {(name, w): _masked(c.outcome) for name, cells in ours.items() for w, c in cells.items()}
    assert live == committed


def test_the_docs_table_is_the_committed_run(compare: ModuleType) -> None:
    run = json.loads((ROOT / "docs" / "weight_sync_compare.json").read_text())
    doc = (ROOT / "docs" / "weight-sync.md").read_text()
    assert [row["name"] for row in run["rows"]] == [s.name for s in compare.SCENARIOS]
    assert compare.table(run) in doc
