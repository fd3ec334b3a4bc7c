"""Run many offload-check cases at once on one GPU: every tiny family x connector x frontend, and per family
one case that runs the whole mutation catalogue.

Each case is its own ``python -m gpu_tests.offload_check`` process (one ``vllm serve`` each, started
once for all its iterations) with the engine-side instruments of ``gpu_tests/kv_proof`` and a fixed small KV
cache, so that many servers share the GPU. ``--parallel`` bounds how many run at once (CPU cores, not GPU
memory, are what tiny servers compete for). A family whose safetensors the server cannot load is retried
with ``--load-format dummy`` and the seeded initialiser of ``tiny_init.py``.

The plan is measured, not guessed: :func:`expected_costs` reads each family's startup and per-run time from
the committed reports (``gpu_tests/results/``), and :func:`split_parts` deals the families over ``--parts``
device calls so that each call's simulated makespan, with the first call's setup, fits its budget.
``--part K`` runs one of them. Nothing starts after ``--deadline-s`` minus the case's expected time, and a
case still running at the deadline is stopped, so a budgeted call always returns with the reports written so
far (a case writes its report after each iteration).

    python -m gpu_tests.runner.run_matrix --out OUT --families llama,gemma3 --parallel 10
    python -m gpu_tests.runner.run_matrix --out OUT --parts 2 --part 1 --dry-run
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpu_tests.offload_check.profiles import PROFILES, CheckCase, connector_by_name, gpu_count
from gpu_tests.offload_check.tiny import TINY_FAMILIES

REPO_ROOT = Path(__file__).resolve().parents[2]
RESULTS = REPO_ROOT / "gpu_tests" / "results"
INSTRUMENTS = "gpu_tests.kv_proof.instruments:INSTRUMENTS"
DUMMY_ARGS = ("--load-format", "dummy")
_LOAD_SIGNS = ("load_weights", "weight_loader", "size mismatch", "safetensors", "KeyError", "shape")
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

    def with_dummy(self) -> Job:
        return replace(self, dummy=True, args=(*self.args, "--server-arg", " ".join(DUMMY_ARGS)))


@dataclass
class JobResult:
    job: Job
    status: str  # passed | failed | error | killed | not_run
    wall_s: float = 0.0
    start_s: float | None = None  # seconds after the runner started it (which cases shared the GPU)
    returncode: int | None = None
    report: dict[str, Any] | None = None
    attempts: list[str] = field(default_factory=list)


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

    @property
    def cold_s(self) -> float:
        return self.startup_s if self.cold_startup_s is None else self.cold_startup_s

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


def expected_costs(results: Path = RESULTS, probe_scale: float = 1.25) -> dict[str, Cost]:
    """Median startup and run time per family from every committed report (format 1 runs, which had no
    boundary probes, scaled by ``probe_scale``)."""
    startups: dict[str, list[float]] = {}
    runs: dict[str, list[float]] = {}
    catalogue: dict[str, list[float]] = {}
    paths = [*results.rglob("tiny-*.json"), *results.rglob("tiny-*.json.xz")]  # runs since kv-proof: xz
    for path in sorted(paths):
        data = path.read_bytes()
        report = json.loads(lzma.decompress(data) if path.name.endswith(".xz") else data)
        family = report.get("family")
        timings = report.get("timings") or {}
        if not family or report.get("profile", "") != f"tiny-{family}" or "server_startup_s" not in timings:
            continue
        if report.get("concurrency") not in (1, None) or report.get("num_questions") != 16:
            continue  # a study case (200 questions, concurrency 8) is another workload
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
        )
    return out


def _case_args(
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
    return tuple(args)


def _case_id(profile: str, connector: str, frontend: str, label: str = "") -> str:
    """The id the check gives the case (and its report file)."""
    return CheckCase(PROFILES[profile], connector_by_name(connector), frontend, label=label).id  # type: ignore[arg-type]


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
    from gpu_tests.kv_proof.catalogue import MUTATIONS

    unknown = [f for f in families if f"tiny-{f}" not in PROFILES]
    if unknown:
        known = sorted(n.removeprefix("tiny-") for n, p in PROFILES.items() if p.tiny)
        raise SystemExit(f"unknown families {unknown}; known: {known}")
    costs = expected_costs() if costs is None else costs
    common = {"report_dir": report_dir, "gsm8k_dir": gsm8k_dir, "server_args": server_args}
    jobs: list[Job] = []
    for fam in families:
        profile = f"tiny-{fam}"
        cost = costs.get(PROFILES[profile].family) or Cost(FALLBACK_STARTUP_S, FALLBACK_RUN_S, "fallback")
        gpus = PROFILES[profile].gpus
        for connector in ("offloading", "simple"):
            for frontend in ("python", "rust"):
                args = _case_args(
                    profile, connector, frontend, iterations=iterations, num_questions=num_questions, **common
                )
                expected = cost.case_s(iterations)
                jobs.append(
                    Job(
                        _case_id(profile, connector, frontend),
                        fam,
                        "matrix",
                        args,
                        expected * timeout_margin,
                        expected,
                        gpus=gpus,
                    )
                )
        for connector in ("offloading", "simple") if mutations else ():
            args = _case_args(
                profile,
                connector,
                "python",
                iterations=catalogue_iterations,
                label="mutations",
                mutations="all",
                num_questions=num_questions,
                **common,
            )
            count = sum(m.connector == connector_by_name(connector) for m in MUTATIONS.values())
            expected = cost.case_s(catalogue_iterations, count)
            case_id = _case_id(profile, connector, "python", "mutations")
            jobs.append(Job(case_id, fam, "mutations", args, expected * timeout_margin, expected, gpus=gpus))
    return sorted(jobs, key=lambda j: -j.expected_s)


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


Launcher = Callable[[Job, Path], "subprocess.Popen[bytes]"]


CASE_COMMAND = (sys.executable, "-m", "gpu_tests.offload_check")


def default_launcher(env: dict[str, str], gpus: int = 1, command: Sequence[str] = CASE_COMMAND) -> Launcher:
    """Starts a case's process; on a machine of several GPUs the one-GPU cases take them in turn (a case
    that needs more sees them all)."""
    from vllm_devclient.testing.processes import spawn

    started = 0

    def launch(job: Job, log: Path) -> subprocess.Popen[bytes]:
        nonlocal started
        case_env = dict(env)
        if gpus > 1 and job.gpus == 1:
            case_env["CUDA_VISIBLE_DEVICES"] = str(started % gpus)
            started += 1
        with log.open("ab") as fh:
            return spawn([*command, *job.args], env=case_env, stdout=fh)

    return launch


def _load_failure(report: dict[str, Any] | None, reports: Path, job: Job) -> bool:
    """Did the server die while loading the weights (so dummy weights may work)?"""
    if report is None or report.get("status") != "error":
        return False
    error = str(report.get("error") or "")
    if "exited with code" not in error:
        return False
    server_log = reports / f"{job.case_id}.server.log"
    text = error + (server_log.read_text(errors="replace")[-20000:] if server_log.exists() else "")
    return any(sign in text for sign in _LOAD_SIGNS)


def run_jobs(
    jobs: Sequence[Job],
    *,
    out: Path,
    parallel: int,
    deadline_s: float,
    launcher: Launcher,
    stagger_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 0.5,
    dummy_fallback: bool = True,
    gpu_mem_gib: float | None = None,
) -> list[JobResult]:
    """Run ``jobs`` with at most ``parallel`` at once (and, given ``gpu_mem_gib``, their ``mem_gib`` within
    it); a job starts only if its expected time fits before ``deadline_s`` (seconds from now); everything
    still running then is stopped."""
    from vllm_devclient.testing.processes import stop_group

    log_dir, reports = out / "logs", out / "reports"
    log_dir.mkdir(parents=True, exist_ok=True)
    start = clock()
    queue = list(jobs)
    dummy_families: set[str] = set()
    running: dict[str, tuple[Job, subprocess.Popen[bytes], float]] = {}
    results: dict[str, JobResult] = {}
    last_start = -1e9
    while queue or running:
        now = clock() - start
        for case_id, (job, proc, t0) in list(running.items()):
            code = proc.poll()
            timed_out = now - t0 > job.timeout_s or now > deadline_s
            if code is None and not timed_out:
                continue
            if code is None:
                code = stop_group(proc, grace=10.0)
                status = "killed"
            else:
                status = "error"
            del running[case_id]
            report_path = reports / f"{case_id}.json"
            report = json.loads(report_path.read_text()) if report_path.exists() else None
            if report is not None and status != "killed":
                status = str(report.get("status", "error"))
            result = results.setdefault(case_id, JobResult(job, status))
            result.job, result.status, result.wall_s, result.start_s = job, status, now - t0, t0
            result.returncode, result.report = code, report
            result.attempts.append(f"{'dummy' if job.dummy else 'safetensors'}: {status}")
            if dummy_fallback and not job.dummy and _load_failure(report, reports, job):
                dummy_families.add(job.family)
                queue.insert(0, job.with_dummy())
        if queue and len(running) < parallel and now - last_start >= stagger_s:
            free = (
                float("inf")
                if gpu_mem_gib is None
                else gpu_mem_gib - sum(r[0].mem_gib for r in running.values())
            )
            fits = [j for j in queue if now + j.expected_s <= deadline_s and j.mem_gib <= free]
            if fits:
                job = fits[0]
                queue.remove(job)
                if job.family in dummy_families and not job.dummy:
                    job = job.with_dummy()
                proc = launcher(job, log_dir / f"{job.case_id}.log")
                running[job.case_id] = (job, proc, now)
                last_start = now
                continue
            if not running:
                for job in queue:
                    results.setdefault(job.case_id, JobResult(job, "not_run"))
                queue.clear()
        time.sleep(poll_s)
    return [results[j.case_id] for j in jobs if j.case_id in results]


def verdict(job: Job, report: dict[str, Any] | None, status: str, server_log: str = "") -> str:
    """``passed``, ``known_defect`` (failed only where a named vLLM defect explains it), ``failed``, or the
    runner's own ``error``/``killed``/``not_run``."""
    if report is None or status in ("killed", "not_run"):
        return status
    if status == "error" and "fa_gidx" in str(report.get("error") or "") + server_log:
        return "unsupported"  # vLLM 0.26's SimpleCPUOffloadConnector needs a full-attention group
    if status != "failed":
        return status
    defect_only = {"recurrent_state_consistent"}
    failed = {
        a["name"]
        for it in report.get("iterations", [])
        if it.get("mutation") is None
        for a in it.get("assertions", [])
        if a.get("evaluated", True) and not a["passed"]
    }
    case_failed = {
        a["name"] for a in report.get("assertions", []) if a.get("evaluated", True) and not a["passed"]
    }
    if report.get("defects") and failed <= defect_only and not case_failed:
        return "known_defect"
    return "failed"


