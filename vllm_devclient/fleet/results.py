"""What a fan-out gives back: an outcome per target (`TargetOutcome`), all of them (`FleetResult`), and the
all-or-nothing error (`FleetError`).
"""

from __future__ import annotations

from collections.abc import (
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import DevClientError

__all__ = ["FleetError", "FleetResult", "OnResult", "TargetOutcome"]

T = TypeVar("T")


@dataclass(frozen=True)
class TargetOutcome(Generic[T]):
    """What one target answered: a value, or the error the client raised for it."""

    url: str
    value: T | None
    error: DevClientError | None
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> T:
        """The value, or raise this target's error."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # None is a valid T for None-returning methods


class FleetResult(Mapping[str, TargetOutcome[T]]):
    """Target URL -> outcome, for every target, in the fleet's order (not completion order)."""

    def __init__(
        self,
        outcomes: Iterable[TargetOutcome[T]],
        *,
        operation: str,
        rollback: FleetResult[Any] | None = None,
    ) -> None:
        self._outcomes = {o.url: o for o in outcomes}
        self.operation = operation
        # Set by pause(rollback=True) when it resumed the targets it had paused.
        self.rollback = rollback

    def __getitem__(self, url: str) -> TargetOutcome[T]:
        return self._outcomes[url.rstrip("/")]

    def __iter__(self) -> Iterator[str]:
        return iter(self._outcomes)

    def __len__(self) -> int:
        return len(self._outcomes)

    def __repr__(self) -> str:
        return f"FleetResult({self.operation}: {len(self.ok)} ok, {len(self.failed)} failed)"

    @property
    def ok(self) -> dict[str, T]:
        """URL -> value for the targets that succeeded."""
        return {url: o.value for url, o in self._outcomes.items() if o.error is None}  # type: ignore[misc]

    @property
    def failed(self) -> dict[str, DevClientError]:
        """URL -> error for the targets that failed."""
        return {url: o.error for url, o in self._outcomes.items() if o.error is not None}

    @property
    def all_ok(self) -> bool:
        return not self.failed

    def raise_for_errors(self) -> FleetResult[T]:
        """All or nothing: raise one FleetError naming every failed target; return self when none failed."""
        if self.failed:
            raise FleetError(self)
        return self


# How many of the targets that went through a FleetError's message names (`.result` holds them all).
_OK_SHOWN = 8


class FleetError(DevClientError):
    """At least one target failed. `.result` holds every target's outcome (`.result.ok`: the values where
    the call went through); `.errors` maps each failed target's URL to its error; `.operation` names the
    call."""

    def __init__(self, result: FleetResult[Any]) -> None:
        self.result = result
        self.errors: dict[str, DevClientError] = result.failed
        self.operation = result.operation
        lines = [
            f"{result.operation} failed on {len(self.errors)} of {len(result)} targets:",
            *(f"  {url}: {type(err).__name__}: {err}" for url, err in self.errors.items()),
        ]
        if result.ok:
            shown = list(result.ok)[:_OK_SHOWN]
            more = f", and {len(result.ok) - len(shown)} more" if len(result.ok) > len(shown) else ""
            lines.append(f"ok on {len(result.ok)} of {len(result)} targets: {', '.join(shown)}{more}")
        if result.rollback is not None:
            undo = result.rollback
            lines.append(f"rolled back with {undo.operation} on {len(undo)} targets:")
            lines += [f"  {url}: ok" for url in undo.ok]
            lines += [f"  {url}: {type(e).__name__}: {e}" for url, e in undo.failed.items()]
        super().__init__("\n".join(lines))


OnResult = Callable[[TargetOutcome[Any]], None]
