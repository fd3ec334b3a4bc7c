"""The runner's plan stage: the cases as :class:`Job` values (each one ``python -m gpu_tests.offload_check``
command line), their expected costs from the committed reports, and the deal over device calls.

``real_plan`` plans the real-size models with the same jobs; ``launch`` runs them; ``run_matrix`` is the
command line.
"""

from __future__ import annotations

import json
import lzma
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpu_tests.offload_check.profiles import PROFILES, CheckCase, connector_by_name

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS = REPO_ROOT / "gpu_tests" / "results"
INSTRUMENTS = "gpu_tests.kv_proof.instruments:INSTRUMENTS"
DUMMY_ARGS = ("--load-format", "dummy")
# Without a committed report for a family: the slowest measured startup and run, so it is planned early.
FALLBACK_STARTUP_S, FALLBACK_RUN_S = 240.0, 30.0
# Runs of a clean iteration (cold, warm, reload), of the first one's second cold and fingerprint runs, of a
# later one's references (a second cold run and fingerprints of the probes that need them), and the share of
# the probes a mutation iteration sends.
RUNS_PER_ITERATION, FIRST_ITERATION_EXTRA, LATER_ITERATION_EXTRA, MUTATION_SHARE = 3, 2, 0.5, 0.3


@dataclass(frozen=True)
class Job:
    """One case to run: the offload check's command-line arguments and what the runner needs to know."""

    case_id: str
    family: str
    kind: str  # matrix | mutations
    args: tuple[str, ...]
    timeout_s: float
    expected_s: float = 150.0
    dummy: bool = False
    gpus: int = 1
    mem_gib: float = 0.0  # GPU memory the case reserves (real size); 0: not counted
    # of expected_s, the family's kernels compiling (a cold startup less a warm one): what a machine whose
    # compile cache already holds them saves (:func:`warm`)
    compile_s: float = 0.0

    def with_dummy(self) -> Job:
        return replace(self, dummy=True, args=(*self.args, "--server-arg", " ".join(DUMMY_ARGS)))


@dataclass(frozen=True)
class Cost:
    """What a family's case costs on the H200 under load, from its committed reports."""

    startup_s: float  # the median: a server whose kernels are already in the machine's compile cache
    run_s: float  # one run of the whole probe set
    source: str
    cold_startup_s: float | None = (
        None  # the slowest: the family's first server, compiling (default: the same)
    )
    mutation_s: float | None = None  # one catalogue iteration, measured (default: from run_s)
    # the fastest: a server that found its family's kernels compiled (most runs start on a fresh machine,
    # so the median is mostly cold; default: the median)
    warm_startup_s: float | None = None

    @property
    def cold_s(self) -> float:
        return self.startup_s if self.cold_startup_s is None else self.cold_startup_s

    @property
    def compile_s(self) -> float:
        """What a cold startup costs beyond a warm one: the family's kernels compiling."""
        fastest = self.startup_s if self.warm_startup_s is None else self.warm_startup_s
        return max(0.0, self.cold_s - fastest)

    def case_s(self, iterations: int, mutations: int = 0) -> float:
        """A case's seconds, its server starting cold (no kernel of its family compiled yet)."""
        runs = iterations * RUNS_PER_ITERATION
        if iterations:
            runs += FIRST_ITERATION_EXTRA + (iterations - 1) * LATER_ITERATION_EXTRA
        if self.mutation_s is not None:
            return self.cold_s + self.run_s * runs + 4.0 * iterations + self.mutation_s * mutations
        runs += mutations * (RUNS_PER_ITERATION + 1) * MUTATION_SHARE
        return self.cold_s + self.run_s * runs + 4.0 * (iterations + mutations)


def _report_runs(report: dict[str, Any]) -> list[float]:
    """Per-run seconds of a report: format 2 keeps its runs; format 1 timed cold/warm/reload/cold2."""
    if report.get("format") == 2:
        return [
            run["latency_s"]
            for it in report.get("iterations", [])
            if it.get("mutation") is None
            for label, run in it.get("runs", {}).items()
            if label in ("cold", "warm", "reload") or (label == "cold2" and it["label"] == "clean-1")
        ]
    t = report.get("timings") or {}
    return [t[k] for k in ("cold_run_s", "warm_run_s", "reload_run_s", "cold2_run_s") if k in t]


def committed_reports(results: Path, stem: str = "tiny-*") -> Iterator[dict[str, Any]]:
    """The committed reports under ``results`` whose file name matches ``stem`` (plain JSON, or xz since the
    kv-proof runs), raw, in path order."""
    for path in sorted([*results.rglob(f"{stem}.json"), *results.rglob(f"{stem}.json.xz")]):
        data = path.read_bytes()
        yield json.loads(lzma.decompress(data) if path.name.endswith(".xz") else data)