def _server_log(reports: Path | None, case_id: str) -> str:
    path = reports / f"{case_id}.server.log" if reports is not None else None
    return path.read_text(errors="replace")[-200_000:] if path is not None and path.exists() else ""


def summarize(results: Sequence[JobResult], wall_s: float, reports: Path | None = None) -> dict[str, Any]:
    rows = []
    for r in results:
        rep = r.report or {}
        timings = rep.get("timings") or {}
        mutations = {
            it["mutation"]: (it.get("mutation_verdict") or {}).get("caught")
            for it in rep.get("iterations", [])
            if it.get("mutation")
        }
        rows.append(
            {
                "case_id": r.job.case_id,
                "family": r.job.family,
                "kind": r.job.kind,
                "status": r.status,
                "verdict": verdict(r.job, r.report, r.status, _server_log(reports, r.job.case_id)),
                "weights": "dummy"
                if r.job.dummy or "--load-format" in " ".join(r.job.args)
                else "safetensors",
                "attempts": r.attempts,
                "wall_s": round(r.wall_s, 1),
                "start_s": None if r.start_s is None else round(r.start_s, 1),
                "expected_s": round(r.job.expected_s, 1),
                "startup_s": timings.get("server_startup_s"),
                "check_s": timings.get("check_s"),
                "defects": [d["id"] for d in rep.get("defects", [])],
                "mutations": mutations,
                "error": (rep.get("error") or "")[:300] or None,
            }
        )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["verdict"]] = counts.get(row["verdict"], 0) + 1
    return {"wall_s": round(wall_s, 1), "counts": counts, "cases": rows}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpu_tests.runner.run_matrix", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", required=True, help="folder for reports/, logs/ and matrix_summary.json")
    p.add_argument(
        "--families",
        default="default",
        help="comma list, 'default' (every default family), 'all', or 'real' (upstream's models, real size)",
    )
    p.add_argument("--iterations", type=int, default=3, help="clean passes per case")
    p.add_argument("--no-mutations", action="store_true")
    p.add_argument("--catalogue-iterations", type=int, default=0, help="clean passes in each catalogue case")
    p.add_argument("--num-questions", type=int, help="questions per run (default: the tiny profile's)")
    p.add_argument("--parallel", type=int, default=15)
    p.add_argument("--parts", type=int, default=1, help="device calls the plan is dealt over")
    p.add_argument("--part", type=int, default=1, help="which of them to run (1-based)")
    p.add_argument("--setup-s", type=float, default=80.0, help="the first call's setup, before the matrix")
    p.add_argument("--deadline-s", type=float, default=3600.0)
    p.add_argument("--gsm8k-dir", default=os.environ.get("VLLM_DEVCLIENT_GSM8K_DIR"))
    p.add_argument(
        "--server-args",
        default="--gpu-memory-utilization 0.05 --kv-cache-memory-bytes 1073741824",
        help="vllm serve flags for every case (fixed KV cache: skips memory profiling that others disturb)",
    )
    p.add_argument("--only", default="", help="comma list: run only the cases whose id contains one of these")
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--gpu-mem-gib", type=float, default=None, help="real size: GPU memory the cases share")
    p.add_argument(
        "--kv-gib", action="append", default=[], help="real size: MODEL=GIB, a model's KV cache (repeatable)"
    )
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.families == "real":
        return _main_real(args, out)
    if args.families == "default":
        families = [f for f, fam in TINY_FAMILIES.items() if fam.default]
    elif args.families == "all":
        families = [f for f, fam in TINY_FAMILIES.items() if f != "deepseek-v4"]
    else:
        families = [f.strip() for f in args.families.split(",") if f.strip()]
    costs = expected_costs()
    jobs = plan(
        families,
        costs=costs,
        report_dir=out / "reports",
        gsm8k_dir=args.gsm8k_dir,
        server_args=args.server_args,
        iterations=args.iterations,
        mutations=not args.no_mutations,
        num_questions=args.num_questions,
        catalogue_iterations=args.catalogue_iterations,
    )
    parts = split_parts(jobs, args.parts, args.parallel, args.setup_s, costs)
    jobs = parts[args.part - 1]
    jobs = _only(jobs, args.only)
    if args.dry_run:
        for k, part in enumerate(parts, 1):
            span = makespan(part, args.parallel) + (args.setup_s if k == 1 else 0.0)
            print(
                f"part {k}: {len(part)} cases, simulated {span:.0f} s, "
                f"families {sorted({j.family for j in part})}"
            )
        for job in jobs:
            print(f"{job.case_id} expected {job.expected_s:.0f}s: {shlex.join(job.args)}")
        return 0
    return _run(jobs, args, out)


