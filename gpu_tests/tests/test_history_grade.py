"""Issue 35's grade: the bugs as data can be planned and judged by general assertions, and the bug x release
table says what the committed history runs show (and "not yet run" where there is none)."""

from __future__ import annotations

import json
import lzma
import re
import shutil
from pathlib import Path

from gpu_tests.history.bugs import BUGS, HUNTS
from gpu_tests.offload_check.judge import rejudge
from gpu_tests.offload_check.report import OffloadCheckReport
from gpu_tests.runner import grade, history_plan, tables
from gpu_tests.runner.collect import read_report, write_report
from gpu_tests.runner.jobs import expected_costs, split_parts

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "gpu_tests" / "results"
PROOF = RESULTS / "kv-proof-2026-12-02c"


def _judge_names() -> set[str]:
    """Every assertion today's judge writes for a hybrid case (a committed report judged again)."""
    r = rejudge(read_report(PROOF / "tiny-qwen3-next-offloading-python.json.xz"))
    return {a.name for it in r.iterations for a in it.assertions} | {a.name for a in r.assertions}


def test_every_bug_has_a_plannable_scenario_and_evidence_the_judge_writes() -> None:
    names = _judge_names()
    assert len(BUGS) >= 6 and len({b.id for b in BUGS}) == len(BUGS)
    judge_source = "".join(
        (REPO / "gpu_tests" / "offload_check" / f).read_text() for f in ("assertions.py", "judge.py")
    )
    plans = {p.version: p for p in history_plan.history_plans(report_dir=Path("r"), costs=expected_costs())}
    for bug in BUGS:
        assert bug.evidence and set(bug.evidence) <= names, bug.id
        # General assertions only: the judge's code names no graded bug.
        for number in re.findall(r"\d{5}", bug.id + bug.url):
            assert number not in judge_source, (bug.id, number)
        cases = [j.case_id for j in history_plan.scenario_jobs(bug.scenario, report_dir=Path("r"), costs={})]
        assert cases, bug.id
        for version in (bug.buggy, bug.fixed):
            plan = plans[version]
            planned = {j.case_id for j in plan.jobs} | {c for c, _ in plan.skipped}
            assert set(cases) <= planned, (bug.id, version)
            runnable = [j for j in plan.jobs if j.case_id in cases]
            assert all(j.args[j.args.index("--vllm-release") + 1] == version for j in runnable)
        assert bug.buggy in bug.present and bug.fixed not in bug.present, bug.id


def test_a_hunted_bug_runs_its_scenario_on_its_release_only_and_names_general_evidence() -> None:
    names = _judge_names()
    plans = {p.version: p for p in history_plan.history_plans(report_dir=Path("r"), costs=expected_costs())}
    assert HUNTS and len({h.id for h in HUNTS}) == len(HUNTS)
    for hunt in HUNTS:
        assert hunt.evidence and set(hunt.evidence) <= names, hunt.id
        cases = {j.case_id for j in history_plan.scenario_jobs(hunt.scenario, report_dir=Path("r"), costs={})}
        assert cases <= {j.case_id for j in plans[hunt.release].jobs}, hunt.id
        assert hunt.id in "\n".join(history_plan.describe([plans[hunt.release]], verbose=False))
    # The Simple connector's in-flight cases run on 0.26.0 for the hunt alone (no bug is graded there).
    assert "tiny-llama-simple-python-c64" in {j.case_id for j in plans["0.26.0"].jobs}
    assert not any("0.26.0" in (b.buggy, b.fixed) for b in BUGS if b.scenario.name == "simple-in-flight")


def test_with_no_history_run_every_cell_is_not_yet_run_and_a_release_s_run_fills_only_its_cells(
    tmp_path: Path,
) -> None:
    runs = grade.history_runs(tmp_path)
    assert runs == {}
    table = grade.grade_table(runs)
    cells = [c for row in table.splitlines()[2:] for c in row.split("|")[4:6]]
    assert len(cells) == 2 * len(BUGS) and all(c.strip().endswith(": not yet run") for c in cells)
    assert grade.runs_table(runs).count("not yet run") == len(history_plan.HISTORY_RELEASES)
    # The committed runs: a release without one still reads "not yet run" in every cell of it.
    committed = grade.history_runs(RESULTS)
    table = grade.grade_table(committed)
    for bug in BUGS:
        row = next(r for r in table.splitlines() if r.startswith(f"| [{bug.id}]("))
        for version in (bug.buggy, bug.fixed):
            assert (f"**{version}**: not yet run" in row) == (version not in committed), (bug.id, version)


