"""Issue 53: whether a grade cell stands (``runner/standing.py``): its judge is today's, its scenario reached
the bug's path, and a catch that rests on an engine death has an uninstrumented control that died the same
way. Read from committed reports and a scratch git repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gpu_tests.history.bugs import BUGS
from gpu_tests.runner import grade, standing
from gpu_tests.runner.collect import read_report

RESULTS = Path(__file__).resolve().parents[1] / "results"
PR48102 = next(b for b in BUGS if b.id == "vllm-pr48102")
UNDER_LOAD = "tiny-llama-offloading-python-reset-under-load.json.xz"


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_judge_is_today_s_only_while_the_judge_code_is_unchanged(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@t")
    _git(tmp_path, "config", "user.name", "t")
    judge = tmp_path / "gpu_tests" / "offload_check" / "judge.py"
    judge.parent.mkdir(parents=True)
    judge.write_text("v1\n")
    (tmp_path / "other.txt").write_text("a\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "one")
    first = _git(tmp_path, "rev-parse", "HEAD")
    (tmp_path / "other.txt").write_text("b\n")  # not the judge: the first commit's judge is still today's
    assert standing.judge_is_today(first, tmp_path)
    judge.write_text("v2\n")  # the working tree's judge differs, before any commit holds it
    standing.judge_is_today.cache_clear()
    assert not standing.judge_is_today(first, tmp_path)
    assert not standing.judge_is_today("unknown", tmp_path) and not standing.judge_is_today(
        "0" * 40, tmp_path
    )
    standing.judge_is_today.cache_clear()


def test_a_reset_under_load_the_server_refused_every_time_never_reached_the_bug_s_path() -> None:
    fixed = read_report(RESULTS / "history-0.26.0-2026-12-02" / UNDER_LOAD)
    buggy = read_report(RESULTS / "history-0.25.1-2026-12-04b" / UNDER_LOAD)
    said = standing.path_reached(fixed, PR48102.scenario)
    assert said == (
        "path not exercised: the server refused all 12 resets under load (success=false (blocks held))"
    )
    assert standing.path_reached(buggy, PR48102.scenario) == ""  # a bare 200: the reset went in
    # A scenario without a reset under load has no such path to miss.
    assert standing.path_reached(fixed, BUGS[0].scenario) == ""
    st = standing.standing(fixed, PR48102.scenario, (), caught=False)
    assert not st.stands and "path not exercised" in st.words()


def test_a_catch_resting_on_an_engine_death_stands_only_beside_a_control_that_died_the_same_way() -> None:
    died = read_report(RESULTS / "history-0.25.1-2026-12-04b" / UNDER_LOAD)
    error = standing.engine_error(died)
    assert error == "113"  # KeyError: 113, the stale job id
    alone = standing.standing(died, PR48102.scenario, (), caught=True)
    assert "no uninstrumented control" in alone.words() and not alone.stands
    same = died.model_copy(update={"case_id": died.case_id + "-uninstrumented"})
    other = died.model_copy(update={"engine_fault": None})
    beside = standing.standing(died, PR48102.scenario, (same, other), caught=True)
    assert "1 of 2 uninstrumented controls died the same way" in beside.words()
    assert beside.stands == beside.today  # the control settles the death; the judge's age still counts
    lived = standing.standing(died, PR48102.scenario, (other,), caught=True)
    assert "the death may be the instruments'" in lived.words() and not lived.stands


def test_the_grade_counts_only_the_cells_that_stand() -> None:
    runs = grade.history_runs(RESULTS)
    table = grade.grade_table(runs, grade.control_reports(RESULTS))
    row = next(line for line in table.splitlines() if line.startswith("| [vllm-pr48102]"))
    assert "[judge 1918cd4, older than today's judge" in row and "path not exercised" in row
    assert row.endswith("| not graded: 0 of 2 cells stand |")
    summary = grade.standing_summary(runs, grade.control_reports(RESULTS))
    cells = sum(len(grade.grade_cell(b, v, runs).split("<br>")) for b in BUGS for v in (b.buggy, b.fixed))
    assert summary.startswith(f"0 of {cells} case cells stand at today's judge; graded: none")
