"""Run many offload-check cases at once on one GPU: the tiny-family matrix, mutations, the concurrency study.

Each case is its own ``python -m vllm_devclient.offload_check`` process (one ``vllm serve`` each, started
once for all its runs), with a fixed small KV cache so that many servers share the GPU. ``--parallel``
bounds how many run at once (CPU cores, not GPU memory, are what tiny servers compete for). A family whose
safetensors the server cannot load is retried with ``--load-format dummy`` and the seeded initialiser of
``tiny_init.py`` (the report's ``server_args`` say which weights a case used). Nothing is started after
``--deadline-s`` minus the expected case time, and whatever still runs at the deadline is stopped, so a
budgeted machine call always returns with the reports written so far.

    python -m gpu_tests.runner.run_matrix --out OUT --families llama,gemma3 --parallel 10
    python -m gpu_tests.runner.run_matrix --out OUT --families deepseek-v2-tp2-ep   # a several-GPU stand-in
    python -m gpu_tests.runner.run_matrix --out OUT --families none --study gemma3,llama --study-concurrency 8
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpu_tests import MUTATION_EXTRA
from vllm_devclient.offload_check.profiles import PROFILES, CheckCase, connector_by_name, gpu_count
from vllm_devclient.offload_check.tiny import TINY_FAMILIES

REPO_ROOT = Path(__file__).resolve().parents[2]
# Slowest first: hybrid families compile their SSM / GDN kernels on first use.
FAMILY_ORDER = ("nemotron-h", "qwen3-next", "falcon-h1", "gemma4", "deepseek-v2", "gemma3", "llama", "mamba")
DUMMY_ARGS = ("--load-format", "dummy")
_LOAD_SIGNS = ("load_weights", "weight_loader", "size mismatch", "safetensors", "KeyError", "shape")


@dataclass(frozen=True)
class Job:
    """One case to run: the offload check's command-line arguments and what the runner needs to know."""

    case_id: str
    family: str
    kind: str  # matrix | mutation | study
    args: tuple[str, ...]
    timeout_s: float
    dummy: bool = False
    gpus: int = 1

    def with_dummy(self) -> Job:
        return replace(self, dummy=True, args=(*self.args, "--server-arg", " ".join(DUMMY_ARGS)))


@dataclass
class JobResult:
    job: Job
    status: str  # passed | failed | error | killed | not_run
    wall_s: float = 0.0
    returncode: int | None = None
    report: dict[str, Any] | None = None
    attempts: list[str] = field(default_factory=list)


