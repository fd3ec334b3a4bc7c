"""The pause routes: pause and resume scheduling, and abort requests."""

from __future__ import annotations

from collections.abc import Iterable

from .. import arguments as check
from ..answers import field_reader, model_reader, read_abort
from ..endpoints import PauseMode
from ..errors import InvalidParameterError
from ..models import AbortRequestsResult, StatusResult
from ..records import Cli, Param, Route, When

__all__ = ["MODE_HELP", "ROUTES", "pause_mode"]

_MODES = ("abort", "wait", "keep")
MODE_HELP = (
    "What happens to requests in flight: abort (they end now, finish reason abort), wait (the call returns "
    "once they have finished) or keep (they are frozen, and go on at resume)."
)


def pause_mode(value: object, name: str) -> str:
    if value not in _MODES:
        raise InvalidParameterError(f"{name} must be one of {', '.join(_MODES)}; got {value!r}")
    return str(value)


ROUTES: tuple[Route, ...] = (
    Route(
        name="pause",
        method="POST",
        path="/pause",
        reader=model_reader(StatusResult),
        idempotent=True,
        doc="POST /pause: stop scheduling (for a weight update); see also the paused() flow.",
        answer=StatusResult,
        params=(
            Param(
                name="mode",
                send="query",
                check=pause_mode,
                type=PauseMode,
                default="abort",
                positional=True,
                help=MODE_HELP,
            ),
            Param(
                name="clear_cache",
                send="query",
                check=check.flag,
                type=bool | None,
                default=None,
                help="Also clear the caches (server default when None).",
            ),
        ),
        cli=Cli(
            topic="pause",
            fleet_params=(
                Param(
                    name="rollback",
                    type=bool,
                    default=False,
                    help="If some targets fail, resume the ones that were paused.",
                ),
            ),
        ),
    ),
    Route(
        name="resume",
        method="POST",
        path="/resume",
        reader=model_reader(StatusResult),
        idempotent=True,
        doc="POST /resume: schedule again after pause().",
        answer=StatusResult,
        cli=Cli(topic="pause"),
    ),
    Route(
        name="is_paused",
        method="GET",
        path="/is_paused",
        reader=field_reader("is_paused", bool),
        idempotent=True,
        doc="GET /is_paused.",
        answer=bool,
        cli=Cli(topic="pause"),
    ),
    Route(
        name="abort_requests",
        method="POST",
        path="/abort_requests",
        reader=read_abort,
        # Aborting "all" twice could hit requests that arrived in between: never resent.
        idempotent=When("when it names requests", lambda a: bool(a["request_ids"])),
        doc="POST /abort_requests (aborting all is never resent).",
        answer=AbortRequestsResult,
        params=(
            Param(
                name="request_ids",
                send="body",
                check=check.texts,
                none=[],
                type=Iterable[str] | None,
                default=None,
                positional=True,
                argument=True,
                none_flag=("--all", "Abort every request in flight (instead of REQUEST_IDS)."),
                help="The ids to abort; None: every request in flight.",
            ),
        ),
        cli=Cli(topic="pause"),
    ),
)
