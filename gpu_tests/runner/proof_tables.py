"""The KV proof's tables, made from committed reports only: every clean case with its byte verdict at first
use (per run, or over several runs), their totals, every catalogue case defect by defect, and a run's verdicts
and runner calls from its ``run.json`` (``tables.TABLES`` writes them into the README)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpu_tests.offload_check.probe_files import FirstUse
from gpu_tests.offload_check.report import Iteration, OffloadCheckReport

__all__ = [
    "calls_table",
    "catalogue_table",
    "clean_table",
    "clean_table_by_run",
    "clean_total",
    "first_use_cell",
    "outcomes_table",
    "runner_rows",
    "verdict_line",
]


def _uses(it: Iteration) -> tuple[dict[str, int], int, int]:
    """Verdict counts over the iteration's first uses, connector-loaded blocks of its reload as computed, and
    the groups whose blocks were digested (a group with no layer region proves nothing)."""
    counts: dict[str, int] = {}
    reload = {a.request_id: a for a in it.runs["reload"].answers} if "reload" in it.runs else {}
    loaded = 0
    digested: set[int] = set()
    for use in it.first_use:
        answer = reload.get(use.request_id)
        for g in use.groups:
            if g.regions:
                digested.add(g.group)
            for v in g.verdicts:
                counts[v] = counts.get(v, 0) + 1
            if answer is not None and answer.split is not None and g.regions:
                loaded += g.verdicts[answer.split.local // g.block_size :].count("v")
    return counts, loaded, len(digested)


def _groups(uses: Sequence[FirstUse]) -> int:
    return max((len(u.groups) for u in uses), default=0)


_CLEAN_HEAD = (
    "case | verdict | clean passes | first-use blocks as computed / checked (not counted: null, "
    "recurrent between snapshots) | connector-loaded blocks as computed | groups digested | judge |"
)


def _clean_counts(r: OffloadCheckReport) -> tuple[dict[str, int], int, int, int]:
    """Over ``r``'s clean passes: the first-use verdict counts, the connector-loaded blocks as computed, the
    groups digested and the groups the layout has (most of any pass)."""
    total: dict[str, int] = {}
    loaded = digested = groups = 0
    for it in r.clean():
        counts, n, d = _uses(it)
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
        loaded += n
        digested = max(digested, d)
        groups = max(groups, _groups(it.first_use))
    return total, loaded, digested, groups


def _checked(total: dict[str, int]) -> int:
    """First-use blocks the proof judged: every verdict but null (``n``) and recurrent between snapshots
    (``s``)."""
    return sum(v for k, v in total.items() if k not in "ns")


def _first_use(total: dict[str, int]) -> str:
    bad = ", ".join(f"{total[k]} {k}" for k in "xup" if total.get(k))
    cell = f"{total.get('v', 0)} / {_checked(total)}" + (f" ({bad})" if bad else "")
    return cell + f" ({total.get('n', 0)} null, {total.get('s', 0)} recurrent)"


def first_use_cell(r: OffloadCheckReport) -> str:
    """Over ``r``'s clean passes, as the clean table counts them: first-use blocks as computed / checked
    (``x``, ``u``, ``p`` where any; null and recurrent between snapshots not counted), then the
    connector-loaded blocks as computed and the groups digested."""
    total, loaded, digested, groups = _clean_counts(r)
    return f"{_first_use(total)}; {loaded} connector-loaded, {digested} of {groups} groups digested"


def _clean_row(r: OffloadCheckReport) -> str:
    clean = r.clean()
    total, loaded, digested, groups = _clean_counts(r)
    cell = _first_use(total)
    passes = f"{sum(it.status == 'passed' for it in clean)}/{len(clean)}"
    defects = ", ".join(d.id for d in r.defects)
    verdict = r.status + (f", shows {defects}" if defects else "")
    return (
        f"{r.case_id} | {verdict} | {passes} | {cell} | {loaded} | {digested} of {groups} | "
        f"{(r.judge_commit or 'unknown')[:7]} |"
    )


def clean_table(reports: Sequence[OffloadCheckReport]) -> str:
    """One row per case: its verdict, the clean passes, and what ``kv_bytes_identical`` checked in them."""
    rows = ["| " + _CLEAN_HEAD, "| --- | --- | --- | --- | --- | --- | --- |"]
    rows += ["| " + _clean_row(r) for r in sorted(reports, key=lambda r: r.case_id) if r.clean()]
    return "\n".join(rows)


def clean_table_by_run(runs: Sequence[tuple[str, Sequence[OffloadCheckReport]]]) -> str:
    """:func:`clean_table` over several runs, each row naming its run (in the order given)."""
    rows = ["| run | " + _CLEAN_HEAD, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run, reports in runs:
        rows += [
            f"| `{run}` | " + _clean_row(r) for r in sorted(reports, key=lambda r: r.case_id) if r.clean()
        ]
    return "\n".join(rows)


def clean_total(reports: Sequence[OffloadCheckReport]) -> str:
    """One line: every clean pass of the run together, as the clean table counts them."""
    total: dict[str, int] = {}
    loaded = passes = cases = 0
    for r in reports:
        if not r.clean():
            continue
        counts, n, _, _ = _clean_counts(r)
        for k, v in counts.items():
            total[k] = total.get(k, 0) + v
        loaded += n
        passes += len(r.clean())
        cases += 1
    return (
        f"In all: {cases} cases, {passes} clean passes; {_checked(total)} first-use blocks checked, "
        f"{total.get('v', 0)} as computed, {total.get('x', 0)} `x`, {total.get('u', 0)} `u`, "
        f"{total.get('p', 0)} `p` (not counted: {total.get('n', 0)} null, {total.get('s', 0)} recurrent "
        f"between snapshots); {loaded} connector-loaded blocks as computed."
    )


def outcomes_table(reports: Sequence[OffloadCheckReport]) -> str:
    """Per case with clean passes: each assertion's outcomes over those passes (``passed 3``, ``failed 3``,
    ``not evaluated 3``), in the order the passes hold them."""
    cases = [r for r in sorted(reports, key=lambda r: r.case_id) if r.clean()]
    names = list(dict.fromkeys(a.name for r in cases for it in r.clean() for a in it.assertions))
    rows = ["| case | clean passes | " + " | ".join(names) + " |", "| --- | --- |" + " --- |" * len(names)]
    for r in cases:
        cells = []
        for name in names:
            counts: dict[str, int] = {}
            for it in r.clean():
                for a in it.assertions:
                    if a.name == name:
                        counts[a.outcome] = counts.get(a.outcome, 0) + 1
            cells.append(", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-")
        rows.append(f"| {r.case_id} | {len(r.clean())} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def runner_rows(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per case its runner row from ``run.json``: the call that ran it, not one that listed it ``not_run``."""
    rows: dict[str, dict[str, Any]] = {}
    for call in meta.get("calls", []):
        for row in call.get("summary", {}).get("cases", []):
            if row["case_id"] not in rows or row.get("status") != "not_run":
                rows[row["case_id"]] = row
    return rows