def _commit_run(
    results: Path, version: str, reports: dict[str, Path], skipped: dict[str, str], date: str = "2026-12-03"
) -> None:
    folder = results / f"history-{version}-{date}"
    folder.mkdir(parents=True)
    for case_id, source in reports.items():
        r = read_report(source)
        layout = [g.model_copy(update={"cache_mode": "align"}) if g.recurrent else g for g in r.layout]
        write_report(
            folder / f"{case_id}.json.xz",
            r.model_copy(update={"case_id": case_id, "vllm_version": version, "layout": layout}),
        )
    meta = {
        "vllm_versions": [version],
        "judge_commits": ["abc1234def"],
        "calls": [
            {"part": "1", "summary": {"cases": [{"case_id": c, "verdict": "failed"} for c in reports]}}
        ],
        "skipped": [{"case_id": c, "reason": why} for c, why in skipped.items()],
    }
    (folder / "run.json").write_text(json.dumps(meta))


def test_the_grade_names_the_assertion_and_its_evidence_and_tells_passed_and_could_not_run(
    tmp_path: Path,
) -> None:
    falcon = PROOF / "tiny-falcon-h1-offloading-python.json.xz"  # fails recurrent_state_consistent
    qwen = PROOF / "tiny-qwen3-next-offloading-python.json.xz"  # passed
    _commit_run(
        tmp_path,
        "0.23.0",
        {"tiny-falcon-h1-align-offloading-python": falcon, "tiny-qwen3-next-offloading-python": qwen},
        {"tiny-nemotron-h-align-offloading-python": "no such model on this machine"},
    )
    _commit_run(
        tmp_path,
        "0.24.0",
        {"tiny-qwen3-next-offloading-python": qwen, "tiny-falcon-h1-align-offloading-python": falcon},
        {},
    )
    runs = grade.history_runs(tmp_path)
    align = next(b for b in BUGS if b.id == "vllm-pr44599")
    buggy = grade.grade_cell(align, "0.23.0", runs).split("<br>")
    assert buggy[0] == "passed (tiny-qwen3-next-offloading-python)"
    assert (
        buggy[1] == "could not run (tiny-nemotron-h-align-offloading-python): no such model on this machine"
    )
    assert buggy[2].startswith(
        "caught by recurrent_state_consistent (tiny-falcon-h1-align-offloading-python; it names vllm#51094): "
    )
    assert "ahead" in buggy[2]
    fixed = grade.grade_cell(align, "0.24.0", runs).split("<br>")
    assert fixed[0] == "passed (tiny-qwen3-next-offloading-python)" and fixed[1].startswith("not run (")
    # On the fixed release a failing evidence assertion is a failure, never "caught".
    assert fixed[2].startswith("failed on recurrent_state_consistent (tiny-falcon-h1-align-offloading-python")
    # A bug whose evidence the failure is not: the same failing report does not catch it.
    died = next(b for b in BUGS if b.id == "vllm-issue45268")
    assert (
        "not caught: requests_ok held (tiny-falcon-h1-align-offloading-python failed "
        "recurrent_state_consistent; it names vllm#51094)" in grade.grade_cell(died, "0.23.0", runs)
    )
    assert grade.grade_cell(align, "0.25.1", runs) == "not yet run"
    row = next(r for r in grade.runs_table(runs).splitlines() if r.startswith("| 0.23.0 "))
    assert "history-0.23.0-2026-12-03" in row and "abc1234def" in row and "| 1 |" in row


def test_a_timing_bug_is_graded_as_a_rate_at_its_concurrency(tmp_path: Path) -> None:
    wiped = next(b for b in BUGS if b.timing and b.scenario.concurrencies == (0,))
    failing = PROOF / "tiny-falcon-h1-offloading-python.json.xz"
    source = read_report(failing)
    # One of three iterations with a byte failure, the others intact: the rate is 1/3.
    its = list(source.iterations)
    bad = its[0].assertions[0].model_copy(update={"name": "kv_bytes_identical", "passed": False})
    its[0] = its[0].model_copy(update={"assertions": [*its[0].assertions, bad]})
    edited = tmp_path / "edited.json.xz"
    write_report(edited, source.model_copy(update={"iterations": its, "concurrency": 0}))
    case = f"{wiped.scenario.profiles[0]}-offloading-python-all-at-once"
    _commit_run(tmp_path / "results", wiped.buggy, {case: edited}, {})
    cell = grade.grade_cell(wiped, wiped.buggy, grade.history_runs(tmp_path / "results"))
    first = cell.split("<br>")[0]
    assert first.startswith(f"1/3 iterations caught at all at once ({case}: kv_bytes_identical 1/3, ")
    assert "answers_unchanged 0/3" in first and "; first: kv_bytes_identical: " in first


