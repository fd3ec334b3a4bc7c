"""What a running command shows on a terminal (stderr, rich, never when piped or with --no-progress): how
many targets are done, the time left before --deadline, and the pending targets with their attempts.

    barrier  2/3 targets done  14.2 s left
      http://vllm-1.example:8000  attempt 7, last: success=false
      ... and 4 more pending

Nothing shows for a call that ends within `delay` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from ..fleet import TargetOutcome
from ._output import summary_line

__all__ = ["FleetProgress", "with_ticker"]

T = TypeVar("T")


@dataclass
class _Pending:
    attempts: int = 0
    last: str = ""


class FleetProgress:
    """The live display of one fleet call; `attempt_hook(url)` gives a client's `on_attempt` callback."""

    def __init__(
        self,
        label: str,
        urls: tuple[str, ...],
        *,
        deadline: float | None = None,
        enabled: bool = True,
        console: Console | None = None,
        delay: float = 0.3,
        shown: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.label = label
        self.total = len(urls)
        self.pending = {url: _Pending() for url in urls}
        self.deadline = deadline
        self.shown = shown
        self._clock = clock
        self._start = clock()
        self._show_at = self._start + delay
        self._enabled = enabled and self.console.is_terminal
        self._live: Live | None = None

    # ---- events ----

    def finished(self, outcome: TargetOutcome[Any]) -> None:
        self.pending.pop(outcome.url, None)
        self.tick()

    def attempt_hook(self, url: str) -> Callable[[int, object], None]:
        def on_attempt(attempt: int, last: object) -> None:
            state = self.pending.get(url)
            if state is not None:
                state.attempts = attempt
                state.last = _short(last)

        return on_attempt

    def tick(self) -> None:
        if self._enabled and self._live is None and self._clock() >= self._show_at and self.pending:
            self._live = Live(
                console=self.console, transient=True, refresh_per_second=8, get_renderable=self.renderable
            )
            self._live.start()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # ---- what is shown ----

    def renderable(self) -> RenderableType:
        done = self.total - len(self.pending)
        head = Text.assemble((self.label, "bold"), f"  {done}/{self.total} targets done")
        elapsed = self._clock() - self._start
        if self.deadline is not None:
            head.append(f"  {max(self.deadline - elapsed, 0.0):.1f} s left", style="yellow")
        else:
            head.append(f"  {elapsed:.1f} s")
        lines: list[RenderableType] = [head]
        for url, state in list(self.pending.items())[: self.shown]:
            line = Text(f"  {url}", style="cyan")
            if state.attempts:
                line.append(f"  attempt {state.attempts}")
                if state.last:
                    line.append(f", last: {state.last}", style="dim")
            else:
                line.append("  waiting for an answer", style="dim")
            lines.append(line)
        if len(self.pending) > self.shown:
            lines.append(Text(f"  ... and {len(self.pending) - self.shown} more pending", style="dim"))
        return Group(*lines)


def _short(value: object, width: int = 60) -> str:
    text = type(value).__name__ if isinstance(value, BaseException) else summary_line(value)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


async def with_ticker(call: Awaitable[T], tick: Callable[[], None], period: float = 0.1) -> T:
    """Await `call`, calling `tick` every `period` (the display must appear for a call that hangs on every
    target too, not only when one finishes)."""

    async def ticker() -> None:
        while True:
            await asyncio.sleep(period)
            tick()

    ticking = asyncio.ensure_future(ticker())
    try:
        return await call
    finally:
        ticking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticking
