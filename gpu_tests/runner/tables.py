"""The tables of gpu_tests/README.md, generated from the committed reports (never written by hand).

    python -m gpu_tests.runner.tables            # rewrite the tables in gpu_tests/README.md
    python -m gpu_tests.runner.tables --check    # exit 1 when a table differs from its reports

A table sits between ``<!-- figure:NAME -->`` and ``<!-- /figure -->`` in the README; :data:`TABLES` says
which run folder each is made from. Every cell is a report field or a count of them. ``gpu_tests/history/
README.md`` holds issue 35's grade, its runs and its device plan (:data:`HISTORY_TABLES`), from the committed
``history-*`` runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpu_tests.offload_check.assertions import moved_by_the_batch, same_split_pairs
from gpu_tests.offload_check.report import Iteration, OffloadCheckReport

from . import budget, grade, history_plan, proof_tables
from .collect import read_report, report_paths
from .jobs import expected_costs

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
README = ROOT / "README.md"
HISTORY_README = ROOT / "history" / "README.md"  # issue 35's grade (HISTORY_TABLES)
# issue 33's sixth run (judge 60cb2de): Nemotron-H's Simple catalogue again; the rest of that call was lost
REAL_PROOF_F_RUN = "real-size-2026-12-03b"
# issue 33's fifth run (judge 1a0c83b): every catalogue again, tiny and real size, and the
# real-size clean passes of Qwen3.5 and Nemotron-H
PROOF_E_RUN = "kv-proof-2026-12-03"
REAL_PROOF_E_RUN = "real-size-2026-12-03"
# issue 33's runs under the KV proof (reference digests at first use), newest first: the whole tiny matrix
# with three clean passes (judge 1918cd4), and the real-size catalogues again with Gemma's clean pass
PROOF_D_RUN = "kv-proof-2026-12-02d"
REAL_PROOF_B_RUN = "real-size-2026-12-02b"
# the catalogue with the shared slot and the stale slot as they were then, every family, and at real size
PROOF_C_RUN = "kv-proof-2026-12-02c"
REAL_PROOF_RUN = "real-size-2026-12-02"
# the fixes' catalogue run, one clean pass a case (judge 4d5bd63)
PROOF_FIX_RUN = "kv-proof-2026-12-02b"
# every real-size run made under the proof, newest first: their clean passes share one table
REAL_PROOF_RUNS = (REAL_PROOF_F_RUN, REAL_PROOF_E_RUN, REAL_PROOF_B_RUN, REAL_PROOF_RUN)
REAL_RUN: str | None = "real-size-2026-12-01b"  # issue 27's real-size run under results/
NO_REAL_RUN = "No real-size run is committed yet: `gpu_tests/real_size/PLAN.md` says how to make one."
_MARK = re.compile(r"(<!-- figure:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /figure -->)", re.S)


def load(run: str, results: Path = RESULTS) -> tuple[list[OffloadCheckReport], dict[str, Any]]:
    folder = results / run
    reports = [read_report(p) for p in report_paths(folder)]
    meta = json.loads((folder / "run.json").read_text())
    return reports, meta


def _status(r: OffloadCheckReport, verdicts: dict[str, dict[str, Any]]) -> str:
    row = verdicts.get(r.case_id, {})
    if row.get("verdict") == "unsupported":
        return "unsupported by vLLM 0.26 (the Simple connector needs a full-attention group)"
    ids = ", ".join(d.id for d in r.defects)
    if r.defects and r.status == "failed":
        return "failed: " + ids
    if r.status == "failed":
        names = sorted({a.name for a in r.failures()})
        return "failed: " + ", ".join(names)
    # A catalogue's byte-mutation iterations can show a defect its verdict does not rest on.
    return f"{r.status}; shows {ids}" if r.defects else r.status


def _bytes(r: OffloadCheckReport) -> str:
    clean = r.clean()
    if not clean:
        return "-"
    first = clean[0].assertion("kv_bytes_identical")
    if not first.evaluated:
        return "not evaluated"
    ledgers = [it.ledger for it in clean if it.ledger is not None]
    verified = sum(lg.verified for lg in ledgers)
    mismatched = sum(lg.mismatched + lg.unverified for lg in ledgers)
    groups = len({g for lg in ledgers for g in lg.loaded_blocks_by_group})
    layers = max((len(lg.layers) for lg in ledgers), default=0)
    blocks = sum(lg.loaded_blocks for lg in ledgers)
    return f"{verified} identical, {mismatched} not; {blocks} blocks, {groups} groups, {layers} layers"


def defect_table(reports: Sequence[OffloadCheckReport]) -> str:
    rows = [
        "| case | defect | probes | fingerprint matched | controls and other probes |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in sorted(reports, key=lambda r: r.case_id):
        for d in r.defects:
            # A catalogue has no clean pass: its first iteration the evidence names (a byte mutation).
            clean = r.clean()
            if not clean:  # a catalogue: its byte mutations corrupt the answers of what they load
                shown = [
                    [c for c in it.comparisons if c.probe in d.probes and c.restored_ahead == 1]
                    for it in r.iterations
                ]
                seen = [
                    it.label.removeprefix("mutation-")
                    for it, cs in zip(r.iterations, shown, strict=True)
                    if cs
                ]
                matched = sum(c.shape == "last_token_doubled" for cs in shown for c in cs)
                rows.append(
                    f"| {r.case_id} | [{d.id}]({d.url}) | {len(d.probes)}: {', '.join(d.probes)} | "
                    f"last_token_doubled on {matched}/{sum(map(len, shown))} (mutation iterations) | "
                    f"the same split and state in {len(seen)} of {len(r.iterations)} mutation iterations "
                    f"({', '.join(seen)}) |"
                )
                continue
            first = clean[0]
            shapes = [c for c in first.comparisons if c.probe in d.probes]
            matched = sum(c.shape == "last_token_doubled" for c in shapes)
            others = [c for c in first.comparisons if c.probe not in d.probes]
            fine = sum(c.verdict == "agree" for c in others)
            # A probe that loaded nothing from the connector is not compared (never counted as agreement).
            idle = sum(c.verdict == "not_loaded" for c in others)
            rows.append(
                f"| {r.case_id} | [{d.id}]({d.url}) | {len(d.probes)}: {', '.join(d.probes)} | "
                f"last_token_doubled on {matched}/{len(shapes)} (first pass) | "
                f"{fine}/{len(others)} answered like their same-split reference"
                + (f", {idle} loaded nothing from the connector" if idle else "")
                + " (first pass) |"
            )
    return "\n".join(rows)


def _case(r: OffloadCheckReport) -> str:
    cpu = f" {r.cpu_gib:g} GiB" if r.cpu_gib is not None else ""
    return f"{r.connector.replace('Connector', '')}{cpu} / {r.frontend}"


def _real_sorted(reports: Sequence[OffloadCheckReport]) -> list[OffloadCheckReport]:
    return sorted((r for r in reports if not r.case_id.endswith("-mutations")), key=lambda r: r.case_id)


def real_table(reports: Sequence[OffloadCheckReport], meta: dict[str, Any]) -> str:
    """Upstream's matrix at real size: per case its verdict, the reload, the byte proof, the answers against
    the batch control, the boundaries and the mutations its catalogue caught; then the cases the run's calls
    left without a report (stopped at a deadline, or never started), from the runner's summaries."""
    verdicts = proof_tables.runner_rows(meta)
    rows = [
        "| profile (GPUs used) | connector CPU / frontend | verdict | reload proven | kv_bytes_identical | "
        "answers: reload = same-split warm; batch control moved | boundaries | mutations caught | "
        "startup s | case s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by_id = {r.case_id: r for r in reports}
    for r in _real_sorted(reports):
        own = _catalogue(r, by_id)
        its = [*r.mutations(), *own.mutations()]
        caught = [it.mutation_verdict.caught for it in its if it.mutation_verdict is not None]
        mutations = f"{sum(caught)}/{len(caught)}" if caught else "-"
        if own.defects:  # its server reached what the clean pass could not
            mutations += "; its iterations show " + ", ".join(
                f"{d.id} ({', '.join(d.probes)})" for d in own.defects
            )
        rows.append(
            f"| {r.profile} ({r.gpus_used}) | {_case(r)} | {_real_status(r, verdicts)} | {_proven(r)} | "
            f"{_bytes(r)} | {_answers(r)} | {_real_boundaries(r)} | {mutations} | "
            f"{_seconds(r, 'server_startup_s')} | {_seconds(r, 'case_s')} |"
        )
    for case_id, row in sorted(verdicts.items()):
        if case_id in by_id or (
            case_id.endswith("-mutations") and case_id.removesuffix("-mutations") in by_id
        ):
            continue
        why = (
            f"stopped at its call's deadline after {row.get('wall_s', 0):.0f} s, before its first pass "
            "ended: no report"
            if row.get("status") == "killed"
            else "not run: it did not fit the two calls"
        )
        rows.append(f"| {case_id} | | {why} | | | | | | | |")
    return "\n".join(rows)


def _catalogue(r: OffloadCheckReport, by_id: Mapping[str, OffloadCheckReport]) -> OffloadCheckReport:
    """The report of ``r``'s mutation catalogue when it ran as a case of its own, else an empty one."""
    return by_id.get(f"{r.case_id}-mutations") or OffloadCheckReport.model_construct(
        iterations=[], timings={}
    )


def _seconds(r: OffloadCheckReport, key: str) -> str:
    value = r.timings.get(key)
    return "not measured" if value is None else f"{value:.0f}"


def _real_status(r: OffloadCheckReport, verdicts: dict[str, dict[str, Any]]) -> str:
    clean = r.clean()
    if r.status == "error" and clean and all(it.status == "passed" for it in clean) and r.error:
        return f"clean pass passed; then {r.error} (the call's deadline)"
    return _status(r, verdicts)


def _proven(r: OffloadCheckReport) -> str:
    x = budget.reload(r)
    clean = r.clean()
    if not clean or x is None:
        return "-"
    ok = clean[0].assertion("reload_proven").passed
    return f"{'yes' if ok else 'no'}: {x.loaded_tokens} tokens loaded"


def _answers(r: OffloadCheckReport) -> str:
    clean = r.clean()
    if not clean:
        return "-"
    it = clean[0]
    agree = sum(c.verdict == "agree" for c in it.comparisons)
    differ = sum(c.verdict == "differ" for c in it.comparisons)
    cell = f"{agree}/{agree + differ}"
    moved = moved_by_the_batch(it)
    if moved is not None:
        cell += "; {}/{}".format(*moved)
    return cell + ("" if it.assertion("answers_unchanged").evaluated else " (not evaluated)")


def _real_boundaries(r: OffloadCheckReport) -> str:
    clean = r.clean()
    if not clean:
        return "-"
    a = clean[0].assertion("boundaries_reached")
    if "evicted" in a.message and not a.evaluated:
        return "not evaluated: the CPU tier evicted the probes"
    if "not evaluated" in a.message and not a.evaluated:
        return "not evaluated: vLLM reloads no block-aligned probe"
    return a.outcome + (f" ({a.message})" if a.evaluated and a.message else "")


def _same(it: Iteration, a: str, b: str) -> tuple[int, int]:
    """(answers equal, answers compared) of runs ``a`` and ``b`` of one pass, probe by probe at one split."""
    if a not in it.runs or b not in it.runs:
        return 0, 0
    pairs = same_split_pairs(it.runs[a], it.runs[b])
    return sum(x.text == y.text for x, y in pairs), len(pairs)


def batch_table(reports: Sequence[OffloadCheckReport]) -> str:
    """Why text cannot judge the KV at real size: per case, how often the same prompt at the same split
    answers alike when only the batch changes, against the reload."""
    rows = [
        "| case | cold2 = cold (same schedule) | warm2 = warm (spread over 2 s) | "
        "decode = warm (8 at once) | reload = warm (same split) | differing reloads that loaded nothing |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in _real_sorted(reports):
        clean = r.clean()
        if not clean:
            continue
        it = clean[0]
        cells = [f"{e}/{n}" for e, n in (_same(it, "cold2", "cold"), _same(it, "warm2", "warm"))]
        cells.append("{}/{}".format(*_same(it, "decode", "warm")))
        cells.append("{}/{}".format(*_same(it, "reload", "warm")))
        pairs = (
            same_split_pairs(it.runs["reload"], it.runs["warm"]) if {"reload", "warm"} <= set(it.runs) else []
        )
        unequal = [x for x, y in pairs if x.text != y.text]
        cells.append(f"{sum(x.split is not None and not x.split.external for x in unequal)}/{len(unequal)}")
        rows.append(f"| {r.case_id} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _decode(r: OffloadCheckReport) -> str:
    d, full = budget.decode(r), budget.at_once(r)
    small = (
        "not measured"
        if d is None
        else f"{d.tokens_per_s:.0f} ({d.in_flight} at once, {d.runs} run{'s' if d.runs != 1 else ''})"
    )
    return small + ("" if full is None else f"; {full.tokens_per_s:.0f} ({full.in_flight} at once, cold run)")


def _phases(r: OffloadCheckReport, catalogue_case: OffloadCheckReport | None = None) -> str:
    it = budget.first_clean(r)
    if it is None:
        return "not measured"
    phases = [
        f"{k.removesuffix('_s').removesuffix('_run')} {it.timings[k]:.0f}"
        for k in budget.PHASES
        if k in it.timings
    ]
    timings = {**r.timings, **(catalogue_case.timings if catalogue_case is not None else {})}
    catalogue = [v for k, v in timings.items() if k.startswith("mutation_")]
    if catalogue:
        phases.append(f"catalogue {sum(catalogue):.0f} ({len(catalogue)} mutations)")
    return " / ".join(phases)


def _occupancy(r: OffloadCheckReport) -> str:
    o = budget.occupancy(r)
    if o is None:
        return "not measured (no CPU-tier events)"
    held = f", {o.gib:.2f} of {r.cpu_gib:g} GiB" if o.gib is not None and r.cpu_gib else ""
    late = f" ({o.held_at_cold} still held at the cold run's start)" if o.held_at_cold else ""
    return f"{o.live} held{held}; {o.stored} stored, {o.evicted} evicted{late}"


def _reload(r: OffloadCheckReport) -> str:
    x = budget.reload(r)
    if x is None:
        return "not measured"
    kind = "whole" if x.whole == x.prompts else "partial"
    share = f"{x.cached_tokens / x.warm_cached_tokens:.0%}" if x.warm_cached_tokens else "-"
    short = f"; {x.uncached} prompts cache nothing (shorter than a block)" if x.uncached else ""
    return (
        f"{kind}: {x.whole}/{x.prompts} prompts whole, {share} of the warm run's cached tokens "
        f"({x.loaded_tokens} loaded){short}"
    )


def budget_table(reports: Sequence[OffloadCheckReport]) -> str:
    """The measured budget per model and case (a model's first case started cold); the H100 column is an
    estimate (``budget.h100``)."""
    rows = [
        "| profile | connector CPU / frontend | startup s | output tok/s: 8 at most at once; whole load | "
        "phases s (first clean pass; catalogue) | CPU tier: entries held, stored, evicted | reload | "
        "H100 (ESTIMATE) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by_id = {r.case_id: r for r in reports}
    for r in _real_sorted(reports):
        startup = r.timings.get("server_startup_s")
        rows.append(
            f"| {r.profile} | {_case(r)} | {'not measured' if startup is None else f'{startup:.0f}'} | "
            f"{_decode(r)} | {_phases(r, _catalogue(r, by_id))} | {_occupancy(r)} | {_reload(r)} | "
            f"{budget.h100(r)} |"
        )
    return "\n".join(rows)


def _real(table: Callable[[Sequence[OffloadCheckReport], dict[str, Any]], str]) -> Callable[[], str]:
    return lambda: NO_REAL_RUN if REAL_RUN is None else table(*load(REAL_RUN, RESULTS))


TABLES: dict[str, Callable[[], str]] = {
    "gpu-real-matrix": _real(real_table),
    "gpu-real-budget": _real(lambda reports, _meta: budget_table(reports)),
    "gpu-real-batch": _real(lambda reports, _meta: batch_table(reports)),
    "gpu-proof-f-calls": lambda: proof_tables.calls_table([(REAL_PROOF_F_RUN, load(REAL_PROOF_F_RUN)[1])]),
    "gpu-proof-f-real-catalogue": lambda: proof_tables.catalogue_table(load(REAL_PROOF_F_RUN)[0]),
    "gpu-proof-e-calls": lambda: proof_tables.calls_table(
        [(run, load(run)[1]) for run in (PROOF_E_RUN, REAL_PROOF_E_RUN)]
    ),
    "gpu-proof-e-verdicts": lambda: "\n\n".join(
        f"`{run}`: {proof_tables.verdict_line(*load(run))}" for run in (PROOF_E_RUN, REAL_PROOF_E_RUN)
    ),
    "gpu-proof-e-catalogue": lambda: proof_tables.catalogue_table(load(PROOF_E_RUN)[0]),
    "gpu-proof-e-real-catalogue": lambda: proof_tables.catalogue_table(load(REAL_PROOF_E_RUN)[0]),
    "gpu-proof-d-verdicts": lambda: proof_tables.verdict_line(*load(PROOF_D_RUN)),
    "gpu-proof-d-clean": lambda: proof_tables.clean_table(load(PROOF_D_RUN)[0]),
    "gpu-proof-d-total": lambda: proof_tables.clean_total(load(PROOF_D_RUN)[0]),
    "gpu-proof-d-defects": lambda: defect_table(load(PROOF_D_RUN)[0]),
    "gpu-proof-d-calls": lambda: proof_tables.calls_table(
        [(run, load(run)[1]) for run in (PROOF_D_RUN, REAL_PROOF_B_RUN)]
    ),
    "gpu-proof-real-clean": lambda: proof_tables.clean_table_by_run(
        [(run, load(run)[0]) for run in REAL_PROOF_RUNS]
    ),
    "gpu-proof-real-b-catalogue": lambda: proof_tables.catalogue_table(load(REAL_PROOF_B_RUN)[0]),
    "gpu-proof-c-clean": lambda: proof_tables.clean_table(load(PROOF_C_RUN)[0]),
    "gpu-proof-c-catalogue": lambda: proof_tables.catalogue_table(load(PROOF_C_RUN)[0]),
    "gpu-proof-real-catalogue": lambda: proof_tables.catalogue_table(load(REAL_PROOF_RUN)[0]),
    "gpu-proof-fix-clean": lambda: proof_tables.clean_table(load(PROOF_FIX_RUN)[0]),
    "gpu-proof-catalogue": lambda: proof_tables.catalogue_table(load(PROOF_FIX_RUN)[0]),
}


HISTORY_TABLES: dict[str, Callable[[], str]] = {
    "history-grade": lambda: grade.grade_table(grade.history_runs(RESULTS)),
    "history-runs": lambda: grade.runs_table(grade.history_runs(RESULTS)),
    "history-hunts": lambda: grade.hunt_table(grade.history_runs(RESULTS)),
    "history-plan": lambda: _history_plan(),
}


def _history_plan() -> str:
    common = {"report_dir": Path("out/history/reports"), "costs": expected_costs(RESULTS)}
    lean = history_plan.history_plans(frontends=("python",), **common)
    return history_plan.plan_table(history_plan.history_plans(**common), lean)


def fill_figures(text: str, figures: Mapping[str, Callable[[], str]]) -> str:
    """``text`` with every marked figure made again by its function; a marker naming none is an error."""

    def fill(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in figures:
            raise KeyError(f"no table named {name!r} (known: {sorted(figures)})")
        return f"{m.group(1)}{figures[name]()}\n{m.group(4)}"

    return _MARK.sub(fill, text)


def write_or_check(readme: Path, new: str, *, check: bool, remake: str) -> int:
    """Write ``new`` to ``readme``, or with ``check`` exit 1 when they differ (``remake``: the command)."""
    if not check:
        readme.write_text(new)
        return 0
    if new != readme.read_text():
        print(f"{readme.relative_to(ROOT.parent)}: a table differs from its reports; run {remake}")
        return 1
    return 0


def render(text: str) -> str:
    """``text`` with every marked table regenerated; a marker naming no table is an error."""
    return fill_figures(text, TABLES)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_tests.runner.tables", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when the README differs from its reports")
    args = p.parse_args(argv)
    remake = "python -m gpu_tests.runner.tables"
    code = write_or_check(README, render(README.read_text()), check=args.check, remake=remake)
    history = fill_figures(HISTORY_README.read_text(), HISTORY_TABLES)
    return write_or_check(HISTORY_README, history, check=args.check, remake=remake) or code


if __name__ == "__main__":
    sys.exit(main())
