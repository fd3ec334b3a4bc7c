"""Issue 35's grade: bug x release, made from the committed history runs (never written by hand).

A history run is a folder, ``gpu_tests/results/history-<version>-<date>/`` (``collect`` writes it), with
``run.json`` carrying its vLLM version, judge commits, device calls and the cases the release could not
serve. A release may have several (each device session runs what its budget allows): its cases' newest
reports count, each from the folder it was committed in. For each bug of ``history/bugs.py`` and each
of its two releases (buggy, fixed) a cell says:

- ``caught``: an evidence assertion failed, with its name, its case and the first words of its message;
- ``passed``: the scenario's cases held every evidence assertion;
- ``could not run``: the run lists the case as one the release cannot serve, with why;
- ``error``: the case ended in an error, not an assertion (its first words);
- ``not yet run``: no history run of that release is committed.

A timing bug's cell is a rate: k of N clean iterations failed an evidence assertion, at the stated
concurrency. ``tables.py`` writes :func:`grade_table` and :func:`runs_table` into
``gpu_tests/history/README.md``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_tests.history.bugs import BUGS, HUNTS, Bug, Scenario
from gpu_tests.offload_check.releases import version_key
from gpu_tests.offload_check.report import AssertionResult, OffloadCheckReport

from .collect import read_report, report_paths
from .history_plan import HISTORY_RELEASES, history_plans, scenario_jobs
from .jobs import UNINSTRUMENTED, UNPOISONED, committed_reports, make_case_id
from .proof_tables import runner_rows
from .standing import DIED, Standing, engine_error, standing

__all__ = [
    "HistoryRun",
    "clean_cases",
    "clean_table",
    "control_reports",
    "control_table",
    "grade_cell",
    "grade_table",
    "history_runs",
    "hunt_table",
    "runs_table",
    "standing_summary",
]

RESULTS = Path(__file__).resolve().parents[1] / "results"
NOT_RUN = "not yet run"


@dataclass(frozen=True)
class HistoryRun:
    """A release's committed history runs, oldest first, and each case's newest report."""

    version: str
    folders: tuple[Path, ...]
    metas: tuple[dict[str, Any], ...]
    reports: dict[str, OffloadCheckReport]

    @property
    def skipped(self) -> dict[str, str]:
        """The cases a run could not serve, where no run reported them."""
        out = {s["case_id"]: s["reason"] for meta in self.metas for s in meta.get("skipped", [])}
        return {k: v for k, v in out.items() if k not in self.reports}

    @property
    def names(self) -> str:
        return ", ".join(f.name for f in self.folders)


def history_runs(results: Path = RESULTS) -> dict[str, HistoryRun]:
    """Every committed history run, by release (folder name ``history-<version>-<date>``); a newer folder's
    report of a case replaces an older one's."""
    out: dict[str, HistoryRun] = {}
    for folder in sorted(p for p in results.glob("history-*") if (p / "run.json").exists()):
        version = folder.name.removeprefix("history-").split("-")[0]
        meta = json.loads((folder / "run.json").read_text())
        reports = {r.case_id: r for r in (read_report(p) for p in report_paths(folder))}
        old = out.get(version) or HistoryRun(version, (), (), {})
        out[version] = HistoryRun(
            version, (*old.folders, folder), (*old.metas, meta), {**old.reports, **reports}
        )
    return out


def _first(text: str, n: int = 110) -> str:
    line = " ".join(text.split())
    return line if len(line) <= n else line[: n - 1] + "…"


def _failed(assertions: Sequence[AssertionResult], names: Sequence[str]) -> list[AssertionResult]:
    return [a for a in assertions if a.name in names and a.evaluated and not a.passed]


def _names(report: OffloadCheckReport, bug_id: str | None) -> str:
    """The other known defects the report names: which bug a failure met, where it is not the graded one."""
    others = [d.id for d in report.defects if d.id != bug_id]
    return f"; it names {', '.join(others)}" if others else ""