def verdict_line(reports: Sequence[OffloadCheckReport], meta: dict[str, Any]) -> str:
    """One line: the run's reports by verdict, a failure with the defect it names, an error with the runner's
    verdict (``unsupported``: vLLM refused the case), each non-passing case by id."""
    runner = runner_rows(meta)
    groups: dict[str, list[str]] = {}
    for r in sorted(reports, key=lambda r: r.case_id):
        label = r.status
        if r.defects:
            label += ", naming " + ", ".join(d.id for d in r.defects)
        elif r.status == "error" and runner.get(r.case_id, {}).get("verdict") not in (None, "error"):
            label += f" (the runner's verdict: {runner[r.case_id]['verdict']})"
        groups.setdefault(label, []).append(r.case_id)
    parts = [
        f"{len(ids)} {label}" + ("" if label == "passed" else ": " + ", ".join(f"`{i}`" for i in ids))
        for label, ids in sorted(groups.items(), key=lambda kv: (kv[0] != "passed", kv[0]))
    ]
    return f"{len(reports)} reports: " + "; ".join(parts) + "."


def calls_table(runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """Per run and runner call (``run.json``, in its order): the runner's wall time, the cases it started and
    its verdicts. The runner's time, not the device call's: a call's setup may run before the runner."""
    rows = [
        "| run | runner call | runner wall s | cases started | the runner's verdicts |",
        "| --- | --- | --- | --- | --- |",
    ]
    for run, meta in runs:
        for n, call in enumerate(meta.get("calls", []), 1):
            summary = call.get("summary", {})
            started = sum(row.get("status") != "not_run" for row in summary.get("cases", []))
            counts = ", ".join(f"{k} {v}" for k, v in sorted(summary.get("counts", {}).items()))
            rows.append(f"| `{run}` | {n} | {summary.get('wall_s', '-')} | {started} | {counts} |")
    return "\n".join(rows)


def catalogue_table(reports: Sequence[OffloadCheckReport]) -> str:
    """Family x defect, for each connector's catalogue case: caught (by what), missed (why), or n/a."""
    cases = sorted((r for r in reports if r.case_id.endswith("-mutations")), key=lambda r: r.case_id)
    names = list(dict.fromkeys(it.mutation for r in cases for it in r.mutations() if it.mutation))
    rows = ["| case | verdict | " + " | ".join(names) + " |", "| --- | --- |" + " --- |" * len(names)]
    for r in cases:
        skipped = r.extra.get("mutations_not_applicable", {})
        by = {it.mutation: it for it in r.mutations()}
        cells = []
        for name in names:
            it = by.get(name)
            v = it.mutation_verdict if it is not None else None
            if name in skipped:
                cells.append("n/a")
            elif it is not None and v is None and it.error:  # stopped before it was judged
                cells.append(f"not finished ({it.error})")
            elif v is None:
                cells.append("not run")
            elif not v.caught and v.applied == 0:  # nothing to catch: distinct from a miss
                others = ", ".join(v.failed)
                cells.append("never acted (applied 0" + (f"; failed: {others}" if others else "") + ")")
            elif v.caught:
                cells.append(f"caught: {', '.join(e for e in v.expected if e in v.failed)}")
            else:
                others = ", ".join(f for f in v.failed if f not in v.expected)
                cells.append(f"MISSED ({v.message}" + (f"; failed: {others}" if others else "") + ")")
        rows.append(f"| {r.case_id.removesuffix('-mutations')} | {r.status} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