def _main_real(args: argparse.Namespace, out: Path) -> int:
    """``--families real``: upstream's models at real size (``real_plan``), dealt by GPU memory."""
    from . import real_plan

    jobs = real_plan.plan_real(
        report_dir=out / "reports",
        gsm8k_dir=args.gsm8k_dir,
        num_questions=args.num_questions,
        kv_gib=_kv_overrides(args.kv_gib),
        mutations=not args.no_mutations,
    )
    jobs = _only(jobs, args.only)
    mem = args.gpu_mem_gib or real_plan.H200_GIB
    slots, left = real_plan.best_deal(jobs, calls=args.parts, setup_s=args.setup_s, gpu_mem_gib=mem)
    if args.dry_run:
        print("\n".join(real_plan.describe(slots, left, calls=args.parts, setup_s=args.setup_s)))
        return 0
    # This call runs its share first, then whatever the estimates put later, while the deadline allows.
    mine = [s.job for s in slots if s.call == args.part]
    later = [j for j in jobs if j.case_id not in {m.case_id for m in mine}]
    done = {p.stem for p in (out / "reports").glob("*.json")}
    return _run([j for j in (*mine, *later) if j.case_id not in done], args, out, gpu_mem_gib=mem)


def _only(jobs: Sequence[Job], only: str) -> list[Job]:
    """``--only a,b``: the jobs whose case id contains one of the comma-separated parts (all without it)."""
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    return [j for j in jobs if not wanted or any(w in j.case_id for w in wanted)]