def test_a_hunt_shows_its_rate_on_its_release_and_not_yet_run_elsewhere(tmp_path: Path) -> None:
    hunt = next(h for h in HUNTS if h.scenario.concurrencies == (0,))
    source = read_report(PROOF / "tiny-falcon-h1-offloading-python.json.xz")
    edited = tmp_path / "edited.json.xz"
    write_report(edited, source.model_copy(update={"concurrency": 0}))
    case = f"{hunt.scenario.profiles[0]}-offloading-python-all-at-once"
    assert "not yet run" in grade.hunt_table({})
    _commit_run(tmp_path / "results", hunt.release, {case: edited}, {})
    table = grade.hunt_table(grade.history_runs(tmp_path / "results"))
    row = next(r for r in table.splitlines() if hunt.id in r)
    assert f"iterations caught at all at once ({case}: kv_bytes_identical " in row and hunt.release in row


def test_a_release_s_later_run_adds_its_cases_and_replaces_only_the_ones_it_ran_again(tmp_path: Path) -> None:
    """A device session runs what its budget allows: a release's second run must not hide the first's cases
    (issue 35: 0.26.0's hunt at 64 ran again beside, not instead of, the first run's all-at-once case)."""
    hunt = next(h for h in HUNTS if h.scenario.concurrencies == (0,))
    source = read_report(PROOF / "tiny-falcon-h1-offloading-python.json.xz")
    first, again = tmp_path / "first.json.xz", tmp_path / "again.json.xz"
    write_report(first, source.model_copy(update={"concurrency": 0}))
    write_report(again, source.model_copy(update={"concurrency": 0, "iterations": source.iterations[:1]}))
    case = f"{hunt.scenario.profiles[0]}-offloading-python-all-at-once"
    results = tmp_path / "results"
    _commit_run(results, hunt.release, {case: first, "other-case": first}, {"gone": "why"}, "2026-12-02")
    _commit_run(results, hunt.release, {case: again}, {"other-case": "not this time"})
    (run,) = grade.history_runs(results).values()
    assert [f.name for f in run.folders] == [
        f"history-{hunt.release}-2026-12-02",
        f"history-{hunt.release}-2026-12-03",
    ]
    assert set(run.reports) == {case, "other-case"} and len(run.reports[case].iterations) == 1
    assert run.skipped == {"gone": "why"}  # a case some run reported is not "could not run"
    table = grade.runs_table(grade.history_runs(results))
    assert f"`history-{hunt.release}-2026-12-02`" in table and f"`history-{hunt.release}-2026-12-03`" in table


def test_the_history_readme_tables_are_generated() -> None:
    text = tables.HISTORY_README.read_text()
    assert tables.fill_figures(text, tables.HISTORY_TABLES) == text, "run python -m gpu_tests.runner.tables"
    for name in tables.HISTORY_TABLES:
        assert f"<!-- figure:{name} -->" in text


def test_each_release_s_cases_deal_over_its_calls_once_each() -> None:
    costs = expected_costs()
    for p in history_plan.history_plans(report_dir=Path("r"), costs=costs):
        dealt = [j.case_id for part in split_parts(p.jobs, max(p.calls, 2), 15, 180.0, costs) for j in part]
        assert sorted(dealt) == sorted(j.case_id for j in p.jobs), p.version
        assert len(set(dealt)) == len(dealt) and p.calls >= 1


def test_a_collected_history_run_records_its_vllm_version_judge_calls_and_what_it_could_not_serve(
    tmp_path: Path,
) -> None:
    from gpu_tests.runner.collect import collect

    matrix = tmp_path / "matrix"
    (matrix / "reports").mkdir(parents=True)
    source = read_report(PROOF / "tiny-qwen3-next-offloading-python.json.xz")
    report = source.model_copy(update={"vllm_version": "0.20.2", "judge_commit": "feedc0de"})
    (matrix / "reports" / f"{report.case_id}.json").write_text(report.model_dump_json())
    (matrix / "call_part1.json").write_text(json.dumps({"part": "1", "setup_s": 90, "call_s": 400}))
    skipped = [{"case_id": "tiny-llama-offloading-rust", "reason": "no vllm-rs"}]
    summary = {"cases": [{"case_id": report.case_id, "verdict": "passed"}], "skipped": skipped}
    (matrix / "matrix_summary_part1.json").write_text(json.dumps(summary))
    run = collect("history-0.20.2-2026-12-03", [matrix], tmp_path / "results")
    assert run["vllm_versions"] == ["0.20.2"] and run["judge_commits"] == ["feedc0de"]
    assert run["skipped"] == skipped and len(run["calls"]) == 1
    runs = grade.history_runs(tmp_path / "results")
    assert runs["0.20.2"].skipped == {"tiny-llama-offloading-rust": "no vllm-rs"}
    row = next(r for r in grade.runs_table(runs).splitlines() if r.startswith("| 0.20.2 "))
    assert "| 0.20.2 | feedc0de | 1 | passed 1 | 1 |" in row


