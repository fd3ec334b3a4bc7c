"""Commit a device run: its reports with the device's own verdicts, compact, with the run's calls and timings.

    python -m gpu_tests.runner.collect --name kv-proof-2026-12-01 OUT1/matrix OUT2/matrix
    python -m gpu_tests.runner.collect --rejudge gpu_tests/results/*/

Each argument is a ``matrix`` folder a ``h200.sh`` call left (``results-partK.tgz`` unpacked): its
``reports/*.json``, ``matrix_summary_part*.json`` and ``call_part*.json``. Writes
``gpu_tests/results/NAME/<case>.json.xz`` (a later part's report of the same case wins; ``read_report`` reads
it) and ``run.json`` (the vLLM versions and judge commits of its reports, each report's verdict, the calls:
setup and wall seconds, the runner's summary rows; the cases the release could not serve, with why). Reports
keep the verdicts the device's judge gave (fixed before the run) and are compacted: a load plan keeps its GPU
block ids only where its probe was not answered alike (the evidence a defect needs); every other measurement
stays. ``--rejudge`` judges committed runs again after the judge changed, rewriting
each report whose verdicts moved; it may add information, never turn a committed failure into a pass
(``judge.rejudge`` keeps the device's failure).
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_tests.offload_check.judge import rejudge
from gpu_tests.offload_check.report import OffloadCheckReport

RESULTS = Path(__file__).resolve().parents[1] / "results"
# A run's reports: ``<case>.json.xz`` (a real-size report holds its 200 answers' texts, about 1.7 MB; xz keeps
# the tree small enough to travel beside a payload part) or ``<case>.json`` (older runs).
SUFFIXES = (".json.xz", ".json")


def report_paths(folder: Path) -> list[Path]:
    """The committed reports of a run folder (not its ``run.json``), sorted by case."""
    paths = [p for p in folder.iterdir() if p.name.endswith(SUFFIXES) and p.name != "run.json"]
    return sorted(paths, key=lambda p: p.name.removesuffix(".xz"))


def _read_bytes(path: Path) -> bytes:
    return lzma.decompress(path.read_bytes()) if path.name.endswith(".xz") else path.read_bytes()


def read_report(path: Path) -> OffloadCheckReport:
    return OffloadCheckReport.model_validate_json(_read_bytes(path))


def compact(report: OffloadCheckReport) -> OffloadCheckReport:
    """``report`` without the GPU block ids of loads whose probe the reload answered like its reference."""
    iterations = []
    for it in report.iterations:
        reload = it.runs.get("reload")
        request_of = {a.probe: a.request_id for a in reload.answers} if reload else {}
        keep = {request_of.get(c.probe) for c in it.comparisons if c.verdict != "agree"}
        loads = [p if p.request_id in keep else p.model_copy(update={"gpu_block_ids": []}) for p in it.loads]
        iterations.append(it.model_copy(update={"loads": loads}))
    return report.model_copy(update={"iterations": iterations})


def collect(name: str, folders: Sequence[Path], results: Path = RESULTS) -> dict[str, Any]:
    out = results / name
    out.mkdir(parents=True, exist_ok=True)
    reports: dict[str, OffloadCheckReport] = {}
    calls: list[dict[str, Any]] = []
    for folder in folders:
        for path in sorted((folder / "reports").glob("*.json")):
            data = json.loads(path.read_text())
            if data.get("format") != 2:
                continue
            # The device's verdicts, as its judge gave them: collecting never judges again.
            reports[path.stem] = compact(OffloadCheckReport.model_validate(data))
        for call in sorted(folder.glob("call_part*.json")):
            entry = json.loads(call.read_text())
            summary = folder / f"matrix_summary_part{entry.get('part', '1')}.json"
            if summary.exists():
                entry["summary"] = json.loads(summary.read_text())
            if entry not in calls:
                calls.append(entry)
    for case_id, report in sorted(reports.items()):
        write_report(out / f"{case_id}.json.xz", report)
    skipped = {s["case_id"]: s for c in calls for s in c.get("summary", {}).get("skipped", [])}
    run = {
        "name": name,
        "vllm_versions": sorted({r.vllm_version or "unknown" for r in reports.values()}),
        "judge_commits": sorted({r.judge_commit or "unknown" for r in reports.values()}),
        "verdicts": {case_id: r.status for case_id, r in sorted(reports.items())},
        "cases": sorted(reports),
        "calls": sorted(calls, key=lambda c: str(c.get("part"))),
        "skipped": [skipped[k] for k in sorted(skipped)],  # cases the release cannot serve, with why
    }
    (out / "run.json").write_text(json.dumps(run, indent=1) + "\n")
    return run


def write_report(path: Path, report: OffloadCheckReport) -> None:
    data = (report.model_dump_json() + "\n").encode()
    path.write_bytes(lzma.compress(data, preset=9) if path.name.endswith(".xz") else data)


def device_verdicts(meta: dict[str, Any]) -> dict[str, str]:
    """The verdicts a run's device gave, from its ``run.json``: those kept when the run was judged again, the
    map ``collect`` writes, else (older runs) the runner's summary rows ("killed" is the runner's word for a
    case it stopped: its report is an error)."""
    if "device_verdicts" in meta:
        return dict(meta["device_verdicts"])
    if "verdicts" in meta:
        return dict(meta["verdicts"])
    rows = [row for call in meta.get("calls", []) for row in (call.get("summary") or {}).get("cases", [])]
    return {row["case_id"]: "error" if row["status"] == "killed" else row["status"] for row in rows}


def summary_verdicts(meta: dict[str, Any]) -> dict[str, str]:
    """The device runner's own summary lines, as each runner call printed them (``calls[].summary``, copied
    from the device by ``collect``; no report is read): each case's last line, "killed" read as its report's
    "error"."""
    rows = [row for call in meta.get("calls", []) for row in (call.get("summary") or {}).get("cases", [])]
    return {row["case_id"]: "error" if row["status"] == "killed" else row["status"] for row in rows}


def rejudged_statuses(meta: dict[str, Any]) -> dict[str, str]:
    """The statuses a later judge moved (``collect --rejudge``), by case (never a failure into a pass)."""
    return {case: status for entry in meta.get("rejudged", []) for case, status in entry["verdicts"].items()}


def run_verdicts(meta: dict[str, Any]) -> dict[str, str]:
    """A run's verdicts as its committed reports hold them: the device's, with any later judging's on top."""
    return {**device_verdicts(meta), **meta.get("verdicts", {})}


