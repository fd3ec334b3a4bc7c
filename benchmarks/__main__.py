"""Run every benchmark, print one table of ratios, and write the same numbers as JSON.

    python -m benchmarks [--quick] [--json PATH] [--only NAME ...]

`make bench` runs them all and writes benchmarks/results.json (committed: the machine, the date, every row
with its baseline and ratio); scripts/figures.py writes the docs' speed figures from it.

Benchmarks are the modules `benchmarks/bench_<name>.py`, each with `run(quick: bool = False) -> dict`; they
are imported one at a time, so one that is absent (not written yet) is reported as "missing" and one that
fails is reported as "error" without stopping the others. Exit status: 0 when every benchmark ran (goals
met or not: the table says which), 1 when one crashed, 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import math
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = ("overhead", "transport", "barrier", "import", "kv_events", "fleet", "reset_check")


def load(name: str) -> Any:
    """The benchmark module, or None when it does not exist (yet)."""
    module = f"{__package__ or 'benchmarks'}.bench_{name}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise


def run_one(name: str, quick: bool) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        module = load(name)
        if module is None:
            out: dict[str, Any] = {"name": name, "status": "missing", "rows": []}
        else:
            got = module.run(quick=quick)
            if not isinstance(got, dict):
                raise TypeError(f"bench_{name}.run() returned {type(got).__name__}, expected a dict")
            out = {"name": name, **got, "status": "ok"}
    except Exception as exc:
        out = {
            "name": name,
            "status": "error",
            "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc(),
            "rows": [],
        }
    out["seconds"] = round(time.perf_counter() - start, 2)
    return out


# ---- the table ---------------------------------------------------------------------------------------


def _num(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, int | float):
        return str(x)
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    mag = abs(x)
    if isinstance(x, int) or mag >= 100:
        return f"{x:.0f}"
    if mag >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}" if mag >= 1 else f"{x:.3f}"


def _med_p95(stats: dict[str, Any], unit: str) -> str:
    return f"{_num(stats['median'])} / {_num(stats['p95'])} {unit}".rstrip()


def _rows_of(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The result's rows; a result without rows (free-form dict) shows its top-level numbers instead."""
    rows = result.get("rows")
    if isinstance(rows, list) and (rows or result.get("status") != "ok"):
        return [r for r in rows if isinstance(r, dict)]
    skip = {"name", "status", "seconds", "method"}
    return [
        {"metric": key, "kind": "value", "value": val}
        for key, val in result.items()
        if key not in skip and isinstance(val, int | float | str)
    ]


def table_rows(results: Sequence[dict[str, Any]]) -> list[list[str]]:
    """One list of cells per table line, header first."""
    lines = [
        [
            "benchmark",
            "metric",
            "baseline (median / p95)",
            "SDK (median / p95)",
            "ratio",
            "delta",
            "goal",
            "ok",
        ]
    ]
    for res in results:
        name = str(res.get("name", "?"))
        status = res.get("status", "ok")
        if status != "ok":
            detail = (
                res.get("error", "no bench_" + name + ".py yet") if status != "missing" else "not present"
            )
            lines.append([name, status.upper(), str(detail)[:80], "", "", "", "", ""])
            continue
        for r in _rows_of(res):
            ok = r.get("ok")
            mark = "" if ok is None else ("yes" if ok else "NO")
            goal = str(r.get("goal") or "")
            if r.get("kind") == "compare":
                unit = str(r.get("unit", ""))
                delta = r.get("delta")
                lines.append(
                    [
                        name,
                        str(r["metric"]),
                        f"{r.get('baseline_name', '')}: {_med_p95(r['baseline'], unit)}",
                        _med_p95(r["sdk"], unit),
                        f"{_num(r['ratio'])}x",
                        f"{'+' if isinstance(delta, int | float) and delta >= 0 else ''}{_num(delta)} {unit}",
                        goal,
                        mark,
                    ]
                )
            else:
                shown = f"{_num(r.get('value'))} {r.get('unit') or ''}".rstrip()
                lines.append([name, str(r.get("metric", "")), "", shown, "", "", goal, mark])
    return lines


def render(results: Sequence[dict[str, Any]]) -> str:
    lines = table_rows(results)
    # Columns are capped so one long cell (a module list) overflows its own line instead of widening all.
    caps = (12, 56, 50, 24, 8, 12, 24, 3)
    widths = [min(max(len(line[i]) for line in lines), cap) for i, cap in enumerate(caps)]
    out = []
    for n, line in enumerate(lines):
        out.append(
            "  ".join(cell.ljust(w) if len(cell) <= w else cell for cell, w in zip(line, widths, strict=True))
        )
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(s.rstrip() for s in out)


# ---- JSON --------------------------------------------------------------------------------------------


def _clean(obj: Any) -> Any:
    """NaN/inf are not JSON: write null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _commit() -> str | None:
    """The checkout's commit, "+dirty" when the tree has changes; None outside a git checkout."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty.strip() else "")


def machine() -> dict[str, Any]:
    return {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
    }


def report(
    results: Sequence[dict[str, Any]], *, quick: bool, total_s: float, load: dict[str, Any] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = _clean(
        {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": _commit(),
            "machine": machine(),
            "quick": quick,
            "total_s": round(total_s, 2),
            # Ratios are measured side by side, but a loaded machine still widens the p95s: keep the context.
            "loadavg": load or {},
            "benchmarks": {str(r["name"]): r for r in results},
        }
    )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions: a fast, rougher pass")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write the numbers as JSON here")
    parser.add_argument(
        "--only",
        metavar="NAME",
        action="append",
        choices=BENCHMARKS,
        help="run only this benchmark (repeatable); default: all",
    )
    args = parser.parse_args(argv)
    names = args.only or list(BENCHMARKS)
    # The benchmarks measure the default transports (and name httpx where they use it): a transport chosen
    # for the whole environment would quietly swap the pools under the fleets.
    os.environ.pop("VLLM_DEVCLIENT_TRANSPORT", None)

    start = time.perf_counter()
    load: dict[str, Any] = {"start": _load()}
    results = []
    for name in names:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        res = run_one(name, args.quick)
        print(f"  {name}: {res['status']} in {res['seconds']:.1f} s", file=sys.stderr, flush=True)
        if res["status"] == "error":
            print(res["traceback"], file=sys.stderr)
        results.append(res)
    total = time.perf_counter() - start
    load["end"] = _load()

    print(render(results))
    print(
        f"\ntotal {total:.1f} s{' (--quick)' if args.quick else ''}; "
        f"load average (1/5/15 min) at start {load['start']}, at end {load['end']} on {os.cpu_count()} CPUs"
    )
    for res in results:
        method = str(res.get("method") or "").strip()
        if method:  # the first paragraph here; the JSON has it all
            print(f"- {res['name']}: {' '.join(method.split(chr(10) + chr(10))[0].split())}")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        out = report(results, quick=args.quick, total_s=total, load=load)
        args.json.write_text(json.dumps(out, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 1 if any(r["status"] == "error" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
