"""Printing a fleet command's outcome: `table` for people, `tsv` for awk, `json` (the envelope) for
programs.

table: one target prints its answer on stdout and any error on stderr; several print one row per target
(target, ok/FAIL, answer or short error, time) and "N of M targets ok" on stderr.
tsv: one line per target, no header: target, ok|FAIL, exit code, seconds, answer or error (one line).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import click
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..errors import (
    APIStatusError,
    BarrierTimeoutError,
    DevModeDisabledError,
    EngineCallError,
    RouteNotServedError,
)
from ..fleet import FleetResult, TargetOutcome
from ..transports.stacks import is_http_response
from ._envelope import dumps, jsonable

__all__ = ["print_fleet", "short_error", "summary_line", "tsv_cell"]


def summary_line(value: Any) -> str:
    """A one-line human rendering of any answer."""
    if value is None:
        return "done"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if is_http_response(value):
        return f"{value.status_code} {value.text[:200]}"
    if isinstance(value, BaseModel):
        data = value.model_dump(mode="json", exclude_none=True)
        return ", ".join(f"{k}={json.dumps(jsonable(v))}" for k, v in data.items()) or "done"
    return json.dumps(jsonable(value), separators=(",", ":"))


def short_error(error: BaseException) -> str:
    """One line for the table; -o json keeps the full message."""
    if isinstance(error, DevModeDisabledError):
        return f"dev mode off: {error.status_code} on {error.path}"
    if isinstance(error, RouteNotServedError):
        return f"route missing from this release: {error.status_code} on {error.path}"
    if isinstance(error, EngineCallError):
        return f"engine call {error.engine_method} failed: {error.engine_message}"
    if isinstance(error, APIStatusError):
        return f"{error.status_code} on {error.http_method} {error.path}: {error.message}"
    if isinstance(error, BarrierTimeoutError):
        return (
            f"barrier deadline passed after {error.waited_s:.1f}s: {error.attempts} attempts, "
            f"{error.engine_steps} engine steps, still success=false"
        )
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0] if lines else ''}"


def tsv_cell(text: str) -> str:
    """A value on one tab-free line."""
    return " ".join(text.split())


def _problem(outcome: TargetOutcome[Any], entry: Mapping[str, Any], *, short: bool) -> str:
    if outcome.error is not None:
        return short_error(outcome.error) if short else f"{type(outcome.error).__name__}: {outcome.error}"
    return str(entry["error"]["message"]) if entry.get("error") else ""


def print_fleet(
    doc: Mapping[str, Any],
    result: FleetResult[Any],
    render: Callable[[Any], str] | None,
    output: str,
) -> None:
    if output == "json":
        click.echo(dumps(doc))
        return
    render = render or summary_line
    if output == "tsv":
        for url, entry in doc["targets"].items():
            outcome = result[url]
            answer = render(outcome.value) if entry["ok"] else _problem(outcome, entry, short=True)
            mark = "ok" if entry["ok"] else "FAIL"
            click.echo(f"{url}\t{mark}\t{entry['exit_code']}\t{entry['elapsed_s']}\t{tsv_cell(answer)}")
        return
    terminal = Console().is_terminal
    # Piped output is not cut to 80 columns: a log keeps whole lines.
    out = Console(highlight=False, soft_wrap=len(result) == 1, width=None if terminal else 200)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if len(result) == 1:
        (url, entry), outcome = next(iter(doc["targets"].items())), next(iter(result.values()))
        if outcome.error is None:
            out.print(render(outcome.value), markup=False)
        if not entry["ok"]:
            err.print(Text(f"error: {url}: {_problem(outcome, entry, short=False)}", style="red"))
    else:
        table = Table(show_edge=False, pad_edge=False, box=None)
        for column in ("target", "", "answer", "time"):
            table.add_column(column, overflow="fold")
        for url, entry in doc["targets"].items():
            outcome = result[url]
            if entry["ok"]:
                badge, cell = Text("ok", style="green"), Text(render(outcome.value))
            else:
                badge, cell = Text("FAIL", style="bold red"), Text(_problem(outcome, entry, short=True))
            table.add_row(url, badge, cell, f"{outcome.elapsed_s * 1000:.0f} ms")
        out.print(table)
        failed = sum(1 for e in doc["targets"].values() if not e["ok"])
        line = f"{len(result) - failed} of {len(result)} targets ok"
        err.print(Text(line, style="red" if failed else "green"))
    if result.rollback is not None:
        undo = result.rollback
        err.print(f"rolled back: resumed {len(undo.ok)} paused targets: {', '.join(undo.ok) or '-'}")
        for url, error in undo.failed.items():
            err.print(Text(f"rollback failed, still paused: {url}: {short_error(error)}", style="red"))
