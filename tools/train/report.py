"""The train's report: what needs a person, in Markdown (no I/O here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .compare import Findings

__all__ = ["markdown"]


def _items(lines: Sequence[str], none: str, limit: int = 40) -> list[str]:
    if not lines:
        return [f"- {none}"]
    shown = [f"- {line}" for line in lines[:limit]]
    return shown + ([f"- ... and {len(lines) - limit} more"] if len(lines) > limit else [])


def _per_frontend(table: Mapping[str, Sequence[str]]) -> list[str]:
    return [f"{fe}: {', '.join(f'`{p}`' for p in paths) or 'none'}" for fe, paths in sorted(table.items())]


def markdown(found: Findings, *, timings: Mapping[str, float], facts: Mapping[str, str]) -> str:
    """The report of one train run: the stages' times, then each finding under its heading."""
    total = sum(timings.values())
    lines = [
        f"# Release train: vLLM {found.version} (against {found.previous})",
        "",
        *(f"- {k}: {v}" for k, v in facts.items()),
        f"- took {total:.0f} s: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()),
        f"- needs a person: {'yes' if found.needs_a_person else 'no'}",
        "",
        "## Frontends that did not start",
        *_items(
            [f"{fe}: {why.splitlines()[-1] if why else ''}" for fe, why in found.not_started.items()], "none"
        ),
        "",
        "## Support matrix and tables",
        *_items([f"not written again: {found.tables_error}"] if found.tables_error else [], "written again"),
        "",
        "## Routes served (read from the frontends)",
        *_items(
            [f"added on {line}" for line in _per_frontend(found.routes_added)], "no release before to compare"
        ),
        *_items([f"gone on {line}" for line in _per_frontend(found.routes_gone)], "none gone"),
        "",
        "## New routes no SDK method types (a route record to write)",
        *_items(_per_frontend(found.untyped_routes), "none"),
        "",
        "## Engine utilities the kit does not know (the scripted engine answers them nil)",
        *_items([f"`{u}`" for u in found.unknown_utilities], "none"),
        "",
        "## Answer shapes that changed (status and JSON shape, per exchange)",
        *_items(found.changed_shapes, "none"),
        "",
        "## Scenarios that miss the SDK's contract (a `Change` in tools/fixtures/history.py, or a fix)",
        *_items(found.contract_misses, "none"),
        "",
    ]
    return "\n".join(lines)
