"""Running one client call over the fleet (one server is a fleet of one), with progress, and printing the
outcome in the chosen format; and the command-level errors every command may raise."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from .. import arguments as check
from ..fleet import AsyncFleet, FleetResult
from ._envelope import Verdict, envelope, target_entry
from ._exit import ExitCode, UnsuccessfulResultError, missing_extra_message
from ._output import print_fleet
from ._progress import FleetProgress, with_ticker
from ._settings import Settings

__all__ = ["CommandError", "Job", "Unavailable", "execute"]


class CommandError(click.ClickException):
    """A failure of the command as a whole (not of one target); `-o json` prints it as the envelope's
    `error`, named after `error`'s class."""

    def __init__(
        self, message: str, *, exit_code: int = ExitCode.FAILED, error: BaseException | None = None
    ) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it on the class
        self.error = error if error is not None else UnsuccessfulResultError(message)


class Unavailable(CommandError):
    """An optional part is not installed: one line naming the pip command, exit 7."""

    def __init__(self, error: ImportError, extra: str | None = None) -> None:
        message = missing_extra_message(error, extra)
        # Reported as ImportError whatever the subclass (ModuleNotFoundError): one name for "not installed".
        plain = ImportError(message, name=error.name)
        super().__init__(message, exit_code=ExitCode.UNAVAILABLE, error=plain)


@dataclass(frozen=True)
class Job:
    """What a fleet subcommand does: the call (given the fleet and the progress display), which answers count
    as failures, how an answer reads (to a person; as JSON), and the deadline the display counts down."""

    command: str
    call: Callable[[AsyncFleet, FleetProgress], Awaitable[FleetResult[Any]]]
    verdict: Verdict | None = None
    render: Callable[[Any], str] | None = None
    result: Callable[[Any], Any] | None = None
    deadline: float | None = None


def execute(ctx: click.Context, settings: Settings, job: Job) -> NoReturn:
    start = time.perf_counter()
    # Keyed as the fleet reports its targets (a password in a URL masked), so each target's line finishes.
    shown = tuple(check.base_url(url).url for url in settings.urls)
    progress = FleetProgress(job.command, shown, deadline=job.deadline, enabled=settings.progress)

    async def go() -> FleetResult[Any]:
        async with settings.fleet(on_result=progress.finished) as fleet:
            return await with_ticker(job.call(fleet, progress), progress.tick)

    try:
        result = asyncio.run(go())
    except ImportError as exc:
        raise Unavailable(exc) from exc
    finally:
        progress.close()
    targets = {
        url: target_entry(o.value, o.error, o.elapsed_s, verdict=job.verdict, result=job.result)
        for url, o in result.items()
    }
    rollback = None
    if result.rollback is not None:
        rollback = {url: target_entry(o.value, o.error, o.elapsed_s) for url, o in result.rollback.items()}
    doc = envelope(job.command, elapsed_s=time.perf_counter() - start, targets=targets, rollback=rollback)
    print_fleet(doc, result, job.render, settings.output)
    ctx.exit(doc["exit_code"])