def expected_costs(results: Path = RESULTS, probe_scale: float = 1.25) -> dict[str, Cost]:
    """Median startup and run time per family from every committed report (format 1 runs, which had no
    boundary probes, scaled by ``probe_scale``)."""
    startups: dict[str, list[float]] = {}
    runs: dict[str, list[float]] = {}
    catalogue: dict[str, list[float]] = {}
    for report in committed_reports(results):
        family = report.get("family")
        timings = report.get("timings") or {}
        if not family or report.get("profile", "") != f"tiny-{family}" or "server_startup_s" not in timings:
            continue
        # A study case (200 questions, concurrency 8) is another workload, and so is one with every request
        # in flight (concurrency None): measured_check_s counts those.
        if report.get("concurrency", 1) != 1 or report.get("num_questions") != 16:
            continue
        if report.get("status") != "error":
            startups.setdefault(family, []).append(float(timings["server_startup_s"]))
        scale = 1.0 if report.get("format") == 2 else probe_scale
        runs.setdefault(family, []).extend(r * scale for r in _report_runs(report))
        # A catalogue iteration's wall time, its store waits and barriers included.
        catalogue.setdefault(family, []).extend(
            float(v) for k, v in timings.items() if k.startswith("mutation_") and k.endswith("_s")
        )
    out = {}
    for family in set(startups) | set(runs):
        s, r, m = startups.get(family), runs.get(family), catalogue.get(family)
        out[family] = Cost(
            startup_s=statistics.median(s) if s else FALLBACK_STARTUP_S,
            run_s=statistics.median(r) if r else FALLBACK_RUN_S,
            source=f"{len(s or [])} startups, {len(r or [])} runs, {len(m or [])} catalogue iterations",
            cold_startup_s=max(s) if s else None,
            mutation_s=statistics.median(m) if m else None,
            warm_startup_s=min(s) if s else None,
        )
    return out


def measured_check_s(results: Path = RESULTS) -> dict[str, float]:
    """Per case id with many requests in flight (a concurrency other than 1), the median of its committed
    reports' check seconds (its iterations, server start excluded) where the check ran to its end: what such a
    case costs, measured, in place of a gain assumed from concurrency-1 runs. A case id names no release, so
    one release's run stands for another's."""
    found: dict[str, list[float]] = {}
    for report in committed_reports(results):
        check_s = (report.get("timings") or {}).get("check_s")
        if report.get("concurrency", 1) == 1 or check_s is None:  # None: every request at once
            continue
        if report.get("status") == "error" or report.get("engine_fault"):
            continue  # cut short: its time is not the case's
        found.setdefault(report["case_id"], []).append(float(check_s))
    return {case_id: statistics.median(v) for case_id, v in found.items()}


def case_args(
    profile: str,
    connector: str,
    frontend: str,
    *,
    report_dir: Path,
    gsm8k_dir: str | None,
    server_args: str,
    iterations: int,
    label: str = "",
    mutations: str = "",
    num_questions: int | None = None,
    concurrency: int = 1,
    reset_under_load: int = 0,
) -> tuple[str, ...]:
    args = ["--profile", profile, "--connector", connector, "--frontend", frontend]
    args += [
        "--report-dir",
        str(report_dir),
        "--concurrency",
        str(concurrency),
        "--iterations",
        str(iterations),
    ]
    args += ["--instruments", INSTRUMENTS]
    if gsm8k_dir:
        args += ["--gsm8k-dir", gsm8k_dir]
    if server_args:
        args += ["--server-arg", server_args]
    if label:
        args += ["--label", label]
    if mutations:
        args += ["--mutations", mutations]
    if num_questions is not None:
        args += ["--num-questions", str(num_questions)]
    if reset_under_load:
        args += ["--reset-under-load", str(reset_under_load)]
    return tuple(args)


def make_case_id(profile: str, connector: str, frontend: str, label: str = "") -> str:
    """The id the check gives the case (and its report file)."""
    return CheckCase(PROFILES[profile], connector_by_name(connector), frontend, label=label).id  # type: ignore[arg-type]


def _family_jobs(
    fam: str,
    cost: Cost,
    *,
    common: dict[str, Any],
    iterations: int,
    mutations: bool,
    num_questions: int | None,
    timeout_margin: float,
    catalogue_iterations: int,
) -> list[Job]:
    """One family's cases (:func:`plan`): every connector x frontend, then per connector its catalogue."""
    from gpu_tests.kv_proof.catalogue import MUTATIONS

    profile = f"tiny-{fam}"
    gpus = PROFILES[profile].gpus

    def job(case_id: str, kind: str, args: tuple[str, ...], expected: float) -> Job:
        return Job(
            case_id, fam, kind, args, expected * timeout_margin, expected, gpus=gpus, compile_s=cost.compile_s
        )

    jobs = [
        job(
            make_case_id(profile, connector, frontend),
            "matrix",
            case_args(
                profile, connector, frontend, iterations=iterations, num_questions=num_questions, **common
            ),
            cost.case_s(iterations),
        )
        for connector in ("offloading", "simple")
        for frontend in ("python", "rust")
    ]
    for connector in ("offloading", "simple") if mutations else ():
        args = case_args(
            profile,
            connector,
            "python",
            iterations=catalogue_iterations,
            label="mutations",
            mutations="all",
            num_questions=num_questions,
            **common,
        )
        count = sum(m.acts_in(connector_by_name(connector)) for m in MUTATIONS.values())
        case_id = make_case_id(profile, connector, "python", "mutations")
        jobs.append(job(case_id, "mutations", args, cost.case_s(catalogue_iterations, count)))
    return jobs


def plan(
    families: Sequence[str],
    *,
    report_dir: Path,
    gsm8k_dir: str | None = None,
    server_args: str = "",
    iterations: int = 3,
    mutations: bool = True,
    num_questions: int | None = None,
    costs: dict[str, Cost] | None = None,
    timeout_margin: float = 2.0,
    catalogue_iterations: int = 0,
) -> list[Job]:
    """Every family x connector x frontend with ``iterations`` clean passes, and per family and connector one
    case running that connector's defect catalogue (each defect its own cold, warm and reload); the most
    expensive first. ``catalogue_iterations`` clean passes run in each catalogue case first (its server proven
    clean before it is broken). A
    family is a tiny profile's name without ``tiny-`` (``llama``, or a stand-in such as
    ``deepseek-v2-tp2-ep``)."""
    unknown = [f for f in families if f"tiny-{f}" not in PROFILES]
    if unknown:
        known = sorted(n.removeprefix("tiny-") for n, p in PROFILES.items() if p.tiny)
        raise SystemExit(f"unknown families {unknown}; known: {known}")
    costs = expected_costs() if costs is None else costs
    common = {"report_dir": report_dir, "gsm8k_dir": gsm8k_dir, "server_args": server_args}
    jobs: list[Job] = []
    for fam in families:
        cost = costs.get(PROFILES[f"tiny-{fam}"].family) or Cost(
            FALLBACK_STARTUP_S, FALLBACK_RUN_S, "fallback"
        )
        jobs += _family_jobs(
            fam,
            cost,
            common=common,
            iterations=iterations,
            mutations=mutations,
            num_questions=num_questions,
            timeout_margin=timeout_margin,
            catalogue_iterations=catalogue_iterations,
        )
    return sorted(jobs, key=lambda j: -j.expected_s)


COMPILED = "devclient-compiled-families"  # a file in vLLM's cache root: one job family a line


def compiled_families(cache_root: Path) -> set[str]:
    """The job families whose server started and ran on this machine with ``cache_root`` as vLLM's cache
    (``VLLM_CACHE_ROOT``): their kernels are in its compile cache, so the next start is warm."""
    path = cache_root / COMPILED
    return set(path.read_text().split()) if path.exists() else set()


def mark_compiled(cache_root: Path, families: Iterable[str]) -> None:
    new = set(families) - compiled_families(cache_root)
    if new:
        cache_root.mkdir(parents=True, exist_ok=True)
        with (cache_root / COMPILED).open("a") as fh:
            fh.writelines(f"{f}\n" for f in sorted(new))


def warm(jobs: Sequence[Job], families: set[str]) -> list[Job]:
    """``jobs`` with the compile taken out of the expected time of those whose family is compiled already:
    a case a cold estimate keeps out of a call's deadline starts in a later call on the same machine."""
    return [
        replace(j, expected_s=j.expected_s - j.compile_s, compile_s=0.0) if j.family in families else j
        for j in jobs
    ]


UNINSTRUMENTED = "uninstrumented"
UNPOISONED = "unpoisoned"
UNPOISONED_INSTRUMENTS = "gpu_tests.kv_proof.instruments:UNPOISONED"


