"""`python -m gpu_tests.offload_check`: one process per case, its options, and its exit code per status."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

import gpu_tests.offload_check.cli as check_cli
from gpu_tests.offload_check import OffloadCheckReport


@pytest.mark.parametrize(("status", "exit_code"), [("passed", 0), ("failed", 1), ("error", 2)])
def test_the_check_runs_each_case_and_exits_with_the_worst_status(
    monkeypatch: pytest.MonkeyPatch, status: str, exit_code: int
) -> None:
    seen: list[dict[str, Any]] = []

    def run_case(case: Any, **kwargs: Any) -> OffloadCheckReport:
        seen.append({"case": case.id, **kwargs})
        print("a report line")
        return OffloadCheckReport(
            case_id=case.id,
            profile=case.profile.name,
            model="m",
            connector=case.connector,
            frontend=case.frontend,
            num_questions=1,
            concurrency=1,
            accuracy_threshold=None,
            tolerance=0.05,
            status=status,  # type: ignore[arg-type]
            error="boom" if status == "error" else None,
        )

    monkeypatch.setattr(check_cli, "run_case", run_case)
    argv = [
        "--profile",
        "small",
        "--frontend",
        "python,rust",
        "--iterations",
        "2",
        "--server-arg",
        "--dtype half",
    ]
    result = CliRunner().invoke(check_cli.command(), argv)
    assert result.exit_code == exit_code, result.output
    assert [s["case"] for s in seen] == ["small-offloading-python", "small-offloading-rust"]
    assert seen[0]["iterations"] == 2 and seen[0]["extra_args"] == ["--dtype", "half"]
    assert "a report line" in result.stdout
    seen.clear()
    assert check_cli.main(argv) == exit_code and len(seen) == 2
    bad = CliRunner().invoke(check_cli.command(), ["--frontend", "nosuch"])
    assert bad.exit_code == 2 and "nosuch" in bad.output
    assert check_cli.main(["--no-such-option"]) == 2
