"""The KV proof's tables (gpu_tests/runner/proof_tables.py) on committed reports: a defect that never acted
and an iteration stopped before its verdict read as what they are, never as a miss; the totals and the runs
of the clean tables are the rows' own."""

from __future__ import annotations

import re

from gpu_tests.runner import proof_tables, tables


def _cells(table: str, case: str) -> dict[str, str]:
    head, _, *rows = table.splitlines()
    names = [c.strip() for c in head.strip("|").split("|")]
    row = next(r for r in rows if r.startswith(f"| {case} |"))
    return dict(zip(names, (c.strip() for c in row.strip("|").split("|")), strict=True))


def test_a_defect_that_never_acted_and_an_unfinished_iteration_are_not_misses() -> None:
    reports, _ = tables.load("real-size-2026-12-02b")
    table = proof_tables.catalogue_table(reports)
    qwen = _cells(table, "qwen3.5-35b-real-tp1-offloading-python")
    report = next(r for r in reports if r.case_id == "qwen3.5-35b-real-tp1-offloading-python-mutations")
    permuted = next(it for it in report.mutations() if it.mutation == "load_plan_permuted")
    assert permuted.mutation_verdict is not None and permuted.mutation_verdict.applied == 0
    assert qwen["load_plan_permuted"].startswith("never acted (applied 0")
    assert qwen["stale_slot_after_reset"].startswith("MISSED")
    for case in ("qwen3.5-35b-real-tp1-offloading-python", "nemotron-h-8b-real-offloading-python"):
        cell = _cells(table, case)["changed_after_load"]
        assert cell.startswith("not finished (") and "SIGTERM" in cell
        assert _cells(table, case)["verdict"] == "error"


def test_the_total_line_is_the_sum_of_the_clean_table() -> None:
    reports, _ = tables.load(tables.PROOF_D_RUN)
    rows = proof_tables.clean_table(reports).splitlines()[2:]
    computed = checked = 0
    for row in rows:
        m = re.search(r"\| (\d+) / (\d+) ", row)
        assert m is not None
        computed, checked = computed + int(m.group(1)), checked + int(m.group(2))
    line = proof_tables.clean_total(reports)
    assert f"{len(rows)} cases" in line
    assert f"{checked} first-use blocks checked, {computed} as computed" in line


def test_the_real_size_clean_table_names_the_run_of_each_row() -> None:
    runs = [(run, tables.load(run)[0]) for run in tables.REAL_PROOF_RUNS]
    rows = proof_tables.clean_table_by_run(runs).splitlines()[2:]
    for run, reports in runs:
        for r in reports:
            if r.clean():
                assert any(row.startswith(f"| `{run}` | {r.case_id} |") for row in rows)
    assert len(rows) == sum(bool(r.clean()) for _, reports in runs for r in reports)
