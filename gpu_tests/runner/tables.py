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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_tests.offload_check.assertions import moved_by_the_batch, same_split_pairs
from gpu_tests.offload_check.report import AssertionResult, Iteration, OffloadCheckReport

from . import budget, grade, history_plan, proof_tables, real_volume
from .collect import read_report, report_paths, run_verdicts
from .jobs import expected_costs, measured_check_s

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
README = ROOT / "README.md"
HISTORY_README = ROOT / "history" / "README.md"  # issue 35's grade (HISTORY_TABLES)
# issue 33's eighth run (judge 24a0d73): Nemotron-H 8B's real-size clean pass with 64 GiB of GPU KV
REAL_PROOF_H_RUN = "real-size-2026-12-04b"
# issue 33's seventh run (judge efe88c1): the `all`-mode tiny families' Offloading cases under
# Proof.before_step, and Nemotron-H 8B's real-size clean pass again (its engine died on vllm#50454 again)
PROOF_G_RUN = "kv-proof-2026-12-04"
REAL_PROOF_G_RUN = "real-size-2026-12-04"
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
# every real-size run made under the proof, newest first: their clean passes share one table, and issue 27's
# real-size tables take each model's newest clean pass (and its case's newest catalogue) from them
REAL_PROOF_RUNS = (
    REAL_PROOF_H_RUN,
    REAL_PROOF_G_RUN,
    REAL_PROOF_F_RUN,
    REAL_PROOF_E_RUN,
    REAL_PROOF_B_RUN,
    REAL_PROOF_RUN,
)
NO_REAL_RUN = (
    "No real-size clean pass is committed under the proof yet: `gpu_tests/real_size/PLAN.md` says how to "
    "make one."
)
_MARK = re.compile(r"(<!-- figure:(?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /figure -->)", re.S)


def load(run: str, results: Path = RESULTS) -> tuple[list[OffloadCheckReport], dict[str, Any]]:
    folder = results / run
    reports = [read_report(p) for p in report_paths(folder)]
    meta = json.loads((folder / "run.json").read_text())
    return reports, meta


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


@dataclass(frozen=True)
class Sourced:
    """A committed report, the run folder that holds it and the verdict that run's ``run.json`` records for it
    (with the runner's row for the case, where the run has one)."""

    run: str
    report: OffloadCheckReport
    verdict: str
    runner: Mapping[str, Any] = field(default_factory=dict)

    @property
    def judge(self) -> str:
        """The short commit of the judge that gave the report's verdicts (``judge_commit``)."""
        return (self.report.judge_commit or "unknown")[:7]

    def source(self) -> str:
        """The run and its judge, as a reader traces the row (the run in backticks, the commit short)."""
        return f"`{self.run}` ({self.judge})"


@dataclass(frozen=True)
class RealRow:
    """One real-size model: its newest clean pass, and the newest catalogue of the same case (None: none)."""

    clean: Sourced
    catalogue: Sourced | None = None

    def sources(self) -> str:
        own = self.catalogue
        return self.clean.source() + ("" if own is None else f"; catalogue {own.source()}")


Run = tuple[str, Sequence[OffloadCheckReport], Mapping[str, Any]]


def newest_real(runs: Sequence[Run]) -> list[RealRow]:
    """Per real-size model (profile), its newest clean-pass report (a case id without ``-mutations``) over
    ``runs`` (run name, reports, ``run.json``; newest first), whatever its verdict: a newer error stands over
    an older pass. Beside it, the newest catalogue of the same case (``CASE-mutations``) from the same runs.
    Each report keeps its own run and that run's recorded verdict."""
    clean: dict[str, Sourced] = {}
    catalogues: dict[str, Sourced] = {}
    for run, reports, meta in runs:
        recorded, runner = run_verdicts(dict(meta)), proof_tables.runner_rows(dict(meta))
        for r in sorted(reports, key=lambda r: r.case_id):
            s = Sourced(run, r, recorded.get(r.case_id, r.status), runner.get(r.case_id, {}))
            if r.case_id.endswith("-mutations"):
                catalogues.setdefault(r.case_id, s)
            else:
                clean.setdefault(r.profile, s)
    return [RealRow(s, catalogues.get(f"{s.report.case_id}-mutations")) for _, s in sorted(clean.items())]


def _judged(it: Iteration, name: str) -> AssertionResult | None:
    """The pass's verdict on ``name``; None where the pass ended before it was judged (an error)."""
    return next((a for a in it.assertions if a.name == name), None)