def rejudge_run(folder: Path, judge_commit: str = "unknown") -> list[str]:
    """Judge a committed run's reports again; rewrite those whose verdicts moved. Returns their names. Files
    that are not offload-check reports (another tool's run, as ``rl-*``) are left alone. Where a verdict
    moved, ``run.json`` keeps the device's (``device_verdicts``), holds the new ones (``verdicts``) and says
    which judge moved them (``rejudged``, with every report it rewrote), so that a report never differs from
    its run's record."""
    moved = []
    statuses: dict[str, str] = {}
    for path in report_paths(folder):
        data = json.loads(_read_bytes(path))
        if not isinstance(data, dict) or data.get("format") != 2 or "case_id" not in data:
            continue
        report = OffloadCheckReport.model_validate(data)
        judged = rejudge(report)
        if judged != report:
            write_report(path, judged)
            moved.append(path.name)
            if judged.status != report.status:
                statuses[judged.case_id] = judged.status
    # Every rewrite is recorded, a verdict moved or not (a later judge may only add a defect's name).
    if moved and (folder / "run.json").exists():
        meta = json.loads((folder / "run.json").read_text())
        if statuses:
            meta["device_verdicts"] = device_verdicts(meta)
            meta["verdicts"] = {**run_verdicts(meta), **statuses}
        meta.setdefault("rejudged", []).append(
            {"judge_commit": judge_commit, "verdicts": statuses, "reports": sorted(moved)}
        )
        (folder / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    return moved


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_tests.runner.collect", description=__doc__.split("\n")[0])
    p.add_argument("--name", help="the folder under gpu_tests/results/")
    p.add_argument("--rejudge", action="store_true", help="judge committed run folders again, in place")
    p.add_argument(
        "--judge-commit", default="unknown", help="with --rejudge: the judge's commit (git rev-parse HEAD)"
    )
    p.add_argument("folders", nargs="+", type=Path, help="matrix folders of the run's calls, in order")
    args = p.parse_args(argv)
    if args.rejudge:
        for folder in args.folders:
            moved = rejudge_run(folder, args.judge_commit)
            print(
                f"{folder}: {len(moved)} report(s) judged otherwise"
                + (f": {', '.join(moved)}" if moved else "")
            )
        return 0
    if not args.name:
        p.error("--name is required (or --rejudge with committed run folders)")
    run = collect(args.name, args.folders)
    print(f"{len(run['cases'])} reports, {len(run['calls'])} calls -> {RESULTS / args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