def _case_args(
    profile: str,
    connector: str,
    frontend: str,
    *,
    report_dir: Path,
    gsm8k_dir: str | None,
    server_args: str,
    label: str = "",
    extra: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    num_questions: int | None = None,
    concurrency: int = 1,
    agreement: Sequence[int] = (),
) -> tuple[str, ...]:
    args = ["--profile", profile, "--connector", connector, "--frontend", frontend]
    args += ["--report-dir", str(report_dir), "--no-progress", "--concurrency", str(concurrency)]
    if gsm8k_dir:
        args += ["--gsm8k-dir", gsm8k_dir]
    if server_args:
        args += ["--server-arg", server_args]
    if label:
        args += ["--label", label]
    if extra:
        args += ["--connector-extra", json.dumps(extra)]
    for key, value in (env or {}).items():
        args += ["--env", f"{key}={value}"]
    if num_questions is not None:
        args += ["--num-questions", str(num_questions)]
    if agreement:
        args += ["--agreement", ",".join(str(c) for c in agreement)]
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
    mutation: bool = True,
    num_questions: int | None = None,
    study: Sequence[str] = (),
    study_questions: int = 200,
    study_concurrency: int = 8,
    agreement: Sequence[int] = (1, 8, 64),
    case_timeout_s: float = 540.0,
) -> list[Job]:
    """The jobs: the study's long cases first (they set the critical path), then every family x connector x
    frontend with one mutation per family, then the study's mutations. A family is a tiny profile's name
    without ``tiny-``: ``llama``, or a several-GPU stand-in such as ``deepseek-v2-tp2-ep``."""
    unknown = [f for f in (*families, *study) if f"tiny-{f}" not in PROFILES and f != "small"]
    if unknown:
        known = sorted(n.removeprefix("tiny-") for n, p in PROFILES.items() if p.tiny)
        raise SystemExit(f"unknown families {unknown}; known: {known} and small")

    def order(name: str) -> int:
        fam = PROFILES[f"tiny-{name}"].family
        return FAMILY_ORDER.index(fam) if fam in FAMILY_ORDER else len(FAMILY_ORDER)

    common = {"report_dir": report_dir, "gsm8k_dir": gsm8k_dir, "server_args": server_args}
    jobs: list[Job] = []
    for fam in sorted(families, key=order):
        profile = f"tiny-{fam}"
        gpus = PROFILES[profile].gpus
        for connector in ("offloading", "simple"):
            for frontend in ("python", "rust"):
                args = _case_args(profile, connector, frontend, num_questions=num_questions, **common)
                case_id = _case_id(profile, connector, frontend)
                jobs.append(Job(case_id, fam, "matrix", args, case_timeout_s, gpus=gpus))
        if mutation:
            args = _case_args(
                profile,
                "offloading",
                "python",
                label="mutation",
                extra=MUTATION_EXTRA,
                num_questions=num_questions,
                **common,
            )
            case_id = _case_id(profile, "offloading", "python", "mutation")
            jobs.append(Job(case_id, fam, "mutation", args, case_timeout_s, gpus=gpus))
    c = study_concurrency
    long_jobs: list[Job] = []
    study_mutations: list[Job] = []
    for fam in study:
        profile = "small" if fam == "small" else f"tiny-{fam}"
        for bi in (False, True):
            label = f"c{c}-bi" if bi else f"c{c}"
            env = {"VLLM_BATCH_INVARIANT": "1"} if bi else None
            # The check (with the agreement runs) first; its mutation after the matrix.
            for suffix, extra, agree, bucket in (
                ("", None, agreement, long_jobs),
                ("-mutation", MUTATION_EXTRA, (), study_mutations),
            ):
                args = _case_args(
                    profile,
                    "offloading",
                    "python",
                    label=label + suffix,
                    env=env,
                    extra=extra,
                    num_questions=study_questions,
                    concurrency=c,
                    agreement=agree,
                    **common,
                )
                if profile == "small":  # SmolLM2 writes long answers: bound them as the tiny profiles do
                    args = (*args, "--max-tokens", "64")
                case_id = _case_id(profile, "offloading", "python", label + suffix)
                bucket.append(Job(case_id, fam, "study", args, case_timeout_s))
    return [*long_jobs, *jobs, *study_mutations]


Launcher = Callable[[Job, Path], "subprocess.Popen[bytes]"]


CASE_COMMAND = (sys.executable, "-m", "vllm_devclient.offload_check")


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
    expected_case_s: float = 150.0,
    clock: Callable[[], float] = time.monotonic,
    poll_s: float = 0.5,
    dummy_fallback: bool = True,
) -> list[JobResult]:
    """Run ``jobs`` with at most ``parallel`` at once; no new start after ``deadline_s - expected_case_s``,
    everything stopped at ``deadline_s`` (seconds from now)."""
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
            report = (
                json.loads(report_path.read_text()) if report_path.exists() and status != "killed" else None
            )
            if report is not None:
                status = str(report.get("status", "error"))
            result = results.setdefault(case_id, JobResult(job, status))
            result.job, result.status, result.wall_s = job, status, now - t0
            result.returncode, result.report = code, report
            result.attempts.append(f"{'dummy' if job.dummy else 'safetensors'}: {status}")
            if dummy_fallback and not job.dummy and _load_failure(report, reports, job):
                dummy_families.add(job.family)
                queue.insert(0, job.with_dummy())
        can_start = now < deadline_s - expected_case_s and now - last_start >= stagger_s
        if queue and len(running) < parallel and can_start:
            job = queue.pop(0)
            if job.family in dummy_families and not job.dummy:
                job = job.with_dummy()
            proc = launcher(job, log_dir / f"{job.case_id}.log")
            running[job.case_id] = (job, proc, now)
            last_start = now
            continue
        if queue and not running and not can_start and now >= deadline_s - expected_case_s:
            for job in queue:
                results.setdefault(job.case_id, JobResult(job, "not_run"))
            queue.clear()
        time.sleep(poll_s)
    return [results[j.case_id] for j in jobs if j.case_id in results]


