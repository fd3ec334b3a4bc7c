"""The fixture tools (`python -m tools.fixtures`, repository tooling): summary, drift of two trees, and
record's call of the recorder once per release."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import tools.fixtures.store as store
from tools.fixtures.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_summary_and_drift_against_a_tree(tmp_path: Path) -> None:
    fixtures = ROOT / "rust_fixtures"
    summary = invoke("summary", "--fixtures", str(fixtures))
    assert summary.exit_code == 0 and summary.stdout.startswith("| scenario |")
    same = invoke("drift", "--json", "--fixtures", str(fixtures), "--against", str(fixtures))
    assert same.exit_code == 0 and json.loads(same.stdout) == {"drifts": []}
    changed = tmp_path / "fresh"
    shutil.copytree(fixtures, changed)
    victim = sorted(changed.glob("*/rust/*.json"))[0]
    victim.write_text(json.dumps({**json.loads(victim.read_text()), "vllm_version": "9.9.9"}))
    drifted = invoke("drift", "--fixtures", str(fixtures), "--against", str(changed))
    assert drifted.exit_code == 1 and "DRIFT in 1 fixture(s), 1 field(s)" in drifted.stdout
    assert "re-record with: python -m tools.fixtures record" in drifted.stdout
    data = json.loads(
        invoke("drift", "--json", "--fixtures", str(fixtures), "--against", str(changed)).stdout
    )
    assert data["drifts"][0]["field"] == "vllm_version"
    missing = invoke("summary", "--fixtures", str(tmp_path / "none"))
    assert missing.exit_code == 2 and "no fixture tree" in missing.stderr


def test_record_calls_the_recorder_once_per_release(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def record(out: str, **kw: Any) -> Path:
        calls.append({"out": out, **kw})
        base = Path(out) / ("0.33.0" if kw["python"] is None else "0.28.0")
        (base / "rust").mkdir(parents=True, exist_ok=True)
        (base / "rust" / "health.json").write_text("{}")
        return base

    monkeypatch.setattr(store, "record", record)
    result = invoke(
        "record", "--json", "--out", str(tmp_path), "--frontends", "rust", "--scenarios", "health"
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "out": str(tmp_path), "frontends": ["rust"],
        "releases": [{"version": "0.33.0", "python": sys.executable, "fixtures": 1}],
    }  # fmt: skip
    assert calls[0]["frontends"] == ["rust"] and [s.name for s in calls[0]["scenarios"]] == ["health"]
    # Every --python is one release; naming this interpreter is the installed vLLM.
    older = tmp_path / "old" / "bin" / "python"
    calls.clear()
    both = invoke(
        "record", "--json", "--out", str(tmp_path), "--python", sys.executable, "--python", str(older)
    )
    assert both.exit_code == 0, both.output
    assert [c["python"] for c in calls] == [None, str(older)]
    assert [r["version"] for r in json.loads(both.stdout)["releases"]] == ["0.33.0", "0.28.0"]
    bad = invoke("record", "--scenarios", "no_such_scenario")
    assert bad.exit_code == 2
    two = invoke("record", "--python", "a", "--python", "b", "--vllm-rs", "x")
    assert two.exit_code == 2 and "one --python" in two.stderr