def test_a_release_s_clean_matrix_says_which_failures_meet_a_bug_present_there(tmp_path: Path) -> None:
    """The clean-matrix table: a failure counts as meeting a bug only on a release whose source has it (a
    named known defect, or a present bug of the case's connector and family whose evidence failed); what
    that evidence does not cover is said beside it, the check's own ``instruments_ok`` among it; a failure
    meeting nothing is listed with its assertions."""
    first, second = RESULTS / "history-0.22.0-2026-12-04", RESULTS / "history-0.22.0-2026-12-04b"
    simple = first / "tiny-gemma3-simple-python.json.xz"  # the full reset refused with a 500 (vllm-pr39726)
    reports = {
        "tiny-gemma3-simple-python": simple,
        "tiny-gemma3-offloading-python": first / "tiny-gemma3-offloading-python.json.xz",
        "tiny-nemotron-h-simple-python": second / "tiny-nemotron-h-simple-python.json.xz",
    }
    _commit_run(tmp_path, "0.22.0", reports, {})
    _commit_run(tmp_path, "0.24.0", {"tiny-gemma3-simple-python": simple}, {})
    table = grade.clean_table(grade.history_runs(tmp_path))
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ") for line in table.splitlines()[2:]}
    cases = grade.clean_cases("0.22.0")
    assert rows["0.22.0"][1] == str(len(cases)) == "18"
    assert rows["0.22.0"][2] == "1: gemma3-offloading"
    assert rows["0.22.0"][3] == (
        "2: gemma3-simple (vllm-pr39726)<br>"
        "nemotron-h-simple (vllm-pr39726; also failed: answers_unchanged, instruments_ok)"
    )
    assert rows["0.22.0"][4] == rows["0.22.0"][5] == "0: -" and rows["0.22.0"][6].startswith("15: ")
    # 0.24.0 has the fix: the same failure meets nothing there
    assert rows["0.24.0"][3] == "0: -"
    assert rows["0.24.0"][5] == "1: gemma3-simple: reload_proven, resets_honoured"
    # A scenario's own cases (another concurrency, the reset under load) are not the clean matrix.
    assert "tiny-qwen3-next-offloading-python" in cases
    assert not any(c.endswith(("-c64", "-c256", "-all-at-once", "-reset-under-load")) for c in cases)


def test_a_failure_its_controls_without_instruments_repeat_is_the_release_s_own(tmp_path: Path) -> None:
    """A clean case that failed meeting no bug is the release's own fault where committed controls with its
    very prompts and no instruments failed every way it did, the engine dying on the same error; a control
    with other prompts, or one whose engine held, is no such control."""
    fault = RESULTS / "fault-0.20.2-gemma4-2026-12-04"
    case = "tiny-gemma4-offloading-python"
    _commit_run(tmp_path, "0.20.2", {case: RESULTS / "history-0.20.2-2026-12-04" / f"{case}.json.xz"}, {})
    runs = grade.history_runs(tmp_path)

    def row(controls: dict[tuple[str, str], list[OffloadCheckReport]]) -> list[str]:
        table = grade.clean_table(runs, controls=controls)
        (line,) = [x for x in table.splitlines() if x.startswith("| 0.20.2")]
        return line.split(" | ")

    def control(name: str) -> OffloadCheckReport:
        return read_report(fault / name / f"{case}-uninstrumented.json.xz")

    same = [control("call5-uninstrumented-1"), control("call5-uninstrumented-2")]
    other_prompts = control("call3-uninstrumented")  # 16 prompts: no boundary probes without the recorder
    held = same[0].model_copy(update={"engine_fault": None})
    found = grade.control_reports(RESULTS)[("0.20.2", case)]
    assert [c.created_at for c in found if [p.key for p in c.probes] == [p.key for p in same[0].probes]] == [
        c.created_at for c in same
    ]
    assert row({})[4] == "0: -" and row({})[5] == "1: gemma4-offloading: requests_ok"
    own = row({("0.20.2", case): [*same, other_prompts, held]})
    assert own[4] == (
        "1: gemma4-offloading: requests_ok (2 of 3 controls with its prompts and no instruments failed so, "
        "the engine dying on CUDA error: unspecified launch failure)"
    )
    assert own[5] == "0: -"
    for alone in ([other_prompts], [held]):
        assert row({("0.20.2", case): alone})[5] == "1: gemma4-offloading: requests_ok"