def recorded_boundary_sizes(case_id: str, version: str, results: Path = RESULTS) -> list[int]:
    """The prompt lengths the boundary probes of ``case_id``'s newest committed report on vLLM ``version``
    were cut against (empty: no such report)."""
    newest: tuple[str, list[int]] | None = None
    for report in committed_reports(results, case_id):
        if report.get("vllm_version") != version:
            continue
        sizes = sorted({p["boundary"] for p in report.get("probes", []) if p.get("kind") == "boundary"})
        if newest is None or report.get("created_at", "") > newest[0]:
            newest = (report.get("created_at", ""), sizes)
    return newest[1] if newest is not None else []


def _as_control(job: Job, label: str, args: list[str]) -> Job:
    """``job`` with ``args`` and its case id (and ``--label``) suffixed ``label``."""
    if "--label" in args:
        at = args.index("--label") + 1
        args[at] = f"{args[at]}-{label}"
    else:
        args += ["--label", label]
    return replace(job, case_id=f"{job.case_id}-{label}", args=tuple(args))


def _instruments_at(job: Job) -> int:
    if "--instruments" not in job.args:
        raise ValueError(f"{job.case_id}: no --instruments to leave out")
    return job.args.index("--instruments")


def uninstrumented(job: Job, boundary_sizes: Sequence[int] = ()) -> Job:
    """``job`` as its control: the same server and sequence with no engine-side instruments (no recorder, no
    reference digests, no poison), its case id labelled, so that a fault the instrumented case met is
    shown to be vLLM's own, or the instruments'. Without the recorder the check reads no layout, so the
    boundary probes are cut against ``boundary_sizes`` (those of the instrumented case's report): the same
    prompts."""
    args = list(job.args)
    at = _instruments_at(job)
    del args[at : at + 2]
    control = _as_control(job, UNINSTRUMENTED, args)
    if boundary_sizes:
        control = replace(
            control, args=(*control.args, "--boundary-sizes", ",".join(str(n) for n in boundary_sizes))
        )
    return control


def unpoisoned(job: Job) -> Job:
    """``job`` as its control with every instrument but the poison (``kv_proof.instruments.UNPOISONED``): the
    recorder and the reference digests still run, so the probes and the byte verdicts are the case's."""
    args = list(job.args)
    args[_instruments_at(job) + 1] = UNPOISONED_INSTRUMENTS
    return _as_control(job, UNPOISONED, args)


def makespan(jobs: Sequence[Job], parallel: int, stagger_s: float = 1.0) -> float:
    """The simulated wall time of ``jobs`` (in their order) on ``parallel`` slots."""
    slots = [0.0] * max(parallel, 1)
    start = 0.0
    for job in jobs:
        i = min(range(len(slots)), key=slots.__getitem__)
        start = max(slots[i], start + stagger_s)
        slots[i] = start + job.expected_s
    return max(slots, default=0.0)


def split_parts(
    jobs: Sequence[Job],
    parts: int,
    parallel: int,
    first_offset_s: float = 80.0,
    costs: dict[str, Cost] | None = None,
    compile_s: float = 60.0,
) -> list[list[Job]]:
    """Deal the jobs over ``parts`` calls on one warm machine.

    A family whose first server starts more than ``compile_s`` slower than its others compiles its kernels
    at start (the hybrids' Triton kernels) into the machine's shared cache. With more than one call, its
    mutation case goes into the first call, where it fills that cache, and its other cases into the last
    call, expected to start as its warm servers did. The other families are dealt whole, the most expensive
    first, each to the call whose simulated end (the first call starts ``first_offset_s`` late, after the
    setup) is earliest.
    """
    costs = costs or {}
    out: list[list[Job]] = [[] for _ in range(parts)]
    families: dict[str, list[Job]] = {}
    for job in jobs:
        families.setdefault(job.family, []).append(job)
    saving = {
        f: cost.cold_s - cost.startup_s
        for f in families
        if (cost := costs.get(PROFILES[f"tiny-{f}"].family)) is not None
    }
    heavy = {f for f, saved in saving.items() if parts > 1 and saved > compile_s}
    for fam in sorted(heavy):
        saved = saving[fam]
        for job in families.pop(fam):
            if job.kind == "mutations":
                out[0].append(job)
            else:
                out[-1].append(replace(job, expected_s=job.expected_s - saved))
    order = sorted(families, key=lambda f: -sum(j.expected_s for j in families[f]))
    for fam in order:

        def end(k: int, fam: str = fam) -> float:
            trial = sorted([*out[k], *families[fam]], key=lambda j: -j.expected_s)
            return makespan(trial, parallel) + (first_offset_s if k == 0 else 0.0)

        best = min(range(parts), key=end)
        out[best].extend(families[fam])
    return [sorted(part, key=lambda j: -j.expected_s) for part in out]
