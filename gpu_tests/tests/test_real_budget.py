"""The real-size budget on the CPU: what the check records of the CPU tier (stores, evictions, occupancy), and
the README's real-size tables made from reports the real check wrote against the fake engine
(tests/offload_fake.py), with a CPU tier of a given capacity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpu_tests.offload_check.case import measure_and_judge
from gpu_tests.offload_check.profiles import PROFILES
from gpu_tests.offload_check.report import Answer, Iteration, OffloadCheckReport, ResetResult, Run
from gpu_tests.offload_check.settings import CheckSettings
from gpu_tests.runner import budget, real_plan, tables

from .offload_fake import FakeServer
from .test_offload_check import FULL, _probes

NEMOTRON = "nemotron-h-8b-real"


def _report(*, capacity: int | None = None, events: bool = True, case: str = "a") -> OffloadCheckReport:
    server = FakeServer(layout=FULL, cpu_events=events, cpu_capacity=capacity)
    report = measure_and_judge(server, CheckSettings(iterations=1), list(_probes()), FULL)
    return report.model_copy(
        update={
            "case_id": f"{NEMOTRON}-{case}",
            "profile": NEMOTRON,
            "connector": "OffloadingConnector",
            "frontend": "python",
            "cpu_gib": 1.0,
            "gpus_used": 1,
            "timings": {**report.timings, "server_startup_s": 42.0},
        }
    )


def _rows(*reports: OffloadCheckReport) -> list[tables.RealRow]:
    """The real-size tables' rows from a run ``t`` holding ``reports`` (no run.json: their own verdicts)."""
    return tables.newest_real([("t", reports, {})])


def test_a_tier_with_room_holds_every_store_and_the_reload_is_whole() -> None:
    report = _report()
    tier = report.clean()[0].cpu_tier
    assert tier is not None and tier.stored > 0
    assert (tier.evicted, tier.live, tier.held_at_cold) == (0, tier.stored, 0)
    reload = budget.reload(report)
    assert reload is not None and reload.whole == reload.prompts and reload.loaded_tokens > 0


def test_a_small_tier_evicts_and_the_reload_is_partial() -> None:
    report = _report(capacity=10)
    tier = report.clean()[0].cpu_tier
    assert tier is not None and tier.evicted == tier.stored - 10 > 0 and tier.live == 10
    assert tier.held_at_cold == 0  # the full reset's removes were seen before the cold run
    reload = budget.reload(report)
    assert reload is not None and reload.whole < reload.prompts
    assert reload.cached_tokens < reload.warm_cached_tokens
    occupancy = budget.occupancy(report)
    assert occupancy is not None and occupancy.gib == pytest.approx(10 * 64 / (1 << 30))


def test_without_cpu_tier_events_nothing_is_read_as_an_empty_tier() -> None:
    report = _report(events=False)
    assert report.clean()[0].cpu_tier is None
    assert budget.occupancy(report) is None
    assert "not measured (no CPU-tier events)" in tables.budget_table(_rows(report))


def test_the_decode_rate_is_read_from_the_clean_passes_decode_runs_of_at_most_eight_at_once() -> None:
    def run(label: str, n: int, seconds: float) -> Run:
        answers = [Answer(probe=f"p{i}", text="t", output_tokens=100) for i in range(n)]
        return Run(label=label, concurrency=None, latency_s=seconds, answers=answers)

    # A mutation iteration's short runs (32 tokens, mostly prefill) are not a decode rate.
    small = Iteration(label="m", mutation="zero_fill", runs={"cold": run("cold", 8, 4.0)})
    report = _report().model_copy(update={"concurrency": None})
    report = report.model_copy(update={"iterations": [*report.iterations, small]})
    assert budget.decode(report) is None
    clean = report.iterations[0]
    timed = clean.model_copy(update={"runs": {**clean.runs, "decode": run("decode", 8, 3.2)}})
    report = report.model_copy(update={"iterations": [timed, small]})
    rate = budget.decode(report)
    assert rate == budget.Decode(tokens_per_s=250.0, in_flight=8, runs=1)
    assert "250 (8 at once, 1 run); " in tables.budget_table(_rows(report))
    whole = budget.at_once(report)
    cold = report.clean()[0].runs["cold"]
    assert whole is not None and whole.in_flight == len(cold.answers) > 8
    assert whole.tokens_per_s == pytest.approx(sum(a.output_tokens for a in cold.answers) / cold.latency_s)
    low, high = 250.0 / 1.4, 250.0 / 1.2
    assert f"ESTIMATE: decode {low:.0f}-{high:.0f} tok/s" in budget.h100(report)