def _bytes(r: OffloadCheckReport) -> str:
    """``kv_bytes_identical`` over the clean passes, with what the proof checked at first use."""
    clean = r.clean()
    if not clean:
        return "-"
    judged = [a for it in clean if (a := _judged(it, "kv_bytes_identical")) is not None]
    if not judged:
        return "not judged: the pass ended in an error"
    if not any(a.evaluated for a in judged):
        return "not evaluated"
    outcome = ", ".join(sorted({a.outcome for a in judged}))
    return f"{outcome}: {proof_tables.first_use_cell(r)}"


def real_table(rows: Sequence[RealRow]) -> str:
    """Upstream's matrix at real size, a row per model from its newest clean pass: the run it came from (with
    that run's judge), the verdict that run's ``run.json`` records, the reload, the byte proof, the answers
    against the batch control, the boundaries and the mutations its case's newest catalogue caught."""
    lines = [
        "| profile (GPUs used) | run (judge) | connector CPU / frontend | verdict | reload proven | "
        "kv_bytes_identical: first-use blocks as computed / checked (null, recurrent); connector-loaded | "
        "answers: reload = same-split warm; batch control moved | boundaries | mutations caught (catalogue's "
        "run, judge) | startup s | case s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        r = row.clean.report
        lines.append(
            f"| {r.profile} ({r.gpus_used}) | {row.clean.source()} | {_case(r)} | "
            f"{_real_status(row.clean)} | {_proven(r)} | {_bytes(r)} | {_answers(r)} | "
            f"{_real_boundaries(r)} | {_mutations(row)} | "
            f"{_seconds(r, 'server_startup_s')} | {_seconds(r, 'case_s')} |"
        )
    return "\n".join(lines)


def _mutations(row: RealRow) -> str:
    """The mutations caught by the clean case's own iterations and its newest catalogue, with their runs."""
    own = row.catalogue
    its = [*row.clean.report.mutations(), *(own.report.mutations() if own is not None else [])]
    caught = [it.mutation_verdict.caught for it in its if it.mutation_verdict is not None]
    if not caught:
        return "-"
    cell = f"{sum(caught)}/{len(caught)}"
    if own is not None:
        cell += f" (`{own.run}`, {own.judge})"
        if own.report.defects:  # its server reached what the clean pass could not
            cell += "; its iterations show " + ", ".join(
                f"{d.id} ({', '.join(d.probes)})" for d in own.report.defects
            )
    return cell


def _seconds(r: OffloadCheckReport, key: str) -> str:
    value = r.timings.get(key)
    return "not measured" if value is None else f"{value:.0f}"


def _real_status(s: Sourced) -> str:
    """The verdict its run's ``run.json`` records, with what the report says of it: the defect a failure or a
    dead engine names, the assertions that failed, or a pass cut by the call's deadline."""
    r, verdict = s.report, s.verdict
    ids = ", ".join(d.id for d in r.defects)
    if s.runner.get("verdict") == "unsupported":
        return "unsupported by vLLM 0.26 (the Simple connector needs a full-attention group)"
    clean = r.clean()
    if verdict == "error" and r.engine_fault and ids:
        return f"error: the engine died, {ids} (`engine_fault`)"
    if verdict == "error" and clean and all(it.status == "passed" for it in clean) and r.error:
        return f"clean pass passed; then {r.error} (the call's deadline)"
    if verdict == "failed" and ids:
        return "failed: " + ids
    if verdict == "failed":
        return "failed: " + ", ".join(sorted({a.name for a in r.failures()}))
    # A catalogue's byte-mutation iterations can show a defect its verdict does not rest on.
    return f"{verdict}; shows {ids}" if ids else verdict


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
    judged = _judged(it, "answers_unchanged")
    if judged is None:
        return "-"
    agree = sum(c.verdict == "agree" for c in it.comparisons)
    differ = sum(c.verdict == "differ" for c in it.comparisons)
    cell = f"{agree}/{agree + differ}"
    moved = moved_by_the_batch(it)
    if moved is not None:
        cell += "; {}/{}".format(*moved)
    return cell + ("" if judged.evaluated else " (not evaluated)")


def _real_boundaries(r: OffloadCheckReport) -> str:
    clean = r.clean()
    if not clean:
        return "-"
    a = _judged(clean[0], "boundaries_reached")
    if a is None:
        return "-"
    if "evicted" in a.message and not a.evaluated:
        return "not evaluated: the CPU tier evicted the probes"
    if "not evaluated" in a.message and not a.evaluated:
        return "not evaluated: vLLM reloads no block-aligned probe"
    return a.outcome + (f" ({a.message})" if a.evaluated and a.message else "")


def _same(it: Iteration, a: str, b: str) -> str:
    """Answers equal / answers compared of runs ``a`` and ``b`` of one pass, probe by probe at one split; "-"
    where the pass has no such run (it ended before it)."""
    if a not in it.runs or b not in it.runs:
        return "-"
    pairs = same_split_pairs(it.runs[a], it.runs[b])
    return f"{sum(x.text == y.text for x, y in pairs)}/{len(pairs)}"


def batch_table(rows: Sequence[RealRow]) -> str:
    """Why text cannot judge the KV at real size: per model's newest clean pass, how often the same prompt at
    the same split answers alike when only the batch changes, against the reload."""
    lines = [
        "| case | run (judge) | cold2 = cold (same schedule) | warm2 = warm (spread over 2 s) | "
        "decode = warm (8 at once) | reload = warm (same split) | differing reloads that loaded nothing |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        r = row.clean.report
        clean = r.clean()
        if not clean:
            continue
        it = clean[0]
        cells = [_same(it, "cold2", "cold"), _same(it, "warm2", "warm"), _same(it, "decode", "warm")]
        cells.append(_same(it, "reload", "warm"))
        if {"reload", "warm"} <= set(it.runs):
            pairs = same_split_pairs(it.runs["reload"], it.runs["warm"])
            unequal = [x for x, y in pairs if x.text != y.text]
            idle = sum(x.split is not None and not x.split.external for x in unequal)
            cells.append(f"{idle}/{len(unequal)}")
        else:
            cells.append("-")
        lines.append(f"| {r.case_id} | {row.clean.source()} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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


def budget_table(rows: Sequence[RealRow]) -> str:
    """The measured budget per model, from its newest clean pass and its case's newest catalogue (each named
    with its run and judge); the H100 column is an estimate (``budget.h100``)."""
    lines = [
        "| profile | run (judge) | connector CPU / frontend | startup s | "
        "output tok/s: 8 at most at once; whole load | phases s (first clean pass; catalogue) | "
        "CPU tier: entries held, stored, evicted | reload | H100 (ESTIMATE) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        r = row.clean.report
        startup = r.timings.get("server_startup_s")
        own = row.catalogue.report if row.catalogue is not None else None
        lines.append(
            f"| {r.profile} | {row.sources()} | {_case(r)} | "
            f"{'not measured' if startup is None else f'{startup:.0f}'} | {_decode(r)} | {_phases(r, own)} | "
            f"{_occupancy(r)} | {_reload(r)} | {budget.h100(r)} |"
        )
    return "\n".join(lines)


def _real(table: Callable[[Sequence[RealRow]], str]) -> Callable[[], str]:
    """A table of issue 27's real-size matrix, from the newest clean pass per model over the proof's runs."""

    def make() -> str:
        rows = newest_real([(run, *load(run, RESULTS)) for run in REAL_PROOF_RUNS])
        return table(rows) if rows else NO_REAL_RUN

    return make


def _calls(*runs: str) -> Callable[[], str]:
    """The runner calls of ``runs``, one table."""
    return lambda: proof_tables.calls_table([(run, load(run)[1]) for run in runs])


def _verdicts(*runs: str) -> Callable[[], str]:
    """Each run's verdict line, named by its run."""
    return lambda: "\n\n".join(f"`{run}`: {proof_tables.verdict_line(*load(run))}" for run in runs)


def _volume() -> str:
    return real_volume.volume_figure(newest_real([(run, *load(run)) for run in REAL_PROOF_RUNS]))


TABLES: dict[str, Callable[[], str]] = {
    "gpu-real-volume": _volume,
    "gpu-real-matrix": _real(real_table),
    "gpu-real-budget": _real(budget_table),
    "gpu-real-batch": _real(batch_table),
    "gpu-proof-h-calls": _calls(REAL_PROOF_H_RUN),
    "gpu-proof-h-verdicts": _verdicts(REAL_PROOF_H_RUN),
    "gpu-proof-g-calls": _calls(PROOF_G_RUN, REAL_PROOF_G_RUN),
    "gpu-proof-g-verdicts": _verdicts(PROOF_G_RUN, REAL_PROOF_G_RUN),
    "gpu-proof-g-clean": lambda: proof_tables.clean_table(load(PROOF_G_RUN)[0]),
    "gpu-proof-g-outcomes": lambda: proof_tables.outcomes_table(load(PROOF_G_RUN)[0]),
    "gpu-proof-g-catalogue": lambda: proof_tables.catalogue_table(load(PROOF_G_RUN)[0]),
    "gpu-proof-f-calls": _calls(REAL_PROOF_F_RUN),
    "gpu-proof-f-real-catalogue": lambda: proof_tables.catalogue_table(load(REAL_PROOF_F_RUN)[0]),
    "gpu-proof-e-calls": _calls(PROOF_E_RUN, REAL_PROOF_E_RUN),
    "gpu-proof-e-verdicts": _verdicts(PROOF_E_RUN, REAL_PROOF_E_RUN),
    "gpu-proof-e-catalogue": lambda: proof_tables.catalogue_table(load(PROOF_E_RUN)[0]),
    "gpu-proof-e-real-catalogue": lambda: proof_tables.catalogue_table(load(REAL_PROOF_E_RUN)[0]),
    "gpu-proof-d-verdicts": lambda: proof_tables.verdict_line(*load(PROOF_D_RUN)),
    "gpu-proof-d-clean": lambda: proof_tables.clean_table(load(PROOF_D_RUN)[0]),
    "gpu-proof-d-total": lambda: proof_tables.clean_total(load(PROOF_D_RUN)[0]),
    "gpu-proof-d-defects": lambda: defect_table(load(PROOF_D_RUN)[0]),
    "gpu-proof-d-calls": _calls(PROOF_D_RUN, REAL_PROOF_B_RUN),
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


def _served_clean() -> dict[str, OffloadCheckReport]:
    """vLLM 0.26.0's clean matrix, from issue 33's runs under the proof: the whole tiny matrix
    (``PROOF_D_RUN``), then the `all`-mode families' cases under ``Proof.before_step`` (``PROOF_G_RUN``)."""
    out: dict[str, OffloadCheckReport] = {}
    for run in (PROOF_D_RUN, PROOF_G_RUN):  # oldest first: a newer report of a case replaces an older one
        out.update({r.case_id: r for r in load(run)[0]})
    return out


HISTORY_TABLES: dict[str, Callable[[], str]] = {
    "history-grade": lambda: grade.grade_table(grade.history_runs(RESULTS), grade.control_reports(RESULTS)),
    "history-standing": lambda: grade.standing_summary(
        grade.history_runs(RESULTS), grade.control_reports(RESULTS)
    ),
    "history-runs": lambda: grade.runs_table(grade.history_runs(RESULTS)),
    "history-clean": lambda: grade.clean_table(
        grade.history_runs(RESULTS), {"0.26.0": _served_clean()}, grade.control_reports(RESULTS)
    ),
    "history-hunts": lambda: grade.hunt_table(grade.history_runs(RESULTS)),
    "history-plan": lambda: _history_plan(),
    "history-fault-0.20.2-gemma4": lambda: grade.control_table(
        "tiny-gemma4-offloading-python",
        [
            RESULTS / "history-0.20.2-2026-12-04",
            *sorted(p for p in (RESULTS / "fault-0.20.2-gemma4-2026-12-04").iterdir() if p.is_dir()),
        ],
    ),
}


def _history_plan() -> str:
    common = {
        "report_dir": Path("out/history/reports"),
        "costs": expected_costs(RESULTS),
        "measured": measured_check_s(RESULTS),
    }
    lean = history_plan.history_plans(frontends=("python",), **common)
    return history_plan.plan_table(history_plan.history_plans(**common), lean)


def fill_figures(text: str, figures: Mapping[str, Callable[[], str]]) -> str:
    """``text`` with every marked figure made again by its function; a marker naming none is an error."""

    def fill(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in figures:
            raise KeyError(f"no table named {name!r} (known: {sorted(figures)})")
        return f"{m.group(1)}{figures[name]()}\n{m.group(4)}"

    opened, formed = text.count("<!-- figure:"), len(_MARK.findall(text))
    if opened != formed:
        raise ValueError(
            f"{opened} figure markers, {formed} well formed: each is "
            "'<!-- figure:NAME -->' on its own line, closed by '<!-- /figure -->'"
        )
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
