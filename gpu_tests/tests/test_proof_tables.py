"""The KV proof's tables (gpu_tests/runner/proof_tables.py) on committed reports: a defect that never acted
and an iteration stopped before its verdict read as what they are, never as a miss; the totals and the runs
of the clean tables are the rows' own."""

from __future__ import annotations

import re
from typing import Any

from gpu_tests.kv_proof.catalogue import MUTATIONS
from gpu_tests.runner import proof_tables, tables
from gpu_tests.runner.collect import run_verdicts


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


def test_the_real_size_tables_show_each_models_newest_clean_pass_under_the_proof() -> None:
    """gpu-real-matrix, -budget and -batch: per model the clean pass of the newest proof run that holds one
    (never an older pass over a newer error), with its run, its judge and its run's ``run.json`` verdict."""
    runs = [(run, *tables.load(run)) for run in tables.REAL_PROOF_RUNS]
    newest: dict[str, tuple[str, str]] = {}
    for run, reports, _ in reversed(runs):  # oldest first: a newer run's clean pass replaces an older one
        for r in reports:
            if not r.case_id.endswith("-mutations"):
                newest[r.profile] = (run, r.case_id)
    rows = tables.newest_real(runs)
    assert {row.clean.report.profile: (row.clean.run, row.clean.report.case_id) for row in rows} == newest
    metas = {run: meta for run, _, meta in runs}
    for row in rows:
        assert row.clean.verdict == run_verdicts(metas[row.clean.run])[row.clean.report.case_id]
        assert row.clean.report.judge_commit in metas[row.clean.run]["judge_commits"]
    nemotron = next(row for row in rows if row.clean.report.profile == "nemotron-h-8b-real")
    # The eighth run's pass stands over the seventh run's error; that error stays in its own run.
    assert (nemotron.clean.run, nemotron.clean.verdict) == (tables.REAL_PROOF_H_RUN, "passed")
    older = tables.newest_real([run for run in runs if run[0] != tables.REAL_PROOF_H_RUN])
    died = next(row for row in older if row.clean.report.profile == "nemotron-h-8b-real").clean
    assert (died.run, died.verdict) == (tables.REAL_PROOF_G_RUN, "error")
    assert [d.id for d in died.report.defects] == ["vllm#50454"] and died.report.engine_fault
    for table in (tables.real_table(rows), tables.budget_table(rows), tables.batch_table(rows)):
        lines = table.splitlines()[2:]
        assert len(lines) == len(rows)
        for row, line in zip(rows, lines, strict=True):
            assert row.clean.source() in line  # the run and its judge's commit, on every row
    matrix = _cells(tables.real_table(rows), "nemotron-h-8b-real (1)")
    assert matrix["run (judge)"] == f"`{tables.REAL_PROOF_H_RUN}` (24a0d73)"
    assert matrix["verdict"] == "passed"
    before = _cells(tables.real_table(older), "nemotron-h-8b-real (1)")
    assert before["run (judge)"] == f"`{tables.REAL_PROOF_G_RUN}` (efe88c1)"
    assert before["verdict"] == "error: the engine died, vllm#50454 (`engine_fault`)"
    assert not any(run.startswith("real-size-2026-12-01") for run in tables.REAL_PROOF_RUNS)


def test_no_committed_case_passes_without_a_byte_verdict() -> None:
    """Issue 33: every committed case of the proof's runs that reads ``passed`` holds ``kv_bytes_identical``
    evaluated and passed in each clean pass, and no report speaks of the retired byte ledger. A catalogue case
    without clean passes (issue 53: 30 of them) passes on its defects: each acted and was caught by an
    assertion the catalogue names for it, a defect only the bytes can catch by ``kv_bytes_identical``."""
    catalogue_only = 0
    for folder in sorted([*tables.RESULTS.glob("kv-proof-*"), *tables.RESULTS.glob("real-size-*")]):
        reports, _ = tables.load(folder.name)
        for r in reports:
            messages = [a.message for it in r.iterations for a in it.assertions]
            assert not any("ledger" in m.lower() for m in messages), (folder.name, r.case_id)
            if r.status != "passed":
                continue
            for it in r.clean():
                judged = [a for a in it.assertions if a.name == "kv_bytes_identical"]
                assert judged and judged[0].evaluated and judged[0].passed, (folder.name, r.case_id, it.label)
            if not r.clean():
                catalogue_only += 1
                _caught_as_catalogued(folder.name, r)
    assert catalogue_only == 30  # the cases this branch of the test reads (a new one adds to it)


def _caught_as_catalogued(run: str, report: Any) -> None:
    defects = [it for it in report.iterations if it.mutation]
    assert defects, (run, report.case_id, "a catalogue case without a defect's iteration")
    for it in defects:
        where = (run, report.case_id, it.mutation)
        mutation = MUTATIONS[it.mutation]
        assert it.mutation_verdict is not None and it.mutation_verdict.applied > 0, where
        failed = {a.name for a in it.assertions if a.evaluated and not a.passed}
        assert failed & set(mutation.caught_by), where
        if mutation.caught_by == ("kv_bytes_identical",):
            assert "kv_bytes_identical" in failed, where