def test_the_budget_table_has_a_row_per_model_with_every_figure() -> None:
    qwen = _report(case="b").model_copy(update={"profile": "qwen3.5-35b-real-tp1"})
    rows = tables.budget_table(_rows(qwen, _report(capacity=10, case="a"))).splitlines()
    assert len(rows) == 4
    assert rows[2].startswith(f"| {NEMOTRON} | `t` (unknown) | Offloading 1 GiB / python | 42 |")
    assert "partial:" in rows[2] and "evicted" in rows[2] and "whole: " in rows[3]
    assert "cold " in rows[2] and "reload " in rows[2] and "catalogue" not in rows[2]
    timed = _report().model_copy(
        update={"timings": {"mutation_zero_fill_s": 30.0, "mutation_off_by_one_s": 12.5}}
    )
    assert " / catalogue 42 (2 mutations) |" in tables.budget_table(_rows(timed))
    weights = real_plan.ESTIMATES["nemotron-h-8b"].weights_gib
    assert f"KV room {budget.H100_GIB - weights - real_plan.OVERHEAD_GIB:.0f} GiB at TP1" in rows[2]


def test_every_real_size_profile_has_the_weights_the_h100_estimate_needs() -> None:
    real = [p for p in PROFILES.values() if p.real_size_of]
    assert real and all(p.real_size_of in real_plan.ESTIMATES for p in real)


def test_the_readme_says_no_real_run_until_one_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "<!-- figure:gpu-real-budget -->\nold\n<!-- /figure -->\n"
    figures = {k: v for k, v in tables.TABLES.items() if k.startswith("gpu-real")}
    folder = tmp_path / "real-size-test"
    folder.mkdir()
    (folder / "run.json").write_text(json.dumps({"name": folder.name, "calls": []}))
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    monkeypatch.setattr(tables, "REAL_PROOF_RUNS", (folder.name,))
    empty = f"<!-- figure:gpu-real-budget -->\n{tables.NO_REAL_RUN}\n<!-- /figure -->\n"
    assert tables.fill_figures(text, figures) == empty
    report = _report(capacity=10)
    (folder / f"{report.case_id}.json").write_text(report.model_dump_json())
    out = tables.fill_figures(text + "<!-- figure:gpu-real-matrix -->\n<!-- /figure -->\n", figures)
    row = f"| {NEMOTRON} (1) | `{folder.name}` (unknown) | Offloading 1 GiB / python |"
    assert tables.NO_REAL_RUN not in out and row in out
    assert "partial:" in out


class _LateResetEvents(FakeServer):
    """A CPU tier whose reset removes reach the subscriber only after the next cold run has started."""

    def reset_prefix_cache(self, reset_external: bool) -> ResetResult:
        events, self.cpu_events = self.cpu_events, False
        try:
            return super().reset_prefix_cache(reset_external)
        finally:
            self.cpu_events = events


def test_entries_a_reset_left_unannounced_are_said_not_read_as_evictions() -> None:
    server = _LateResetEvents(layout=FULL, cpu_events=True)
    report = measure_and_judge(server, CheckSettings(iterations=2), list(_probes()), FULL)
    first, second = (it.cpu_tier for it in report.clean())
    assert first is not None and second is not None
    assert first.held_at_cold == 0 and second.held_at_cold == first.live > 0
    report = report.model_copy(update={"iterations": report.iterations[1:], "profile": NEMOTRON})
    assert f"({first.live} still held at the cold run's start)" in tables.budget_table(_rows(report))


