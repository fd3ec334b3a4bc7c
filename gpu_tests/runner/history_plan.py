"""Issue 35's device plan: per vLLM release, the clean matrix cases it can serve, the cases of every bug
(``gpu_tests/history/bugs.py``) whose buggy or fixed release it is and of every bug hunted there (``HUNTS``);
what it cannot run, with the reason.

    python -m gpu_tests.runner.run_matrix --history --dry-run          # every release
    python -m gpu_tests.runner.run_matrix --vllm-version 0.20.2 --dry-run --no-mutations

Each release needs its own payload (``VLLM_VERSION=X gpu_tests/runner/build_payload.sh``), so each release is
its own run folder (``gpu_tests/results/history-X-DATE``) and its own device calls. A case is listed as not
runnable when the release lacks what it needs (``offload_check/releases.py``) or when the check at this
commit has no option a scenario needs (a step the check does not offer yet).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from gpu_tests.history.bugs import BUGS, HUNTS, Bug, Hunt, Scenario
from gpu_tests.offload_check import releases
from gpu_tests.offload_check.profiles import ALIGN_FAMILIES, PROFILES, CheckCase, connector_by_name
from gpu_tests.offload_check.tiny import TINY_FAMILIES

from .jobs import FALLBACK_RUN_S, FALLBACK_STARTUP_S, Cost, Job, case_args, make_case_id, makespan, plan

__all__ = [
    "CALL_S",
    "HISTORY_RELEASES",
    "ReleasePlan",
    "build_command",
    "clean_families",
    "describe",
    "history_plans",
    "hunts_of",
    "missing_option",
    "release_plan",
    "scenario_jobs",
    "split_by_release",
]

# The releases issue 35 serves, and a device call's usable seconds (the tool's 600 s less a margin).
HISTORY_RELEASES: tuple[str, ...] = tuple(r.version for r in releases.RELEASES)
CALL_S = 540.0
# Assumed for a case with many requests in flight that no committed run measured (``jobs.measured_check_s``
# measures the others): requests in flight together finish this many times faster than one at a time.
BATCH_GAIN = 8.0


@dataclass(frozen=True)
class ReleasePlan:
    version: str
    jobs: list[Job]
    skipped: list[tuple[str, str]]  # (case id, why it cannot run)
    calls: int
    makespan_s: float

    @property
    def build(self) -> str:
        return build_command(self.version)


def build_command(version: str) -> str:
    return f"VLLM_VERSION={version} gpu_tests/runner/build_payload.sh out/payload-{version}"


def clean_families() -> list[str]:
    """The clean matrix of a history release: the default tiny families and the Mamba align variants."""
    return [f for f, fam in TINY_FAMILIES.items() if fam.default] + [f"{f}-align" for f in ALIGN_FAMILIES]


def _arg(args: Sequence[str], flag: str, default: str = "") -> str:
    items = list(args)
    return items[items.index(flag) + 1] if flag in items else default


def _case(job: Job) -> CheckCase:
    profile = PROFILES[_arg(job.args, "--profile")]
    connector = connector_by_name(_arg(job.args, "--connector"))
    return CheckCase(
        profile, connector, _arg(job.args, "--frontend", "python"), label=_arg(job.args, "--label")
    )  # type: ignore[arg-type]


def _check_options() -> dict[str, bool]:
    """The check's options, each with whether it takes a value."""
    from gpu_tests.offload_check.cli import command

    return {o: not getattr(p, "is_flag", False) for p in command().params for o in getattr(p, "opts", [])}


def missing_option(args: Sequence[str], options: dict[str, bool] | None = None) -> str | None:
    """The first ``--option`` of ``args`` the check's command line does not have (None: all exist)."""
    known = _check_options() if options is None else options
    items = iter(args)
    for a in items:
        if a.startswith("--"):
            if a not in known:
                return a
            if known[a]:
                next(items, None)  # its value, which may itself start with --
    return None