def summarize(results: Sequence[JobResult], wall_s: float) -> dict[str, Any]:
    rows = []
    for r in results:
        rep = r.report or {}
        timings = rep.get("timings") or {}
        events = rep.get("events") or {}
        rows.append(
            {
                "case_id": r.job.case_id,
                "family": r.job.family,
                "kind": r.job.kind,
                "status": r.status,
                "weights": "dummy"
                if r.job.dummy or "--load-format" in " ".join(r.job.args)
                else "safetensors",
                "attempts": r.attempts,
                "wall_s": round(r.wall_s, 1),
                "startup_s": timings.get("server_startup_s"),
                "check_s": timings.get("check_s"),
                "assertions": {a["name"]: a["passed"] for a in rep.get("assertions", [])},
                "missing_cpu_groups": events.get("missing_cpu_groups"),
                "error": (rep.get("error") or "")[:300] or None,
            }
        )
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return {"wall_s": round(wall_s, 1), "counts": counts, "cases": rows}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m gpu_tests.runner.run_matrix", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", required=True, help="folder for reports/, logs/ and matrix_summary.json")
    p.add_argument(
        "--families",
        default="default",
        help="comma list (families, or stand-ins such as deepseek-v2-tp2-ep), 'default' or none",
    )
    p.add_argument("--no-mutation", action="store_true")
    p.add_argument("--num-questions", type=int, help="questions per run (default: the tiny profile's)")
    p.add_argument("--study", default="", help="families (or 'small') for the concurrency study")
    p.add_argument("--study-questions", type=int, default=200)
    p.add_argument("--study-concurrency", type=int, default=8)
    p.add_argument("--agreement", default="1,8,64")
    p.add_argument("--parallel", type=int, default=10)
    p.add_argument("--deadline-s", type=float, default=3600.0)
    p.add_argument("--expected-case-s", type=float, default=150.0)
    p.add_argument("--case-timeout-s", type=float, default=540.0)
    p.add_argument("--gsm8k-dir", default=os.environ.get("VLLM_DEVCLIENT_GSM8K_DIR"))
    p.add_argument(
        "--server-args",
        default="--gpu-memory-utilization 0.05 --kv-cache-memory-bytes 1073741824",
        help="vllm serve flags for every case (fixed KV cache: skips memory profiling that others disturb)",
    )
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args(argv)
    out = Path(args.out)
    if args.families == "default":
        families = [f for f, fam in TINY_FAMILIES.items() if fam.default]
    elif args.families in ("", "none"):
        families = []
    else:
        families = [f.strip() for f in args.families.split(",") if f.strip()]
    jobs = plan(
        families,
        report_dir=out / "reports",
        gsm8k_dir=args.gsm8k_dir,
        server_args=args.server_args,
        mutation=not args.no_mutation,
        num_questions=args.num_questions,
        study=[s.strip() for s in args.study.split(",") if s.strip()],
        study_questions=args.study_questions,
        study_concurrency=args.study_concurrency,
        agreement=[int(c) for c in args.agreement.split(",") if c.strip()],
        case_timeout_s=args.case_timeout_s,
    )
    if args.dry_run:
        for job in jobs:
            print(job.case_id, shlex.join(job.args))
        return 0
    env = dict(os.environ)
    # Engine processes import gpu_tests.kv_corruption (the mutation's spec) from the repository root.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    t0 = time.monotonic()
    results = run_jobs(
        jobs,
        out=out,
        parallel=args.parallel,
        deadline_s=args.deadline_s,
        launcher=default_launcher(env, gpu_count()),
        expected_case_s=args.expected_case_s,
    )
    summary = summarize(results, time.monotonic() - t0)
    (out / "matrix_summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    for row in summary["cases"]:
        failed = [k for k, v in row["assertions"].items() if not v]
        print(
            f"{row['case_id']:52} {row['status']:8} {row['weights']:11} wall {row['wall_s']:6.1f}s "
            f"startup {row['startup_s'] or 0:6.1f}s failed={failed} {row['error'] or ''}"[:260]
        )
    print(f"wall {summary['wall_s']} s, {summary['counts']}")
    bad = {"error", "killed", "not_run"}
    ok = all(
        r.status == "passed"
        if r.job.kind != "mutation" and not r.job.case_id.endswith("mutation")
        else r.status == "failed"
        for r in results
        if r.status not in bad
    )
    return 0 if ok and not any(r.status in bad for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