def test_a_catalogue_run_as_its_own_case_is_counted_on_its_models_row() -> None:
    from gpu_tests.kv_proof.instruments import INSTRUMENTS
    from gpu_tests.offload_check.check import MutationPlan
    from gpu_tests.offload_check.probe_files import MutationOrder

    from .test_offload_check import EXPECT

    order = MutationOrder(name="load_wrong_cpu_block", group=0, token=1)
    plan = MutationPlan(order, tuple(_probes()[:4]))
    settings = CheckSettings(reference_digests=True, mutation_expectations=EXPECT, iterations=0)
    catalogue = measure_and_judge(FakeServer(layout=FULL), settings, list(_probes()), FULL, mutations=[plan])
    assert [it.mutation for it in catalogue.iterations] == ["load_wrong_cpu_block"] and INSTRUMENTS.mutations
    clean = _report()
    own = catalogue.model_copy(
        update={
            "case_id": f"{clean.case_id}-mutations",
            "profile": NEMOTRON,
            "timings": {"mutation_load_wrong_cpu_block_s": 9.0},
        }
    )
    rows = tables.real_table(_rows(clean, own)).splitlines()
    assert len(rows) == 3 and "| 1/1 (`t`, unknown) |" in rows[2]  # one row: the catalogue joins its model's
    assert "catalogue 9 (1 mutations)" in tables.budget_table(_rows(clean, own))


def test_each_model_shows_its_newest_clean_pass_over_the_runs_with_that_runs_verdict_and_judge() -> None:
    """Issue 27's real-size tables take, per model, the newest clean pass over the proof's runs (newest run
    first), whatever its verdict: a newer error stands over an older pass, named with its own run, judge and
    ``run.json`` verdict; the catalogue beside it is its case's newest, from its own run."""
    older = _report().model_copy(update={"status": "passed", "judge_commit": "1a0c83b" + "0" * 33})
    died = older.model_copy(update={"status": "error", "passed": False, "judge_commit": "efe88c1" + "0" * 33})
    qwen = older.model_copy(update={"case_id": "qwen-a", "profile": "qwen3.5-35b-real-tp1"})
    catalogue = older.model_copy(update={"case_id": f"{older.case_id}-mutations", "iterations": []})
    newer_catalogue = catalogue.model_copy(update={"timings": {"mutation_x_s": 7.0}})
    runs: list[tables.Run] = [
        ("new", [died], {"verdicts": {died.case_id: "error"}}),
        ("mid", [newer_catalogue], {"verdicts": {catalogue.case_id: "passed"}}),
        (
            "old",
            [older, qwen, catalogue],
            {"verdicts": {older.case_id: "passed", qwen.case_id: "not_proven"}},
        ),
    ]
    rows = tables.newest_real(runs)
    assert [(row.clean.run, row.clean.report.profile) for row in rows] == [
        ("new", NEMOTRON),
        ("old", "qwen3.5-35b-real-tp1"),
    ]
    assert rows[0].clean.report is died and rows[0].catalogue is not None and rows[0].catalogue.run == "mid"
    matrix = tables.real_table(rows).splitlines()
    assert matrix[2].startswith(f"| {NEMOTRON} (1) | `new` (efe88c1) | Offloading 1 GiB / python | error |")
    # The verdict is the one its run's run.json records (here set apart from the report's own to show it).
    assert matrix[3].startswith(
        "| qwen3.5-35b-real-tp1 (1) | `old` (1a0c83b) | Offloading 1 GiB / python | not_proven |"
    )
    budget_rows = tables.budget_table(rows).splitlines()
    assert "| `new` (efe88c1); catalogue `mid` (1a0c83b) |" in budget_rows[2]
    assert "catalogue 7 (1 mutations)" in budget_rows[2]
    # Read oldest first, the older pass would stand over the newer error: the order is what decides.
    assert tables.newest_real(runs[::-1])[0].clean.report is older


def test_a_figure_marker_the_tables_cannot_read_is_an_error() -> None:
    """A marker whose name the pattern reads (dots too) is filled; a malformed one is refused, not skipped."""
    figures = {"a-0.2": lambda: "table"}
    assert tables.fill_figures("<!-- figure:a-0.2 -->\n<!-- /figure -->\n", figures) == (
        "<!-- figure:a-0.2 -->\ntable\n<!-- /figure -->\n"
    )
    with pytest.raises(ValueError, match="1 well formed"):
        tables.fill_figures("<!-- figure:a-0.2 -->\n<!-- /figure -->\n<!-- figure:a b -->\n", figures)