def test_the_control_table_sets_each_instrumented_run_beside_its_control(tmp_path: Path) -> None:
    """Rows in the folders' order; the first instrumented run's prompts are the reference, so a control that
    sent fewer (no boundary probes: no layout without the recorder) reads "no"; a death names its error
    and the request it broke."""
    died = RESULTS / "history-0.20.2-2026-12-04" / "tiny-gemma4-offloading-python.json.xz"
    control = (
        RESULTS
        / "fault-0.20.2-gemma4-2026-12-04"
        / "call3-uninstrumented"
        / "tiny-gemma4-offloading-python-uninstrumented.json.xz"
    )
    for name, source in (("a-died", died), ("b-control", control)):
        (tmp_path / "study" / name).mkdir(parents=True)
        shutil.copy(source, tmp_path / "study" / name / source.name)
    folders = [tmp_path / "study" / "a-died", tmp_path / "study" / "b-control"]
    first, second = grade.control_table("tiny-gemma4-offloading-python", folders).splitlines()[2:]
    assert first.split(" | ")[:6] == [
        "| `a-died`",
        "on",
        "24 (16)",
        "yes",
        "yes: CUDA error: unspecified launch failure",
        "clean-1/reload b16-q17",
    ]
    assert first.endswith("| failed | - |")
    assert second.split(" | ")[:6] == ["| `b-control`", "off (control)", "16 (none)", "no", "no", "-"]
    assert second.endswith("| failed | vllm-pr41956 |")
    # the control alone: no instrumented run to compare with, so its prompts are no one's
    (only,) = grade.control_table("tiny-gemma4-offloading-python", folders[1:]).splitlines()[2:]
    assert " | no | no | " in only


def test_a_case_with_requests_in_flight_is_planned_at_its_measured_time(tmp_path: Path) -> None:
    """A committed run of a case with many requests in flight (all at once: concurrency None) that ran to its
    end sets that case's plan: its family's cold start and its measured check; one cut short does not, and a
    case never measured is scaled by the assumed gain."""
    from gpu_tests.runner.jobs import Cost, measured_check_s

    def report(case_id: str, concurrency: int | None, check_s: float, **extra: object) -> None:
        data = {"case_id": case_id, "concurrency": concurrency, "timings": {"check_s": check_s}, **extra}
        folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        (folder / f"{case_id}.json.xz").write_bytes(lzma.compress(json.dumps(data).encode()))

    at_once = "tiny-nemotron-h-offloading-python-all-at-once"
    report(at_once, None, 50.0, status="passed")
    report(at_once, None, 70.0, status="failed")
    report(at_once, None, 5.0, status="failed", engine_fault="AssertionError")  # died: cut short
    report("tiny-llama-simple-python-c64", 64, 30.0, status="error")
    report("tiny-llama-simple-python", 1, 20.0, status="passed")  # one at a time: the family's costs
    measured = measured_check_s(tmp_path)
    assert measured == {at_once: 60.0}
    scenario = next(b.scenario for b in BUGS if b.id == "vllm-skip-zero-block-ids")
    costs = {"nemotron-h": Cost(60.0, 10.0, "test", cold_startup_s=220.0, warm_startup_s=60.0)}
    jobs = {j.case_id: j for j in history_plan.scenario_jobs(scenario, report_dir=Path("r"), costs=costs)}
    timed = {
        j.case_id: j
        for j in history_plan.scenario_jobs(scenario, report_dir=Path("r"), costs=costs, measured=measured)
    }
    assert timed[at_once].expected_s == 220.0 + 60.0 and timed[at_once].compile_s == 160.0
    assert jobs[at_once].expected_s > timed[at_once].expected_s  # the assumed gain, from concurrency-1 runs
    others = [c for c in timed if c != at_once]
    assert others and all(timed[c].expected_s == jobs[c].expected_s for c in others)