def _case_cell(
    evidence: Sequence[str],
    timing: bool,
    case_id: str,
    run: HistoryRun,
    *,
    bug_id: str | None = None,
    fixed: bool = False,
) -> str:
    """One case's cell. On a fixed release a failing evidence assertion reads "failed", not "caught": the
    bug is not there, and the report's other named defects say what the case met instead."""
    if case_id in run.skipped:
        return f"could not run ({case_id}): {run.skipped[case_id]}"
    report = run.reports.get(case_id)
    if report is None:
        return f"not run ({case_id} has no report in {run.names})"
    clean = report.clean()
    if timing:
        caught = [a for it in clean if (a := next(iter(_failed(it.assertions, evidence)), None))]
        at = "all at once" if report.concurrency in (0, None) else f"concurrency {report.concurrency}"
        # Each evidence assertion's own rate: which of them the iterations failed, and which held throughout.
        each = ", ".join(
            f"{name} {sum(bool(_failed(it.assertions, [name])) for it in clean)}/{len(clean)}"
            for name in evidence
        )
        first = f"; first: {caught[0].name}: {_first(caught[0].message)}" if caught else ""
        return f"{len(caught)}/{len(clean)} iterations caught at {at} ({case_id}: {each}){first}"
    failed = _failed(report.assertions, evidence) + [
        a for it in clean for a in _failed(it.assertions, evidence)
    ]
    failed.sort(key=lambda a: evidence.index(a.name))  # the bug's own order: its most direct evidence first
    if failed:
        verb = "failed on" if fixed else "caught by"
        return f"{verb} {failed[0].name} ({case_id}{_names(report, bug_id)}): {_first(failed[0].message)}"
    # An error is not an assertion: it is shown as what it is, never as the bug caught.
    errors = [e for e in [*(it.error for it in clean if it.status == "error"), report.error] if e]
    if report.status == "error":
        return f"error ({case_id}): {_first(errors[0] if errors else 'no message')}"
    if report.status in ("passed", "not_proven"):
        return f"{report.status.replace('_', ' ')} ({case_id})"
    # The bug's evidence held while the case failed on others: on a fixed release, the fix as the check
    # sees it; the defects the failure names say which other bug it met.
    others = sorted({a.name for a in report.failures()})
    held = ", ".join(evidence)
    return f"not caught: {held} held ({case_id} failed {', '.join(others)}{_names(report, bug_id)})"


def _scenario_cases(scenario: Scenario) -> list[str]:
    return [j.case_id for j in scenario_jobs(scenario, report_dir=Path("reports"), costs={})]


def grade_cell(
    bug: Bug,
    version: str,
    runs: dict[str, HistoryRun],
) -> str:
    """The cases' cells on ``version`` as the check read them (the grade table adds whether each stands)."""
    run = runs.get(version)
    if run is None:
        return NOT_RUN
    fixed = version == bug.fixed
    return "<br>".join(
        _case_cell(bug.evidence, bug.timing, c, run, bug_id=bug.id, fixed=fixed)
        for c in _scenario_cases(bug.scenario)
    )


def _graded_cells(
    bug: Bug,
    version: str,
    runs: dict[str, HistoryRun],
    controls: Mapping[tuple[str, str], Sequence[OffloadCheckReport]],
) -> list[tuple[str, Standing | None]]:
    """Each case's cell on ``version`` and whether it stands (``standing.py``; None: no report)."""
    run = runs.get(version)
    if run is None:
        return [(NOT_RUN, None)]
    fixed = version == bug.fixed
    out: list[tuple[str, Standing | None]] = []
    for case_id in _scenario_cases(bug.scenario):
        text = _case_cell(bug.evidence, bug.timing, case_id, run, bug_id=bug.id, fixed=fixed)
        report = run.reports.get(case_id)
        if report is None or case_id in run.skipped:
            out.append((text, None))
            continue
        controls_of = controls.get((version, case_id), ())
        st = standing(report, bug.scenario, controls_of, caught=_is_catch(text))
        out.append((f"{text} [{st.words()}]", st))
    return out


def _is_catch(cell: str) -> bool:
    """A cell that reads a catch: an evidence assertion caught it, or a rate above 0 of N."""
    return cell.startswith("caught by") or (cell[:1].isdigit() and not cell.startswith("0/"))


def _grade(buggy: list[tuple[str, Standing | None]], fixed: list[tuple[str, Standing | None]]) -> str:
    """Whether a bug is graded: every cell of both sides stands, the buggy side caught it and the fixed
    side did not."""
    cells = [*buggy, *fixed]
    stand = sum(st is not None and st.stands for _, st in cells)
    caught = any(_is_catch(t) for t, _ in buggy)
    missed = any(_is_catch(t) for t, _ in fixed)
    if stand < len(cells):
        return f"not graded: {stand} of {len(cells)} cells stand"
    if not caught:
        return f"not graded: {len(cells)} of {len(cells)} cells stand, none caught on the buggy release"
    also = " (the fixed release caught too)" if missed else ""
    return f"graded{also}: {stand} of {len(cells)} cells stand"


