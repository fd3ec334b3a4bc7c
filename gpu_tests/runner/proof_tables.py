"""The KV proof's tables, made from committed reports only: every clean case with its byte verdict at first
use, and every catalogue case defect by defect (``tables.TABLES`` writes them into the README)."""

from __future__ import annotations

from collections.abc import Sequence

from gpu_tests.offload_check.probe_files import FirstUse
from gpu_tests.offload_check.report import Iteration, OffloadCheckReport

__all__ = ["catalogue_table", "clean_table"]


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


def clean_table(reports: Sequence[OffloadCheckReport]) -> str:
    """One row per case: its verdict, the clean passes, and what ``kv_bytes_identical`` checked in them."""
    rows = [
        "| case | verdict | clean passes | first-use blocks as computed / checked (not counted: null, "
        "recurrent between snapshots) | connector-loaded blocks as computed | groups digested | judge |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in sorted(reports, key=lambda r: r.case_id):
        clean = r.clean()
        if not clean:
            continue
        total: dict[str, int] = {}
        loaded = digested = 0
        groups = 0
        for it in clean:
            counts, n, d = _uses(it)
            for k, v in counts.items():
                total[k] = total.get(k, 0) + v
            loaded += n
            digested = max(digested, d)
            groups = max(groups, _groups(it.first_use))
        checked = sum(v for k, v in total.items() if k not in "ns")
        bad = ", ".join(f"{total[k]} {k}" for k in "xup" if total.get(k))
        cell = f"{total.get('v', 0)} / {checked}" + (f" ({bad})" if bad else "")
        cell += f" ({total.get('n', 0)} null, {total.get('s', 0)} recurrent)"
        passes = f"{sum(it.status == 'passed' for it in clean)}/{len(clean)}"
        defects = ", ".join(d.id for d in r.defects)
        verdict = r.status + (f", shows {defects}" if defects else "")
        rows.append(
            f"| {r.case_id} | {verdict} | {passes} | {cell} | {loaded} | {digested} of {groups} | "
            f"{(r.judge_commit or 'unknown')[:7]} |"
        )
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
            elif v is None:
                cells.append("not run")
            elif v.caught:
                cells.append(f"caught: {', '.join(e for e in v.expected if e in v.failed)}")
            else:
                others = ", ".join(f for f in v.failed if f not in v.expected)
                cells.append(f"MISSED ({v.message}" + (f"; failed: {others}" if others else "") + ")")
        rows.append(f"| {r.case_id.removesuffix('-mutations')} | {r.status} | " + " | ".join(cells) + " |")
    return "\n".join(rows)
