"""Which vLLM releases serve which route, on each frontend: the support matrix drawn from the recorded
fixtures (`rust_fixtures/`), shipped as `route_support.json` beside this module.

`make figures` writes the file from the fixture tree (`tools.fixtures.support`); a test
fails while it is out of step. The errors of a route the connected release does not serve name the first
release that serves it (`added_in`); `vllm-devclient support` prints the matrix.

Format 1: `releases` (oldest first), `frontends`, `notes` (each release change's words, once), and `routes`:
"METHOD /path" -> frontend -> release -> null (nothing recorded) or a cell: `{"status": "served"}`,
`{"status": "absent", "http": 404}`, or `{"status": "differs", "how": [indexes into notes],
"scenarios": [...]}`; and `body_limits`: frontend -> release -> the request-body limit measured (bytes, null
for none found; `vllm_devclient.body_limits` reads it).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

__all__ = ["FORMAT", "Cell", "SupportMatrix", "added_in", "load_support", "markdown", "parse"]

FORMAT = 1
DATA = "route_support.json"

Status = Literal["served", "absent", "differs"]


@dataclass(frozen=True)
class Cell:
    """One route on one release and frontend: `served`, `absent` (`http`: the 404 or 405 it answered) or
    `differs` (`how`: what the release does instead, one line per change)."""

    status: Status
    http: int | None = None
    how: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.status == "absent":
            return f"absent ({self.http})"
        return self.status


@dataclass(frozen=True)
class SupportMatrix:
    """Route ("METHOD /path") x frontend x release -> Cell, None where nothing was recorded."""

    releases: tuple[str, ...]
    frontends: tuple[str, ...]
    routes: Mapping[str, Mapping[str, Mapping[str, Cell | None]]]
    raw: Mapping[str, Any]

    def first_served(self, route: str, frontend: str) -> str | None:
        """The first release from which `route` is served on `frontend` through the newest one (served or
        differs, not absent), or None when the newest release does not serve it either."""
        cells = self.routes.get(route, {}).get(frontend)
        if not cells:
            return None
        first = None
        for release in self.releases:
            cell = cells.get(release)
            if cell is None:
                continue
            first = None if cell.status == "absent" else (first or release)
        return first

    def added_in(self, route: str, frontend: str) -> str | None:
        """`first_served`, when an older recorded release lacks the route on `frontend` (a 404 there means
        the release is too old); None for a route served by every recorded release."""
        first = self.first_served(route, frontend)
        cells = self.routes.get(route, {}).get(frontend, {})
        recorded = [r for r in self.releases if cells.get(r) is not None]
        return first if first is not None and recorded and first != recorded[0] else None


def _cell(raw: Mapping[str, Any] | None, notes: list[str]) -> Cell | None:
    if raw is None:
        return None
    return Cell(raw["status"], raw.get("http"), tuple(notes[i] for i in raw.get("how", ())))


def parse(data: Mapping[str, Any]) -> SupportMatrix:
    """The matrix of a `route_support.json` document; a format this SDK does not know is refused."""
    if data.get("format") != FORMAT:
        raise ValueError(f"route support data of format {data.get('format')!r}; this SDK reads {FORMAT}")
    notes = list(data["notes"])
    return SupportMatrix(
        releases=tuple(data["releases"]),
        frontends=tuple(data["frontends"]),
        routes={
            route: {fe: {rel: _cell(c, notes) for rel, c in cells.items()} for fe, cells in per.items()}
            for route, per in data["routes"].items()
        },
        raw=data,
    )


@functools.cache
def load_support() -> SupportMatrix:
    """The shipped matrix."""
    text = resources.files(__package__ or "vllm_devclient").joinpath(DATA).read_text(encoding="utf-8")
    return parse(json.loads(text))


def added_in(method: str, path: str, frontend: str) -> str | None:
    """The release that added METHOD path on `frontend` (see `SupportMatrix.added_in`)."""
    try:
        matrix = load_support()
    except (OSError, ValueError, KeyError):  # a broken install must not hide the server's error
        return None
    return matrix.added_in(f"{method.upper()} {path}", frontend)


def markdown(matrix: SupportMatrix, frontend: str) -> str:
    """One frontend's matrix as a Markdown table: a row per route, a column per release; `differs` cells
    are numbered, and the notes under the table say how."""
    notes: list[str] = []
    lines = [
        "| route | " + " | ".join(matrix.releases) + " |",
        "| --- |" + " --- |" * len(matrix.releases),
    ]
    for route, per in matrix.routes.items():
        cells = []
        for release in matrix.releases:
            cell = per.get(frontend, {}).get(release)
            if cell is None:
                cells.append("-")
            elif cell.status == "differs":
                note = "; ".join(cell.how)
                if note not in notes:
                    notes.append(note)
                cells.append(f"differs [{notes.index(note) + 1}]")
            else:
                cells.append(str(cell))
        lines.append(f"| `{route}` | " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- [{i}] {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(lines)
