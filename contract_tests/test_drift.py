"""The drift check (tools/fixtures) against the installed vllm: re-recording gives exactly the committed
fixtures, and a deliberately changed fixture is reported with its scenario and field (exit status 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tools.fixtures import diff_fixture_trees, drift, installed_vllm_version, load_fixtures, write_documents
from tools.fixtures.cli import cli
from vllm_devclient.testing.contract import ScenarioRun

pytestmark = [pytest.mark.frontend, pytest.mark.frontend_pool(harness=True)]

ROOT = Path(__file__).resolve().parent.parent / "rust_fixtures"


def test_rerecording_gives_no_diff_and_a_changed_fixture_is_named(
    harness_runs: list[ScenarioRun], tmp_path: Path
) -> None:
    """The recording comes from the suite's one pass over every scenario on both real frontends."""
    version = installed_vllm_version()
    committed = [json.loads(json.dumps(f.doc)) for f in load_fixtures(ROOT, [version])]
    assert committed, (
        f"no fixtures for the installed vllm {version}: record them with python -m tools.fixtures record"
    )

    # A copy of the committed fixtures with one answer changed, as if the server used to say otherwise.
    changed = tmp_path / "changed"
    doc = next(
        d for d in committed if (d["frontend"], d["scenario"]) == ("rust", "reset_prefix_cache_refused")
    )
    assert doc["exchanges"][0]["response"]["json"] == {"success": False}
    write_documents(changed, committed)
    doc["exchanges"][0]["response"]["json"]["success"] = True
    write_documents(changed, [doc])

    fresh = tmp_path / "fresh"
    drifts = drift(changed, runs=harness_runs, version=version, keep=fresh)
    assert [str(d) for d in drifts] == [
        f"{version}/rust/reset_prefix_cache_refused: exchanges[0].response.json.success: "
        "committed true, now false"
    ]

    # The re-recording itself equals the committed tree, field for field (masking makes it deterministic).
    unchanged = diff_fixture_trees(ROOT, fresh, only=[f"{version}/python", f"{version}/rust"])
    assert unchanged == [], "re-recording drifted:\n" + "\n".join(map(str, unchanged))

    # The command line reports it the same way and exits 1.
    def drift_against(fixtures: Path) -> tuple[int, str]:
        result = CliRunner().invoke(cli, ["drift", "--fixtures", str(fixtures), "--against", str(fresh)])
        return result.exit_code, result.stdout

    code, out = drift_against(changed)
    assert code == 1 and "DRIFT in 1 fixture(s), 1 field(s):" in out
    assert "reset_prefix_cache_refused: exchanges[0].response.json.success" in out
    same = tmp_path / "same"
    write_documents(same, [json.loads(json.dumps(f.doc)) for f in load_fixtures(ROOT, [version])])
    code, out = drift_against(same)
    assert code == 0 and "no drift" in out
