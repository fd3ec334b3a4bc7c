"""Markdown tables for gpu_tests/README.md from the JSON reports under gpu_tests/results/.

python -m gpu_tests.runner.tables gpu_tests/results
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def load(root: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(root.rglob("*.json")) if "summary" not in p.name]


def _cpu_groups(r: dict[str, Any]) -> str:
    ev = r.get("events") or {}
    kinds = {str(k): v for k, v in (ev.get("group_kinds") or {}).items()}
    parts = [
        f"g{g['group_idx']} {kinds.get(str(g['group_idx']), '?')[:4]} {g['stored_blocks']}"
        for g in ev.get("groups", [])
        if g["medium"] == "CPU"
    ]
    return ", ".join(parts) or "no CPU events"


def _matches(r: dict[str, Any]) -> str:
    cold, warm, floor = r.get("reload_vs_cold"), r.get("reload_vs_warm"), r.get("noise_floor")
    if not cold or not floor:
        return "-"
    best = max(cold["matches"], (warm or {}).get("matches", 0))
    return f"{best}/{cold['total']} vs {floor['matches']}"


def matrix_table(reports: Iterable[dict[str, Any]]) -> str:
    by_id = {r["case_id"]: r for r in reports}
    rows = [
        "| family (architecture) | GPUs | connector | frontend | status | external hits (reload) | "
        "CPU blocks stored per group (kind) | reload matches vs floor | "
        "mutation: matches, reload_proven | wall s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case_id, r in sorted(by_id.items()):
        if not case_id.startswith("tiny-") or case_id.endswith("mutation") or "-c8" in case_id:
            continue
        mut = by_id.get(f"{r['profile']}-offloading-python-mutation")
        mut_text = "-"
        if mut is not None and mut.get("reload_vs_cold"):
            proven = next((a["passed"] for a in mut["assertions"] if a["name"] == "reload_proven"), None)
            best = max(mut["reload_vs_cold"]["matches"], (mut.get("reload_vs_warm") or {}).get("matches", 0))
            mut_text = f"{best}/{mut['reload_vs_cold']['total']} ({mut['status']}), {proven}"
        elif mut is not None:
            mut_text = mut["status"]
        reload = (r.get("windows") or {}).get("reload") or {}
        hits = reload.get("external_prefix_cache_hits")
        status = r["status"]
        if r.get("error"):
            status += f": {r['error'].splitlines()[-1][:70]}"
        parallel = r["profile"].removeprefix(f"tiny-{r['family']}").lstrip("-")
        name = f"{r['family']} {parallel}".strip()
        rows.append(
            f"| {name} ({'/'.join(r['architectures'])}) | {r.get('gpus_used') or 1} | "
            f"{r['connector'].replace('Connector', '')} | "
            f"{r['frontend']} | {status} | {'-' if hits is None else int(hits)} | {_cpu_groups(r)} | "
            f"{_matches(r)} | {mut_text} | {r['timings'].get('case_s', 0):.0f} |"
        )
    return "\n".join(rows)


def agreement_table(reports: Iterable[dict[str, Any]]) -> str:
    rows = [
        "| model | batch invariant | questions | concurrency 1 | concurrency 8 | concurrency 64 | "
        "check passed | mutation fails | case wall s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    by_id = {r["case_id"]: r for r in reports}
    for case_id, r in sorted(by_id.items()):
        if "-c8" not in case_id or case_id.endswith("mutation"):
            continue
        cells = {}
        for row in r.get("agreement", []):
            seq = row.get("vs_sequential")
            text = f"{row['cold_vs_cold']['matches']}/{row['cold_vs_cold']['total']}"
            if seq is not None and row["concurrency"] != 1:
                text += f" (vs c1 {seq['matches']})"
            cells[row["concurrency"]] = text
        mut = by_id.get(f"{case_id}-mutation")
        rows.append(
            f"| {r['profile']} | {'yes' if 'bi' in case_id.split('-') else 'no'} | {r['num_questions']} | "
            f"{cells.get(1, '-')} | {cells.get(8, '-')} | {cells.get(64, '-')} | {r['status']} | "
            f"{mut['status'] == 'failed' if mut else '-'} | {r['timings'].get('case_s', 0):.0f} |"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    reports = load(Path(args[0] if args else "gpu_tests/results"))
    print(matrix_table(reports))
    print()
    print(agreement_table(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