def split_by_release(jobs: Sequence[Job], version: str) -> tuple[list[Job], list[tuple[str, str]]]:
    """``jobs`` that vLLM ``version`` can serve (each told the release, ``--vllm-release``), and the others
    with the reason."""
    kept: list[Job] = []
    skipped: list[tuple[str, str]] = []
    options = _check_options()
    for job in jobs:
        reason = releases.skip_reason(_case(job), version)
        missing = missing_option(job.args, options)
        if reason is None and missing is not None:
            reason = f"the check at this commit has no {missing} option (the scenario's step)"
        if reason is not None:
            skipped.append((job.case_id, reason))
        else:
            kept.append(replace(job, args=(*job.args, "--vllm-release", version)))
    return kept, skipped


def scenario_jobs(
    scenario: Scenario,
    *,
    report_dir: Path,
    costs: dict[str, Cost],
    gsm8k_dir: str | None = None,
    server_args: str = "",
    timeout_margin: float = 2.0,
    measured: Mapping[str, float] | None = None,
) -> list[Job]:
    """The scenario's cases: each profile at each concurrency (questions raised to the concurrency). A case
    ``measured`` (check seconds by case id, ``jobs.measured_check_s``) is expected to take its family's cold
    startup and that; the others are scaled from the family's concurrency-1 runs."""
    out = []
    for name in scenario.profiles:
        profile = PROFILES[name]
        cost = costs.get(profile.family) or Cost(FALLBACK_STARTUP_S, FALLBACK_RUN_S, "fallback")
        for concurrency in scenario.concurrencies:
            label = scenario.case_label(concurrency)
            questions = scenario.num_questions
            if questions is None and concurrency > profile.num_questions:
                questions = concurrency
            args = case_args(
                name,
                scenario.connector,
                "python",
                report_dir=report_dir,
                gsm8k_dir=gsm8k_dir,
                server_args=server_args,
                iterations=scenario.iterations,
                label=label,
                num_questions=questions,
                concurrency=concurrency,
            )
            case_id = make_case_id(name, scenario.connector, "python", label)
            if measured and case_id in measured:
                expected = cost.cold_s + measured[case_id]
            else:
                # A run's time grows with its questions and shrinks with the requests in flight (BATCH_GAIN).
                scale = (questions or profile.num_questions) / profile.num_questions
                scale = max(1.0, scale / (BATCH_GAIN if concurrency != 1 else 1.0))
                expected = cost.cold_s + (cost.case_s(scenario.iterations) - cost.cold_s) * scale
            family = name.removeprefix("tiny-")
            out.append(
                Job(
                    case_id,
                    family,
                    "history",
                    (*args, *scenario.check_args),
                    expected * timeout_margin,
                    expected,
                    compile_s=cost.compile_s,
                )
            )
    return out


def _calls(jobs: Sequence[Job], parallel: int, setup_s: float) -> tuple[int, float]:
    """Device calls for ``jobs`` on ``parallel`` slots (the first call pays ``setup_s``), and the makespan."""
    span = makespan(sorted(jobs, key=lambda j: -j.expected_s), parallel)
    return max(1, math.ceil((span + setup_s) / CALL_S)), span


def bugs_of(version: str) -> list[Bug]:
    return [b for b in BUGS if version in (b.buggy, b.fixed)]


def hunts_of(version: str) -> list[Hunt]:
    return [h for h in HUNTS if h.release == version]


def release_plan(
    version: str,
    *,
    report_dir: Path,
    costs: dict[str, Cost],
    gsm8k_dir: str | None = None,
    server_args: str = "",
    parallel: int = 15,
    setup_s: float = 180.0,
    frontends: Sequence[str] = ("python", "rust"),
    measured: Mapping[str, float] | None = None,
) -> ReleasePlan:
    """The clean matrix on ``frontends`` (one pass a case, no catalogue: its defects do not all install on
    older releases) and the cases of the bugs graded on ``version``; a scenario case that is a clean case
    replaces it."""
    common = {"report_dir": report_dir, "gsm8k_dir": gsm8k_dir, "server_args": server_args}
    clean = plan(clean_families(), iterations=1, mutations=False, costs=costs, **common)
    jobs = {j.case_id: j for j in clean if _arg(j.args, "--frontend") in frontends}
    for scenario in [b.scenario for b in bugs_of(version)] + [h.scenario for h in hunts_of(version)]:
        for job in scenario_jobs(scenario, costs=costs, measured=measured, **common):  # type: ignore[arg-type]
            jobs[job.case_id] = job
    kept, skipped = split_by_release(sorted(jobs.values(), key=lambda j: -j.expected_s), version)
    calls, span = _calls(kept, parallel, setup_s)
    return ReleasePlan(version, kept, skipped, calls, span)


def history_plans(versions: Sequence[str] = HISTORY_RELEASES, **kwargs: object) -> list[ReleasePlan]:
    return [release_plan(v, **kwargs) for v in versions]  # type: ignore[arg-type]


def describe(plans: Sequence[ReleasePlan], *, verbose: bool = True) -> list[str]:
    """The plan as text: per release its build command, calls, graded bugs, cases and what it cannot run."""
    lines = []
    for p in plans:
        bugs = ", ".join(b.id for b in bugs_of(p.version)) or "none (clean matrix only)"
        hunted = ", ".join(h.id for h in hunts_of(p.version))
        hunts = f"; hunted here: {hunted}" if hunted else ""
        lines += [
            f"vLLM {p.version}: {len(p.jobs)} cases, simulated {p.makespan_s:.0f} s, "
            f"about {p.calls} device call(s); bugs graded here: {bugs}{hunts}",
            f"  build: {p.build}",
        ]
        if verbose:
            lines += [
                f"  run   {j.case_id} (expected {j.expected_s:.0f} s"
                + (
                    ", longer than one call: its family's kernels must be compiled by an earlier call)"
                    if j.expected_s > CALL_S
                    else ")"
                )
                for j in p.jobs
            ]
        lines += [f"  skip  {case_id}: {why}" for case_id, why in p.skipped]
    total = sum(p.calls for p in plans)
    lines.append(f"total: {sum(len(p.jobs) for p in plans)} cases, about {total} device calls")
    return lines


def plan_table(plans: Sequence[ReleasePlan], lean: Sequence[ReleasePlan] = ()) -> str:
    """The plan as a README table: per release its payload, cases, calls, and what it cannot serve (why);
    ``lean``: the same plan another way (its totals only, as a last row)."""
    rows = [
        "| vLLM release | payload | cases | simulated s | device calls | bugs graded | not servable (why) |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in plans:
        reasons: dict[str, int] = {}
        for _, why in p.skipped:
            reasons[why] = reasons.get(why, 0) + 1
        skipped = "<br>".join(f"{n} x {why}" for why, n in sorted(reasons.items())) or "-"
        bugs = ", ".join(b.id for b in bugs_of(p.version)) or "- (clean matrix)"
        rows.append(
            f"| {p.version} | `{p.build}` | {len(p.jobs)} | {p.makespan_s:.0f} | {p.calls} | {bugs} "
            f"| {skipped} |"
        )
    rows.append(
        f"| all | | {sum(len(p.jobs) for p in plans)} | {sum(p.makespan_s for p in plans):.0f} "
        f"| {sum(p.calls for p in plans)} | | |"
    )
    if lean:
        rows.append(
            f"| all, clean matrix on the python frontend only (`--history-frontends python`) | "
            f"| {sum(len(p.jobs) for p in lean)} | {sum(p.makespan_s for p in lean):.0f} "
            f"| {sum(p.calls for p in lean)} | | |"
        )
    return "\n".join(rows)
