"""Expectations: what a scenario's SDK call must give (:class:`Expect`, built with `returns`,
`returns_model`, `raises`) and which engine calls it must cause (`call`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine_protocol import EngineCall
from .outcome import jsonable, resolve, short, type_name

__all__ = [
    "Check",
    "EngineCallSpec",
    "Expect",
    "call",
    "observed_calls",
    "raises",
    "returns",
    "returns_model",
]


@dataclass(frozen=True)
class Check:
    """A property of the outcome that is not a plain value (a type, a range); `test` gets the outcome."""

    description: str
    test: Callable[[Any], bool]


@dataclass(frozen=True)
class Expect:
    """What the SDK call must give: the exact class name of the result or exception, and attribute values.

    `fields` maps an attribute path to its value: "" is the result itself, "a.b.0" walks attributes, keys
    and indexes, "len(data)" is a length.
    """

    type: str
    fields: Mapping[str, Any] = field(default_factory=dict)
    checks: tuple[Check, ...] = ()
    error: bool = False

    def problems(self, outcome: Any) -> list[str]:
        """Why `outcome` (a result, or the raised exception) does not meet this expectation."""
        got = type_name(outcome)
        out: list[str] = []
        if self.error != isinstance(outcome, BaseException) or got != self.type:
            what = "raise" if self.error else "return"
            return [f"expected to {what} {self.type}, got {got}: {short(outcome)}"]
        for path, want in self.fields.items():
            try:
                value = resolve(outcome, path)
            except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
                out.append(f"{path or 'value'}: cannot read it ({exc!r}) from {short(outcome)}")
                continue
            if jsonable(value) != jsonable(want) or type(value) is not type(want):
                out.append(f"{path or 'value'}: expected {want!r}, got {value!r}")
        for check in self.checks:
            try:
                passed = check.test(outcome)
            except Exception as exc:
                passed = False
                out.append(f"check {check.description!r} raised {exc!r}")
                continue
            if not passed:
                out.append(f"check failed: {check.description} (outcome {short(outcome)})")
        return out

    def project(self, outcome: Any, paths: Sequence[str] | None = None) -> dict[str, Any]:
        """The outcome reduced to this expectation's type and fields, as JSON data (for comparing)."""
        values: dict[str, Any] = {}
        for path in paths if paths is not None else self.fields:
            try:
                values[path] = jsonable(resolve(outcome, path))
            except (AttributeError, KeyError, IndexError, TypeError, ValueError):
                values[path] = "<missing>"
        kind = "error" if isinstance(outcome, BaseException) else "result"
        return {"kind": kind, "type": type_name(outcome), "fields": values}


def returns(value: Any) -> Expect:
    """The call returns exactly `value` (a bool, int, str, list, dict or None)."""
    return Expect(type(value).__name__, {"": value})


def returns_model(type_name: str, fields: Mapping[str, Any] | None = None, *checks: Check) -> Expect:
    return Expect(type_name, dict(fields or {}), tuple(checks))


def raises(exc: type[BaseException], fields: Mapping[str, Any] | None = None, *checks: Check) -> Expect:
    return Expect(exc.__name__, dict(fields or {}), tuple(checks), error=True)


@dataclass(frozen=True)
class EngineCallSpec:
    """One engine call a scenario must cause: a utility method with its arguments, or an ADD request
    ("add_request", args = (max_tokens,))."""

    method: str
    args: tuple[Any, ...] = ()

    def as_json(self) -> list[Any]:
        return [self.method, jsonable(list(self.args))]


def call(method: str, *args: Any) -> EngineCallSpec:
    return EngineCallSpec(method, args)


def observed_calls(calls: Sequence[EngineCall]) -> list[list[Any]]:
    """The engine log as [method, args] pairs; an ADD is reduced to its max_tokens (the rest is noise)."""
    out: list[list[Any]] = []
    for c in calls:
        if c.kind == "add":
            sampling = c.args[1] if len(c.args) > 1 and isinstance(c.args[1], Mapping) else {}
            out.append(["add_request", [sampling.get("max_tokens")]])
        else:
            out.append([c.method, jsonable(list(c.args))])
    return out
