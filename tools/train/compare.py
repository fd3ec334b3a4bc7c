"""A release against the one before: what changed and what a person must look at (no I/O here).

Input: both releases' surveys and recordings (fixture documents), the SDK's route table and the engine
utilities the kit answers. Output: one `Findings`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .survey import Survey

__all__ = ["Findings", "compare", "shape", "shape_changes"]

Fixture = Mapping[str, Any]


@dataclass
class Findings:
    version: str
    previous: str
    not_started: dict[str, str] = field(default_factory=dict)
    routes_added: dict[str, list[str]] = field(default_factory=dict)
    routes_gone: dict[str, list[str]] = field(default_factory=dict)
    untyped_routes: dict[str, list[str]] = field(default_factory=dict)
    unknown_utilities: list[str] = field(default_factory=list)
    changed_shapes: list[str] = field(default_factory=list)
    contract_misses: list[str] = field(default_factory=list)
    # Why the support matrix and tables could not be written again (set by the train after comparing).
    tables_error: str | None = None

    @property
    def needs_a_person(self) -> bool:
        return any(
            (
                self.tables_error,
                self.not_started,
                self.untyped_routes,
                self.unknown_utilities,
                self.changed_shapes,
                self.contract_misses,
            )
        )


def shape(value: Any) -> Any:
    """A JSON value's shape: the type of each leaf, the keys of each object, a list's first element."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def _answers(doc: Fixture) -> list[Any]:
    return [
        (ex.get("response", {}).get("status"), shape(ex.get("response", {}).get("json")))
        for ex in doc.get("exchanges", [])
    ]


def _by_key(fixtures: Iterable[Fixture]) -> dict[tuple[str, str], Fixture]:
    return {(str(d["frontend"]), str(d["scenario"])): d for d in fixtures}


def _changed_shapes(new: Iterable[Fixture], old: Iterable[Fixture]) -> list[str]:
    before = _by_key(old)
    out = []
    for key, doc in sorted(_by_key(new).items()):
        if key in before and _answers(doc) != _answers(before[key]):
            was, now = _answers(before[key]), _answers(doc)
            out.append(f"{key[0]} `{key[1]}`: {_diff(was, now)}")
    return out


def _diff(was: list[Any], now: list[Any]) -> str:
    for i, ((status_a, a), (status_b, b)) in enumerate(zip(was, now, strict=False)):
        if (status_a, a) != (status_b, b):
            status = f"HTTP {status_a}" if status_a == status_b else f"HTTP {status_a} -> {status_b}"
            return f"exchange {i + 1}: {status}" + (f"; {', '.join(shape_changes(a, b))}" if a != b else "")
    return f"{len(was)} exchanges -> {len(now)}"


def shape_changes(was: Any, now: Any, path: str = "") -> list[str]:
    """What differs between two shapes, key by key: `+key` added, `-key` gone, `key: A -> B` retyped."""
    if isinstance(was, dict) and isinstance(now, dict):
        out = [f"+{path}{k}" for k in sorted(now.keys() - was.keys())]
        out += [f"-{path}{k}" for k in sorted(was.keys() - now.keys())]
        for k in sorted(was.keys() & now.keys()):
            out += shape_changes(was[k], now[k], f"{path}{k}.")
        return out
    if isinstance(was, list) and isinstance(now, list) and was and now:
        return shape_changes(was[0], now[0], f"{path.rstrip('.')}[].")
    if was != now:
        return [f"{path.rstrip('.') or 'body'}: {_kind(was)} -> {_kind(now)}"]
    return []


def _kind(shape_of: Any) -> str:
    return "object" if isinstance(shape_of, dict) else "list" if isinstance(shape_of, list) else str(shape_of)


def _routes(survey: Survey | None, frontend: str) -> set[str]:
    fe = survey.frontends.get(frontend) if survey else None
    return set(fe.routes) if fe and fe.started else set()


def compare(
    new: Survey,
    old: Survey | None,
    new_fixtures: Sequence[Fixture],
    old_fixtures: Sequence[Fixture],
    *,
    sdk_paths: Iterable[str],
    known_utilities: Iterable[str],
) -> Findings:
    found = Findings(new.version, old.version if old else "?")
    typed = set(sdk_paths)
    known = set(known_utilities) | {m for d in old_fixtures for m, _ in d.get("engine_calls", [])}
    called: set[str] = {m for d in new_fixtures for m, _ in d.get("engine_calls", [])}
    for name, fe in sorted(new.frontends.items()):
        if not fe.started:
            found.not_started[name] = fe.error or "did not start"
            continue
        called |= set(fe.startup_utilities)
        now, before = set(fe.routes), _routes(old, name)
        if old is not None:
            found.routes_added[name] = sorted(now - before)
            found.routes_gone[name] = sorted(before - now)
        new_paths = now - before if old is not None else now
        found.untyped_routes[name] = sorted(p for p in new_paths if p not in typed)
    found.untyped_routes = {k: v for k, v in found.untyped_routes.items() if v}
    if old is not None:
        known |= {u for fe in old.frontends.values() for u in fe.startup_utilities}
    found.unknown_utilities = sorted(called - known)
    found.changed_shapes = _changed_shapes(new_fixtures, old_fixtures)
    found.contract_misses = sorted(
        f"{d['frontend']} `{d['scenario']}`"
        for d in new_fixtures
        if not d.get("meets_current_contract", True)
    )
    return found