def _kv_overrides(items: Sequence[str]) -> dict[str, float]:
    """``--kv-gib MODEL=GIB`` (repeatable): a real-size model's KV cache instead of the plan's."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise SystemExit(f"--kv-gib wants MODEL=GIB (e.g. qwen3.5-35b=8), got {item!r}")
    return out


def _run(jobs: Sequence[Job], args: argparse.Namespace, out: Path, gpu_mem_gib: float | None = None) -> int:
    env = dict(os.environ)
    # Engine processes import gpu_tests.kv_proof (the instruments) from the repository root.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    t0 = time.monotonic()
    results = run_jobs(
        jobs,
        out=out,
        parallel=args.parallel,
        deadline_s=args.deadline_s,
        launcher=default_launcher(env, gpu_count()),
        gpu_mem_gib=gpu_mem_gib,
    )
    summary = summarize(results, time.monotonic() - t0, out / "reports")
    summary["part"] = f"{args.part}/{args.parts}"
    (out / f"matrix_summary_part{args.part}.json").write_text(json.dumps(summary, indent=2) + "\n")
    for row in summary["cases"]:
        print(
            f"{row['case_id']:52} {row['verdict']:12} wall {row['wall_s']:6.1f}s "
            f"(exp {row['expected_s']:5.0f}) "
            f"startup {row['startup_s'] or 0:6.1f}s defects={row['defects']} mutations={row['mutations']} "
            f"{row['error'] or ''}"[:300]
        )
    print(f"wall {summary['wall_s']} s, {summary['counts']}")
    good = {"passed", "known_defect", "unsupported"}
    caught = all(all(v for v in row["mutations"].values()) for row in summary["cases"])
    return 0 if caught and all(row["verdict"] in good for row in summary["cases"]) else 1


if __name__ == "__main__":
    sys.exit(main())
