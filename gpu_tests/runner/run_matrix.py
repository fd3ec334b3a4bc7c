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
    python -m gpu_tests.runner.run_matrix --out OUT --history --dry-run     # issue 35: every release's plan
    python -m gpu_tests.runner.run_matrix --out OUT --history --vllm-version 0.23.0   # one release's cases

``--vllm-version X`` plans for that release (``offload_check/releases.py``): a case it cannot serve is listed
with the reason (and in the summary's ``skipped``), never run; ``--history`` plans issue 35's cases
(``history_plan.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gpu_tests.offload_check import releases
from gpu_tests.offload_check.profiles import gpu_count
from gpu_tests.offload_check.tiny import TINY_FAMILIES

from . import history_plan
from .jobs import (
    REPO_ROOT,
    Job,
    compiled_families,
    expected_costs,
    makespan,
    mark_compiled,
    measured_check_s,
    plan,
    recorded_boundary_sizes,
    split_parts,
    uninstrumented,
    unpoisoned,
    warm,
)
from .launch import default_launcher, run_jobs, summarize


def _parser() -> argparse.ArgumentParser:
    """The command line: what to plan and run; :func:`_add_plan_options` adds the real-size, release,
    history and control options."""
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
    p.add_argument(
        "--setup-s",
        type=float,
        default=80.0,
        help="the first call's setup, before the matrix; the plan is dealt with it, so every --part of one "
        "plan takes the same value (part 2 with another one gets another deal: cases run twice or never)",
    )
    p.add_argument("--deadline-s", type=float, default=3600.0)
    p.add_argument("--gsm8k-dir", default=os.environ.get("VLLM_DEVCLIENT_GSM8K_DIR"))
    p.add_argument(
        "--server-args",
        default="--gpu-memory-utilization 0.05 --kv-cache-memory-bytes 1073741824",
        help="vllm serve flags for every case (fixed KV cache: skips memory profiling that others disturb)",
    )
    p.add_argument(
        "--only",
        default="",
        help="comma list: run only the cases whose id contains one of these (one ending in $ ends the id)",
    )
    p.add_argument("--dry-run", action="store_true")
    _add_plan_options(p)
    return p


def _add_plan_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu-mem-gib", type=float, default=None, help="real size: GPU memory the cases share")
    p.add_argument(
        "--kv-gib", action="append", default=[], help="real size: MODEL=GIB, a model's KV cache (repeatable)"
    )
    p.add_argument(
        "--vllm-version",
        default=None,
        help="plan for this vLLM release (default: the installed vLLM's; without one, every case)",
    )
    p.add_argument(
        "--volume",
        action="store_true",
        help="real size: each clean case by volume (issue 53: runner/real_volume.py's plan per model)",
    )
    p.add_argument("--history", action="store_true", help="issue 35's plan: clean matrix and bug scenarios")
    p.add_argument(
        "--history-frontends", default="python,rust", help="the history's clean matrix frontends (comma list)"
    )
    controls = p.add_mutually_exclusive_group()
    controls.add_argument(
        "--uninstrumented",
        action="store_true",
        help="run each selected case as its control, without the engine-side instruments (case id "
        "suffixed -uninstrumented): tells a fault of vLLM's from one of the instruments'",
    )
    controls.add_argument(
        "--unpoisoned",
        action="store_true",
        help="run each selected case as its control with every instrument but the poison (case id "
        "suffixed -unpoisoned)",
    )


def _families(args: argparse.Namespace) -> list[str]:
    """``--families``: the tiny families named, every default one, or all (but deepseek-v4)."""
    if args.families == "default":
        return [f for f, fam in TINY_FAMILIES.items() if fam.default]
    if args.families == "all":
        return [f for f, fam in TINY_FAMILIES.items() if f != "deepseek-v4"]
    return [f.strip() for f in args.families.split(",") if f.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    out = Path(args.out)
    if args.history:
        return _main_history(args, out)
    args.vllm_version = args.vllm_version or releases.installed_version()
    if args.families == "real":
        return _main_real(args, out)
    costs = expected_costs()
    jobs = plan(
        _families(args),
        costs=costs,
        report_dir=out / "reports",
        gsm8k_dir=args.gsm8k_dir,
        server_args=args.server_args,
        iterations=args.iterations,
        mutations=not args.no_mutations,
        num_questions=args.num_questions,
        catalogue_iterations=args.catalogue_iterations,
    )
    skipped: list[tuple[str, str]] = []
    if args.vllm_version:
        jobs, skipped = history_plan.split_by_release(jobs, args.vllm_version)
    parts = split_parts(jobs, args.parts, args.parallel, args.setup_s, costs)
    jobs = _controls(_only(parts[args.part - 1], args.only), args, args.vllm_version)
    if args.dry_run:
        for case_id, why in skipped:
            print(f"skip {case_id}: {why}")
        for k, part in enumerate(parts, 1):
            span = makespan(part, args.parallel) + (args.setup_s if k == 1 else 0.0)
            print(
                f"part {k}: {len(part)} cases, simulated {span:.0f} s, "
                f"families {sorted({j.family for j in part})}"
            )
        for job in jobs:
            print(f"{job.case_id} expected {job.expected_s:.0f}s: {shlex.join(job.args)}")
        return 0
    return _run(jobs, args, out, skipped=skipped)


def _main_history(args: argparse.Namespace, out: Path) -> int:
    """``--history``: per release the payload to build and its cases; with ``--vllm-version``, run them."""
    # A run serves the installed vLLM; a dry run without --vllm-version shows every release.
    version = args.vllm_version or (None if args.dry_run else releases.installed_version())
    versions = [version] if version else list(history_plan.HISTORY_RELEASES)
    costs = expected_costs()
    plans = history_plan.history_plans(
        versions,
        report_dir=out / "reports",
        costs=costs,
        measured=measured_check_s(),
        gsm8k_dir=args.gsm8k_dir,
        server_args=args.server_args,
        parallel=args.parallel,
        frontends=[f.strip() for f in args.history_frontends.split(",") if f.strip()],
    )
    if not version:
        print("\n".join(history_plan.describe(plans)))
        return 0
    (only,) = plans
    args.vllm_version = version
    # A release's cases dealt over --parts calls like the matrix's; this call runs --part.
    parts = split_parts(only.jobs, args.parts, args.parallel, args.setup_s, costs)
    jobs = _controls(_only(parts[args.part - 1], args.only), args, version)
    if args.dry_run:  # the release's plan, then what this call would run
        print("\n".join(history_plan.describe(plans)))
        for job in jobs:
            print(f"{job.case_id} expected {job.expected_s:.0f}s: {shlex.join(job.args)}")
        return 0
    return _run(jobs, args, out, skipped=only.skipped)


def _main_real(args: argparse.Namespace, out: Path) -> int:
    """``--families real``: upstream's models at real size (``real_plan``), dealt by GPU memory."""
    from . import real_plan, real_volume, tables

    rows = tables.newest_real([(run, *tables.load(run)) for run in tables.REAL_PROOF_RUNS])
    plans = real_volume.volume_plans(rows) if args.volume else None
    jobs = real_plan.plan_real(
        report_dir=out / "reports",
        gsm8k_dir=args.gsm8k_dir,
        num_questions=args.num_questions,
        kv_gib=_kv_overrides(args.kv_gib),
        mutations=not args.no_mutations,
        volume=plans,
    )
    jobs = _only(jobs, args.only)
    mem = args.gpu_mem_gib or real_plan.H200_GIB
    slots, left = real_plan.best_deal(jobs, calls=args.parts, setup_s=args.setup_s, gpu_mem_gib=mem)
    if args.dry_run:
        print("\n".join(real_plan.describe(slots, left, calls=args.parts, setup_s=args.setup_s)))
        for line in real_volume.describe(plans) if plans else ():
            print(f"  volume {line}")
        for job in jobs:
            print(f"  args {job.case_id}: {shlex.join(job.args)}")
        return 0
    # This call runs its share first, then whatever the estimates put later, while the deadline allows.
    mine = [s.job for s in slots if s.call == args.part]
    later = [j for j in jobs if j.case_id not in {m.case_id for m in mine}]
    done = {p.stem for p in (out / "reports").glob("*.json")}
    return _run([j for j in (*mine, *later) if j.case_id not in done], args, out, gpu_mem_gib=mem)


def _only(jobs: Sequence[Job], only: str) -> list[Job]:
    """``--only a,b``: the jobs whose case id contains one of the comma-separated parts (all without it); a
    part ending in ``$`` must end the id (``tiny-llama-simple-python$`` is not its catalogue)."""
    wanted = [w.strip() for w in only.split(",") if w.strip()]

    def matches(w: str, case_id: str) -> bool:
        return case_id.endswith(w[:-1]) if w.endswith("$") else w in case_id

    return [j for j in jobs if not wanted or any(matches(w, j.case_id) for w in wanted)]


def _controls(jobs: Sequence[Job], args: argparse.Namespace, version: str | None) -> list[Job]:
    """``--uninstrumented``, ``--unpoisoned``: each job's control in its place; an uninstrumented one cuts its
    boundary probes against those of the case's newest committed report on ``version``."""
    if args.unpoisoned:
        return [unpoisoned(j) for j in jobs]
    if not args.uninstrumented:
        return list(jobs)
    controls = []
    for job in jobs:
        sizes = recorded_boundary_sizes(job.case_id, version or "")
        if not sizes:
            raise SystemExit(
                f"--uninstrumented: no committed report of {job.case_id} on vLLM {version} to take its "
                "boundary probes from; run the instrumented case first and collect it"
            )
        controls.append(uninstrumented(job, sizes))
    return controls


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


def _run(
    jobs: Sequence[Job],
    args: argparse.Namespace,
    out: Path,
    gpu_mem_gib: float | None = None,
    skipped: Sequence[tuple[str, str]] = (),
) -> int:
    env = dict(os.environ)
    # Engine processes import gpu_tests.kv_proof (the instruments) from the repository root.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    # A family an earlier call on this machine compiled starts warm: its cases are expected so.
    cache_root = Path(env.get("VLLM_CACHE_ROOT") or Path.home() / ".cache" / "vllm")
    jobs = warm(jobs, compiled_families(cache_root))
    t0 = time.monotonic()
    results = run_jobs(
        jobs,
        out=out,
        parallel=args.parallel,
        deadline_s=args.deadline_s,
        launcher=default_launcher(env, gpu_count()),
        gpu_mem_gib=gpu_mem_gib,
    )
    mark_compiled(cache_root, {r.job.family for r in results if r.report and r.report.get("iterations")})
    summary = summarize(results, time.monotonic() - t0, out / "reports")
    summary["part"] = f"{args.part}/{args.parts}"
    summary["vllm_version"] = args.vllm_version
    summary["skipped"] = [{"case_id": c, "reason": why} for c, why in skipped]
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
