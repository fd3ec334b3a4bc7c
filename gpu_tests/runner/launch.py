"""The runner's run stage: start each :class:`~.jobs.Job`'s process (a case measures and judges itself and
writes its report), retry a family the server cannot load with dummy weights, stop at the deadline, and
summarise the reports' verdicts per case.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jobs import Job

_LOAD_SIGNS = ("load_weights", "weight_loader", "size mismatch", "safetensors", "KeyError", "shape")


@dataclass
class JobResult:
    job: Job
    status: str  # passed | failed | error | killed | not_run
    wall_s: float = 0.0
    start_s: float | None = None  # seconds after the runner started it (which cases shared the GPU)
    returncode: int | None = None
    report: dict[str, Any] | None = None
    attempts: list[str] = field(default_factory=list)


Launcher = Callable[[Job, Path], "subprocess.Popen[bytes]"]


CASE_COMMAND = (sys.executable, "-m", "gpu_tests.offload_check")


def default_launcher(env: dict[str, str], gpus: int = 1, command: Sequence[str] = CASE_COMMAND) -> Launcher:
    """Starts a case's process; on a machine of several GPUs the one-GPU cases take them in turn (a case
    that needs more sees them all)."""
    from vllm_devclient.testing import spawn

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


@dataclass
class _Runs:
    """The run stage from poll to poll: what waits, what runs (job, process, its start), what ended."""

    queue: list[Job]
    log_dir: Path
    reports: Path
    deadline_s: float
    dummy_fallback: bool
    running: dict[str, tuple[Job, subprocess.Popen[bytes], float]] = field(default_factory=dict)
    results: dict[str, JobResult] = field(default_factory=dict)
    dummy_families: set[str] = field(default_factory=set)
    last_start: float = -1e9


def _reap(runs: _Runs, now: float) -> None:
    """Record every job that ended, stopping one past its timeout or the deadline; a family whose weights
    the server could not load goes back first in line with dummy weights."""
    from vllm_devclient.testing import stop_group

    for case_id, (job, proc, t0) in list(runs.running.items()):
        code = proc.poll()
        timed_out = now - t0 > job.timeout_s or now > runs.deadline_s
        if code is None and not timed_out:
            continue
        if code is None:
            code = stop_group(proc, grace=10.0)
            status = "killed"
        else:
            status = "error"
        del runs.running[case_id]
        report_path = runs.reports / f"{case_id}.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else None
        if report is not None and status != "killed":
            status = str(report.get("status", "error"))
        result = runs.results.setdefault(case_id, JobResult(job, status))
        result.job, result.status, result.wall_s, result.start_s = job, status, now - t0, t0
        result.returncode, result.report = code, report
        result.attempts.append(f"{'dummy' if job.dummy else 'safetensors'}: {status}")
        if runs.dummy_fallback and not job.dummy and _load_failure(report, runs.reports, job):
            runs.dummy_families.add(job.family)
            runs.queue.insert(0, job.with_dummy())


def _start_next(
    runs: _Runs,
    now: float,
    launcher: Launcher,
    *,
    parallel: int,
    stagger_s: float,
    gpu_mem_gib: float | None,
) -> bool:
    """Start the first waiting job that fits before the deadline (and in the GPU memory left); True when one
    started. With nothing running and nothing that fits, what waits is not run."""
    if not (runs.queue and len(runs.running) < parallel and now - runs.last_start >= stagger_s):
        return False
    free = (
        float("inf")
        if gpu_mem_gib is None
        else gpu_mem_gib - sum(r[0].mem_gib for r in runs.running.values())
    )
    fits = [j for j in runs.queue if now + j.expected_s <= runs.deadline_s and j.mem_gib <= free]
    if fits:
        job = fits[0]
        runs.queue.remove(job)
        if job.family in runs.dummy_families and not job.dummy:
            job = job.with_dummy()
        proc = launcher(job, runs.log_dir / f"{job.case_id}.log")
        runs.running[job.case_id] = (job, proc, now)
        runs.last_start = now
        return True
    if not runs.running:
        for job in runs.queue:
            runs.results.setdefault(job.case_id, JobResult(job, "not_run"))
        runs.queue.clear()
    return False


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
    log_dir, reports = out / "logs", out / "reports"
    log_dir.mkdir(parents=True, exist_ok=True)
    start = clock()
    runs = _Runs(list(jobs), log_dir, reports, deadline_s, dummy_fallback)
    while runs.queue or runs.running:
        now = clock() - start
        _reap(runs, now)
        if _start_next(runs, now, launcher, parallel=parallel, stagger_s=stagger_s, gpu_mem_gib=gpu_mem_gib):
            continue
        time.sleep(poll_s)
    return [runs.results[j.case_id] for j in jobs if j.case_id in runs.results]


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