def _every_run(run: HistoryRun, case_id: str) -> list[HistoryRun]:
    """Each committed run of ``run``'s release that holds ``case_id``, oldest first, as a run of that
    report alone."""
    out = []
    for folder, meta in zip(run.folders, run.metas, strict=True):
        for path in report_paths(folder):
            report = read_report(path)
            if report.case_id == case_id:
                out.append(HistoryRun(run.version, (folder,), (meta,), {case_id: report}))
    return out


def hunt_table(runs: dict[str, HistoryRun]) -> str:
    """The bugs reported present in a served release (``HUNTS``): what the scenario showed there, as a rate
    of clean iterations whose evidence assertions failed (a finding, not a grade: no release fixes them).
    Every committed run of a case is shown, oldest first, with its folder and judge: a later run adds to the
    earlier ones' rates, it does not replace them."""
    rows = [
        "| bug | connector, scenario | evidence (judge assertions) | release | what the check showed |",
        "|---|---|---|---|---|",
    ]
    for hunt in HUNTS:
        run = runs.get(hunt.release)
        cells = [] if run is not None else [NOT_RUN]
        for case_id in _scenario_cases(hunt.scenario) if run is not None else []:
            assert run is not None
            cells += [
                f"{_case_cell(hunt.evidence, True, case_id, r)} (`{r.names}`, judge "
                f"{(r.reports[case_id].judge_commit or 'unknown')[:7]})"
                for r in _every_run(run, case_id)
            ] or [_case_cell(hunt.evidence, True, case_id, run)]
        rows.append(
            f"| [{hunt.id}]({hunt.url}): {hunt.title} | {hunt.scenario.connector}, {hunt.scenario.name} "
            f"| {', '.join(hunt.evidence)} | {hunt.release} | {'<br>'.join(cells)} |"
        )
    return "\n".join(rows)


def grade_table(
    runs: dict[str, HistoryRun],
    controls: Mapping[tuple[str, str], Sequence[OffloadCheckReport]] | None = None,
) -> str:
    """Bug x release: each case's cell names its judge and whether it stands (``standing.py``); the last
    column counts the cells that stand, and a bug is graded only when all of them do."""
    rows = [
        "| bug | connector, scenario | evidence (judge assertions) | buggy release | fixed release | grade |",
        "|---|---|---|---|---|---|",
    ]
    for bug in BUGS:
        timing = f", rate over {bug.scenario.iterations} iterations" if bug.timing else ""
        buggy = _graded_cells(bug, bug.buggy, runs, controls or {})
        fixed = _graded_cells(bug, bug.fixed, runs, controls or {})
        rows.append(
            f"| [{bug.id}]({bug.url}): {bug.title} | {bug.scenario.connector}, {bug.scenario.name}{timing} "
            f"| {', '.join(bug.evidence)} "
            f"| **{bug.buggy}**: {'<br>'.join(t for t, _ in buggy)} "
            f"| **{bug.fixed}**: {'<br>'.join(t for t, _ in fixed)} | {_grade(buggy, fixed)} |"
        )
    return "\n".join(rows)


def standing_summary(
    runs: dict[str, HistoryRun],
    controls: Mapping[tuple[str, str], Sequence[OffloadCheckReport]] | None = None,
) -> str:
    """One line: how many of the grade's case cells stand, and which bugs are graded."""
    cells = 0
    stand = 0
    graded = []
    for bug in BUGS:
        sides = [_graded_cells(bug, v, runs, controls or {}) for v in (bug.buggy, bug.fixed)]
        cells += sum(len(side) for side in sides)
        stand += sum(st is not None and st.stands for side in sides for _, st in side)
        if _grade(*sides).startswith("graded"):
            graded.append(bug.id)
    return (
        f"{stand} of {cells} case cells stand at today's judge; graded: {', '.join(graded) or 'none'} "
        f"({len(graded)} of {len(BUGS)} bugs)."
    )


