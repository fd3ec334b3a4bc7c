"""The `parity` command, against the interface of vllm_devclient.testing.parity (replaced by a fake)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from vllm_devclient.cli import ExitCode

from .cli_support import A, B, doc, invoke


class FakeRow:
    def __init__(self, name: str, raw: bool, sdk_same: bool, why: str | None = None) -> None:
        self.scenario, self.raw_differs, self.sdk_same, self.sdk_difference = name, raw, sdk_same, why


class FakeReport:
    def __init__(self, mismatches: list[str]) -> None:
        self.labels = ["python", "rust"]
        self.rows = [
            FakeRow("health", True, True),
            FakeRow("version", False, False, "the Rust frontend reports its own version"),
            FakeRow("wake_up", False, not mismatches),
        ]
        self.differences = ["health"]  # raw answers differ: what the SDK hides, not a failure
        self.documented_sdk_differences = {"version": "the Rust frontend reports its own version"}
        self.sdk_mismatches = mismatches

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "harness", "sdk_mismatches": self.sdk_mismatches}

    def summary(self) -> dict[str, Any]:
        return {
            "labels": self.labels,
            "scenarios": [row.scenario for row in self.rows],
            "raw_differences": self.differences,
            "sdk_differences_by_design": self.documented_sdk_differences,
            "sdk_mismatches": self.sdk_mismatches,
        }


@pytest.fixture
def fake_parity(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    from vllm_devclient.testing import parity

    module = types.ModuleType("vllm_devclient.testing.parity")

    def run_parity(urls: Any = None, **kw: Any) -> FakeReport:
        calls.append({"urls": urls, **kw})
        Path(kw["report_path"]).write_text("table")
        return FakeReport(["wake_up"] if urls and "diff" in urls[0] else [])

    module.run_parity = run_parity  # type: ignore[attr-defined]
    module.summary_lines = parity.summary_lines  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm_devclient.testing.parity", module)
    return calls


def test_parity_prints_a_summary_and_writes_the_table_to_the_report(
    fake_parity: list[dict[str, Any]], tmp_path: Path
) -> None:
    report = tmp_path / "parity.md"
    result = invoke("parity", "--report", str(report), env={"VLLM_DEVCLIENT_URL": A, "VLLM_API_KEY": "k"})
    assert result.exit_code == 0
    expected = {"urls": None, "report_path": report, "api_key": None, "allow_reset": False, "scenarios": None}
    assert fake_parity == [expected]
    assert report.read_text() == "table"
    assert result.stdout.splitlines() == [
        "3 scenarios, python vs rust",
        "  raw answers differ: 1 (what the SDK hides)",
        "  SDK outcome differs by design: 1: version (the Rust frontend reports its own version)",
        "  SDK mismatches: 0",
        f"full table: {report}",
    ]
    tsv = invoke("parity", "--report", str(report), "-o", "tsv")
    assert tsv.stdout.splitlines() == ["health\tdiffers\t=", "version\t=\tby design", "wake_up\t=\t="]


def test_parity_two_live_urls_json_and_mismatches_exit_one(
    fake_parity: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("parity", "--url", "http://diff.test", "--url", B, "--json", "--api-key", "k")
    assert result.exit_code == ExitCode.FAILED
    data = doc(result)
    assert data["result"] == {"mode": "harness", "sdk_mismatches": ["wake_up"]}
    assert data["error"]["type"] == "UnsuccessfulResultError" and "wake_up" in data["error"]["message"]
    assert fake_parity[-1]["urls"] == ["http://diff.test", B] and fake_parity[-1]["api_key"] == "k"
    assert fake_parity[-1]["report_path"] == Path("parity.md")
    same = invoke("--url", A, "--url", B, "parity", "--allow-reset")
    assert same.exit_code == 0 and fake_parity[-1]["urls"] == [A, B] and fake_parity[-1]["allow_reset"]


def test_parity_needs_zero_or_two_urls(fake_parity: list[dict[str, Any]]) -> None:
    result = invoke("parity", "--url", A)
    assert result.exit_code == ExitCode.USAGE and "give --url twice" in result.stderr
    assert fake_parity == []


def test_parity_without_the_harness_exits_seven(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm_devclient.testing.parity", None)
    result = invoke("parity")
    assert result.exit_code == ExitCode.UNAVAILABLE
    assert len(result.stderr.strip().splitlines()) == 1
    assert "pip install 'vllm-devclient[testing]'" in result.stderr
