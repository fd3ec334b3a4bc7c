"""The parity report over the real frontends: written where asked, shown in the CI log, no SDK mismatch, and
the same figures as the committed run the docs quote (docs/parity.json)."""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient.testing.contract import ScenarioRun
from vllm_devclient.testing.parity import run_parity, safe_scenarios
from vllm_devclient.testing.scenarios import SCENARIOS

pytestmark = [pytest.mark.frontend, pytest.mark.frontend_pool(harness=True)]
COMMITTED = Path(__file__).resolve().parent.parent / "docs" / "parity.json"


def test_parity_report(
    harness_runs: list[ScenarioRun], parity_report_path: Path, show_in_summary: Callable[[str], None]
) -> None:
    """run_parity() over the suite's one pass of every scenario on both frontends (the same runs the
    parity command makes: collect_runs on a FrontendPool)."""
    report = run_parity(runs=harness_runs, report_path=parity_report_path)
    markdown = parity_report_path.read_text()
    show_in_summary(markdown)
    print(markdown)

    assert markdown == report.to_markdown()
    version = importlib.metadata.version("vllm")
    assert report.versions == {"python": f"python {version}", "rust": f"rust {version}"}
    assert [row.scenario for row in report.rows] == [sc.name for sc in SCENARIOS]
    for sc in SCENARIOS:
        assert f"| `{sc.name}` |" in markdown
    # Differences the frontends are known to have are found; identical answers are not flagged.
    assert {
        "version",
        "raw_wrong_method",
        "dev_off_reset_prefix_cache",
        "engine_error_reset_prefix_cache",
        "collective_rpc_bare_none",
    } <= set(report.differences)
    assert not {"reset_prefix_cache", "health", "sleep_level1_abort", "dead_engine_health"} & set(
        report.differences
    )
    assert report.sdk_mismatches == [], "the SDK does not hide these differences:\n" + "\n".join(
        f"{row.scenario}: {side.label}: {side.problems or side.projection}"
        for row in report.rows
        if row.scenario in report.sdk_mismatches
        for side in row.sides
    )
    committed = json.loads(COMMITTED.read_text())
    assert committed["vllm"] == version
    assert committed["summary"] == report.summary(), (
        f"{COMMITTED.name} is not what this run gives: `python scripts/figures.py --parity`, `make figures`"
    )


def test_parity_of_two_live_urls(
    python_frontend: Any, rust_frontend: Any, tmp_path: Path, reset_engines: None
) -> None:
    """Two running servers by URL: only read-only scenarios, and the SDK gives the same types on both."""
    report = run_parity([python_frontend.base_url, rust_frontend.base_url], report_path=tmp_path / "live.md")
    assert report.mode == "live"
    assert [r.scenario for r in report.rows] == [s.name for s in safe_scenarios()]
    assert "reset_prefix_cache" not in [r.scenario for r in report.rows]
    assert "version" in report.differences and "health" not in report.differences
    assert report.sdk_mismatches == []
    version = importlib.metadata.version("vllm")
    assert report.labels == [f"A (python {version})", f"B (rust {version})"]
    assert (tmp_path / "live.md").read_text().startswith("# Parity report: A (python")
    with pytest.raises(ValueError, match="exactly two"):
        run_parity([python_frontend.base_url])