def clean_cases(version: str) -> list[str]:
    """The clean matrix a release serves on the python frontend (the history runs' scope): every case of its
    plan but a scenario's own (a case label: another concurrency, the reset under load)."""
    (plan,) = history_plans([version], report_dir=Path("reports"), costs={}, frontends=["python"])
    own = {
        make_case_id(name, bug.scenario.connector, "python", bug.scenario.case_label(c))
        for bug in (*BUGS, *HUNTS)
        for name in bug.scenario.profiles
        for c in bug.scenario.concurrencies
        if bug.scenario.case_label(c)
    }
    return sorted(j.case_id for j in plan.jobs if j.case_id not in own)


def _meets(report: OffloadCheckReport, version: str) -> list[str]:
    """The bugs present in ``version`` that a failed clean case meets: the known defects its report names,
    and each present bug of its connector and family whose evidence it failed."""
    failed = {a.name for a in report.failures()}
    connector = "simple" if "Simple" in report.connector else "offloading"
    graded = [
        b.id
        for b in BUGS
        if version in b.present
        and b.scenario.connector == connector
        and any(f in report.profile for f in b.families)
        and failed & set(b.evidence)
    ]
    return list(dict.fromkeys([*(d.id for d in report.defects), *graded]))


def control_reports(results: Path = RESULTS) -> dict[tuple[str, str], list[OffloadCheckReport]]:
    """Every committed control without instruments (``jobs.uninstrumented``) anywhere under ``results``, by
    its vLLM release and the case it controls, in path order."""
    out: dict[tuple[str, str], list[OffloadCheckReport]] = {}
    for raw in committed_reports(results, f"*-{UNINSTRUMENTED}"):
        r = OffloadCheckReport.model_validate(raw)
        out.setdefault((r.vllm_version, r.case_id.removesuffix(f"-{UNINSTRUMENTED}")), []).append(r)
    return out


def _reproduced(report: OffloadCheckReport, controls: Sequence[OffloadCheckReport]) -> str:
    """Whether controls with ``report``'s very prompts and no instruments failed the way it did: every
    assertion it failed (the instruments' own ``instruments_ok`` aside) failed there too, and an engine that
    died in it died there with the same error. Then the release's own fault, not the check's: the words
    for the cell, k of the n controls with its prompts (empty when none failed so)."""
    keys = [p.key for p in report.probes]
    same = [c for c in controls if [p.key for p in c.probes] == keys]
    failed = {a.name for a in report.failures()} - {"instruments_ok"}
    error = engine_error(report)
    alike = [c for c in same if failed <= {a.name for a in c.failures()} and engine_error(c) == error]
    if not failed or not alike:
        return ""
    died = f", the engine dying on {error}" if error else ""
    return f"{len(alike)} of {len(same)} controls with its prompts and no instruments failed so{died}"


def clean_table(
    runs: dict[str, HistoryRun],
    served: Mapping[str, Mapping[str, OffloadCheckReport]] | None = None,
    controls: Mapping[tuple[str, str], Sequence[OffloadCheckReport]] | None = None,
) -> str:
    """Per release, its clean matrix (python frontend) by what each case's newest report says: passed;
    failed meeting bugs present there (named, with what their evidence does not cover); failed as its
    controls without instruments failed (``controls``, :func:`control_reports`): the release's own fault,
    not one the check brought; failed with nothing named (the check's own gap, or a bug the check does not
    know), with the assertions; not run. ``served``: a release's clean-matrix reports committed outside its
    history runs (0.26.0's, in issue 33's runs)."""
    rows = [
        "| vLLM release | clean cases | passed | failed, meeting a bug present there "
        "| failed, the release's own (its controls without instruments failed so) | failed, nothing named "
        "| not run |",
        "|---|---|---|---|---|---|---|",
    ]
    served = served or {}
    controls = controls or {}
    for version in sorted({*runs, *served}, key=version_key):
        run = runs.get(version)
        reports = {**served.get(version, {}), **(run.reports if run is not None else {})}
        cases = clean_cases(version)
        passed, met, own, other, missing = [], [], [], [], []
        for case_id in cases:
            report = reports.get(case_id)
            short = case_id.removeprefix("tiny-").removesuffix("-python")
            if report is None:
                missing.append(short)
                continue
            if report.status == "passed":
                passed.append(short)
                continue
            failed = sorted({a.name for a in report.failures()})
            if ids := _meets(report, version):
                # what no met bug's evidence covers (the check's own instruments_ok among it) is said beside
                covered = {e for b in BUGS if b.id in ids for e in b.evidence}
                rest = [name for name in failed if name not in covered]
                also = f"; also failed: {', '.join(rest)}" if rest else ""
                met.append(f"{short} ({', '.join(ids)}{also})")
            elif why := _reproduced(report, controls.get((version, case_id), ())):
                own.append(f"{short}: {', '.join(failed)} ({why})")
            else:
                other.append(f"{short}: {', '.join(failed) or report.status}")
        rows.append(
            f"| {version} | {len(cases)} | {len(passed)}: {', '.join(passed) or '-'} "
            f"| {len(met)}: {'<br>'.join(met) or '-'} | {len(own)}: {'<br>'.join(own) or '-'} "
            f"| {len(other)}: {'<br>'.join(other) or '-'} | {len(missing)}: {', '.join(missing) or '-'} |"
        )
    return "\n".join(rows)


