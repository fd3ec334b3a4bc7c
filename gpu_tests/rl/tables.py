"""The figures of gpu_tests/rl/README.md, generated from the committed RL run (never written by hand).

    python -m gpu_tests.rl.tables            # rewrite the figures in gpu_tests/rl/README.md
    python -m gpu_tests.rl.tables --check    # exit 1 when a figure differs from the committed run

A figure sits between ``<!-- figure:NAME -->`` and ``<!-- /figure -->``; each is made from the newest
``gpu_tests/results/rl-*`` folder (``python -m gpu_tests.rl.collect`` writes it from a device call's
``results-rl.tgz``). Every cell is a report field or a count of them; a missing one reads "-".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gpu_tests.runner.tables import fill_figures, write_or_check

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
README = Path(__file__).resolve().parent / "README.md"
FRONTENDS = ("python", "rust")
NO_RUN = "No RL run is committed yet: `gpu_tests/runner/h200_rl.sh`, then `python -m gpu_tests.rl.collect`."

Run = Mapping[str, Any]  # "run": run.json; per frontend: {point file stem: its JSON}


def latest_run(results: Path = RESULTS) -> Path | None:
    runs = sorted(p for p in results.glob("rl-*") if (p / "run.json").is_file())
    return runs[-1] if runs else None


def load(folder: Path) -> dict[str, Any]:
    run: dict[str, Any] = {"run": json.loads((folder / "run.json").read_text()), "name": folder.name}
    for frontend in FRONTENDS:
        run[frontend] = {
            p.stem: json.loads(p.read_text()) for p in sorted((folder / frontend).glob("*.json"))
        }
    return run


def _cell(value: Any, fmt: str = "{}") -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict) and "error" in value:
        return "error"
    return fmt.format(value)


def _table(header: str, rows: list[list[str]]) -> str:
    """A Markdown table: `header` is its first row's cells, " | "-separated."""
    columns = header.split(" | ")
    lines = ["| " + header + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def _get(data: Any, *keys: Any) -> Any:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _step_error(run: Run, frontend: str, step: str) -> str | None:
    """The error type of a step that failed (steps.json), or why it was skipped; None when it went well."""
    for record in _get(run, frontend, "steps", "steps") or []:
        if record.get("step") == step and not record.get("ok"):
            return "skipped" if "skipped" in record else str(record.get("error", "failed")).split(":")[0]
    return None


def _outcome(run: Run, frontend: str, step: str, example: Any) -> str:
    """How an example run ended: ok, the error it recorded, or the step's own failure."""
    if example is None:
        return f"step failed: {_step_error(run, frontend, step) or 'not run'}"
    report = example.get("report") or {}
    if "failed" in report:
        return str(report["failed"]).split(":")[0]
    return "ok" if example.get("exit_code") == 0 else f"exit {example.get('exit_code')}"


def transfer_table(run: Run) -> str:
    """Point 1: what the sync sent and how long it took; whether the answers and weights changed."""
    rows = []
    for f in FRONTENDS:
        sync = _get(run, f, "point1_sync", "sync")
        r = _get(sync, "report") or {}
        compare = _get(run, f, "point1_compare", "compare", "report") or {}
        before, after = _get(r, "weights_before", "checksums"), _get(r, "weights_after", "checksums")
        rows.append(
            [
                f,
                _outcome(run, f, "point1.sync", sync),
                _cell(r.get("tensors")),
                _cell(r.get("bytes"), "{:,}"),
                _cell(r.get("batches")),
                _cell(r.get("send_s"), "{:.3f}"),
                _cell(r.get("post_s"), "{:.3f}"),
                _cell(r.get("flow_s"), "{:.3f}"),
                f"{r['answers_changed']}/{len(r['answers_before'])}"
                if r.get("answers_changed") is not None
                else "-",
                _cell(before != after if before and after else None),
                _cell(compare.get("answers_equal")),
                _cell(compare.get("weights_equal")),
            ]
        )
    header = (
        "frontend | sync | tensors | bytes | batches | send s | post s | flow s | "
        "answers changed | weights changed | = fresh server: answers | weights"
    )
    return _table(header, rows)


def failed_send_table(run: Run) -> str:
    """Point 1's failure case: a send that fails, with and without the finish that restores the weights."""
    rows = []
    for f in FRONTENDS:
        failure = _get(run, f, "point1_failed_send")
        if not failure:
            continue
        then = failure.get("then_finish")
        if then is None:
            error = _step_error(run, f, "point1.failed_send_then_finish") or "not run"
            rows.append([f, "send fails, then finish_weight_update", f"step failed: {error}", "-", "-"])
        else:
            send = str(then["failed"]).split(":")[0] if then.get("failed") else "did not fail"
            rows.append([f, "send fails, then finish_weight_update", send, _cell(then.get("paused_after")),
                         _cell(then.get("answers_equal"))])  # fmt: skip
        example = failure.get("example")
        r = _get(example, "report") or {}
        after = r.get("answers_after")
        equal = after == r.get("answers_before") if isinstance(after, list) else after
        send = _outcome(run, f, "point1.failed_send_example", example)
        rows.append(
            [f, "send fails (the example's --fail-send)", send, _cell(r.get("paused_after")), _cell(equal)]
        )
        server = failure.get("server_after") or {}
        rows.append([f, "server after both", "-", "-", _cell(server.get("health"))])
    return _table("frontend | case | send | paused after | answers equal (health)", rows)


def _mib(reading: Any) -> str:
    if not isinstance(reading, Mapping) or reading.get("freed_mib") is None:
        return "-"
    suffix = "" if reading.get("source") == "process tree" else " (device)"
    return f"{reading['freed_mib']:.0f}{suffix}"


def sleep_table(run: Run) -> str:
    """Point 2: GPU memory freed by each level (the server's process tree), taken back by each wake."""
    rows = []
    for f in FRONTENDS:
        levels = _get(run, f, "point2_sleep", "levels") or {}
        skipped = _get(run, f, "point2_sleep", "skipped")
        if skipped:
            rows.append([f, "-", f"skipped: {skipped}", "-", "-", "-", "-"])
        for level in sorted(levels):
            r = levels[level] or {}
            rows.append(
                [
                    f,
                    str(level),
                    _mib(r.get("freed")),
                    _mib(r.get("retaken_by_weights")),
                    _mib(r.get("retaken_by_wake")),
                    _cell(r.get("is_sleeping_after_partial_wake")),
                    _cell(r.get("answers_equal")),
                ]
            )
    header = (
        "frontend | level | MiB freed asleep | MiB back: wake weights | "
        "MiB back: whole wake | sleeping after partial wake | answers equal"
    )
    return _table(header, rows)


def pause_table(run: Run) -> str:
    """Point 3: per pause mode, what became of the requests in flight, against the SDK's documentation."""
    rows = []
    for f in FRONTENDS:
        modes = _get(run, f, "point3_pause", "modes") or {}
        for mode, data in modes.items():
            r = (data or {}).get("row") or {}
            rows.append(
                [
                    f,
                    mode,
                    _cell(r.get("in_flight")),
                    _cell(r.get("finished")),
                    _cell(r.get("aborted")),
                    _cell(r.get("kept")),
                    _cell(r.get("expected")),
                    _cell(r.get("matches_docs")),
                    _cell(r.get("running_after_paused"), "{:.0f}"),
                    _cell(r.get("until_paused_s"), "{:.2f}"),
                    _cell(r.get("finished_during_hold")),
                    _cell(r.get("new_request_after_resume")),
                ]
            )
    header = (
        "frontend | mode | in flight | finished | aborted | kept | SDK docs say | match | "
        "running once paused | s to paused | done while held | served after resume"
    )
    return _table(header, rows)


def rpc_table(run: Run) -> str:
    """Point 4: `collective_rpc("rank_info")` per frontend, with the answer's type."""
    types = {f: _get(run, f, "point4_rpc", "rank_info", "types") for f in FRONTENDS}
    same = types["python"] == types["rust"] and types["python"] is not None
    rows = []
    for f in FRONTENDS:
        results = _get(run, f, "point4_rpc", "rank_info", "results")
        ranks = ", ".join(str(_get(r, "rank")) for r in results) if isinstance(results, list) else "-"
        rows.append(
            [
                f,
                _cell(len(results) if isinstance(results, list) else None),
                ranks,
                f"`{json.dumps(types[f])}`" if types[f] is not None else "-",
                _cell(same),
            ]
        )
    return _table("frontend | ranks | rank ids | answer type | same type on both", rows)


TABLES: dict[str, Callable[[Run], str]] = {
    "rl-transfer": transfer_table,
    "rl-failed-send": failed_send_table,
    "rl-sleep": sleep_table,
    "rl-pause": pause_table,
    "rl-rpc": rpc_table,
}


def render(text: str, run: Run | None) -> str:
    """`text` with every marked figure made again from `run` (None: no run committed)."""

    def figure(name: str) -> Callable[[], str]:
        if run is None:
            return lambda: NO_RUN
        return lambda: f"From `gpu_tests/results/{run['name']}`.\n\n{TABLES[name](run)}"

    return fill_figures(text, {name: figure(name) for name in TABLES})


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gpu_tests.rl.tables", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when the README differs from the run")
    args = p.parse_args(argv)
    folder = latest_run()
    new = render(README.read_text(), load(folder) if folder else None)
    return write_or_check(README, new, check=args.check, remake="python -m gpu_tests.rl.tables")


if __name__ == "__main__":
    sys.exit(main())
