"""The RL runner's steps: each one timed and recorded, a failure recorded with its error, the run going on.

A device call gets one shot, so nothing a step raises ends the run: `Steps.run(name, fn)` returns what `fn`
returned, or None after recording the error. The deadline is the run's: a step that needs more seconds than
are left is recorded as skipped (with why) and not started. The clock is passed in (tests use their own).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Deadline:
    """Seconds left before the run must stop starting work."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.end = clock() + seconds

    def left(self) -> float:
        return self.end - self.clock()


def error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Steps:
    """The timed record of one frontend's (or the run's) steps, in order; safe to share between threads."""

    def __init__(self, deadline: Deadline, *, log: Callable[[str], None] = print) -> None:
        self.deadline = deadline
        self.records: list[dict[str, Any]] = []
        self._log = log
        self._lock = threading.Lock()

    def _add(self, record: dict[str, Any]) -> None:
        with self._lock:
            self.records.append(record)
        status = "ok" if record.get("ok") else ("skipped" if "skipped" in record else "FAILED")
        detail = record.get("error") or record.get("skipped") or ""
        self._log(f"[{record['step']}] {status} {record.get('s', 0):.1f} s {detail}".rstrip())

    def skip(self, name: str, why: str) -> None:
        self._add({"step": name, "ok": False, "skipped": why})

    def run(self, name: str, fn: Callable[[], T], *, need_s: float = 0.0) -> T | None:
        """`fn()`, timed and recorded; None (recorded) when it raised or did not fit before the deadline."""
        left = self.deadline.left()
        if left < need_s:
            self.skip(name, f"needs ~{need_s:.0f} s, {left:.0f} s left")
            return None
        start = self.deadline.clock()
        try:
            value = fn()
        except (Exception, SystemExit) as exc:  # an argparse exit of the example too: the run goes on
            self._add(
                {
                    "step": name,
                    "ok": False,
                    "s": self.deadline.clock() - start,
                    "error": error_text(exc),
                    "traceback": traceback.format_exc(limit=6),
                }
            )
            return None
        self._add({"step": name, "ok": True, "s": self.deadline.clock() - start})
        return value

    def failed(self) -> list[str]:
        return [r["step"] for r in self.records if not r.get("ok")]