def _first_failed_probe(report: OffloadCheckReport) -> str:
    """Where the first request failed: ``iteration/run probe`` (``-`` when none did)."""
    for it in report.iterations:
        for label, run in it.runs.items():
            for answer in run.answers:
                if answer.error:
                    return f"{it.label}/{label} {answer.probe}"
    return "-"


def control_table(case_id: str, folders: Sequence[Path]) -> str:
    """``case_id`` run with the instruments and as its controls without them, or without the poison
    (``runner/jobs.uninstrumented``, ``unpoisoned``), a row per report in ``folders`` (in order): whether the
    engine died, and where; whether the run sent the same prompts as the first instrumented run (its probes'
    keys); its verdict and the bugs it named."""
    rows = [
        "| run | instruments | prompts (boundary sizes) | same prompts as the first instrumented run "
        "| engine died | first failed request | verdict | named |",
        "|---|---|---|---|---|---|---|---|",
    ]
    kinds = {
        case_id: "on",
        f"{case_id}-{UNINSTRUMENTED}": "off (control)",
        f"{case_id}-{UNPOISONED}": "all but the poison (control)",
    }
    runs = [
        (folder, r)
        for folder in folders
        for r in map(read_report, report_paths(folder))
        if r.case_id in kinds
    ]
    common = Path(os.path.commonpath([f.parent for f in folders])) if folders else Path()
    reference = next((r for _, r in runs if r.case_id == case_id), None)
    keys = [p.key for p in reference.probes] if reference is not None else []
    for folder, r in runs:
        sizes = sorted({p.boundary for p in r.probes if p.kind == "boundary" and p.boundary})
        same = [p.key for p in r.probes] == keys
        error = engine_error(r)
        rows.append(
            f"| `{folder.relative_to(common)}` "
            f"| {kinds[r.case_id]} | {len(r.probes)} "
            f"({', '.join(map(str, sizes)) or 'none'}) | {'yes' if same else 'no'} "
            f"| {'no' if not error else 'yes' if error == DIED else 'yes: ' + error} "
            f"| {_first_failed_probe(r)} | {r.status} | {', '.join(d.id for d in r.defects) or '-'} |"
        )
    return "\n".join(rows)


def _verdict_counts(meta: dict[str, Any]) -> str:
    counts: dict[str, int] = {}
    for row in runner_rows(meta).values():
        v = row.get("verdict", "?")
        counts[v] = counts.get(v, 0) + 1
    return ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "-"


def runs_table(runs: dict[str, HistoryRun]) -> str:
    rows = [
        "| vLLM release | run | vLLM reported | judge commit(s) | device calls | cases by verdict "
        "| not servable |",
        "|---|---|---|---|---|---|---|",
    ]
    versions = sorted({*HISTORY_RELEASES, *runs}, key=version_key)
    for version in versions:
        run = runs.get(version)
        if run is None:
            rows.append(f"| {version} | {NOT_RUN} | - | - | - | - | - |")
            continue
        for folder, meta in zip(run.folders, run.metas, strict=True):
            reported = ", ".join(meta.get("vllm_versions", [])) or "-"
            commits = ", ".join(c[:10] for c in meta.get("judge_commits", [])) or "-"
            skipped = len(meta.get("skipped", []))
            rows.append(
                f"| {version} | `{folder.name}` | {reported} | {commits} | {len(meta.get('calls', []))} "
                f"| {_verdict_counts(meta)} | {skipped} |"
            )
    return "\n".join(rows)
