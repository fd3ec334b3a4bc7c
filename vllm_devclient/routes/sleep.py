"""The sleep routes: sleep, wake up, and whether the engine sleeps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import arguments as check
from ..answers import field_reader, model_reader, read_wake_up
from ..endpoints import PauseMode
from ..errors import InvalidParameterError
from ..models import SleepResult, WakeUpResult
from ..records import Cli, Param, Route, When
from .pause import MODE_HELP, pause_mode

__all__ = ["RESET_CONNECTOR", "ROUTES"]

# vLLM 0.34's argument of /sleep and /release_kv_cache_memory (PR #57810).
RESET_CONNECTOR = Param(
    name="reset_connector",
    send="query",
    check=check.flag,
    type=bool | None,
    default=None,
    added_in="0.34.0",
    help="False keeps the KV connector's tier (CPU offload); None: the server's default (reset).",
)


def _level(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2:
        raise InvalidParameterError(f"sleep level must be 0, 1 or 2, got {value!r}")
    return value


def _still_asleep(value: WakeUpResult, given: Mapping[str, Any]) -> str | None:
    # A partial wake (some tags) leaves the engine asleep on purpose.
    if not given.get("tags") and value.awake is False:
        return f"still sleeping after wake_up (status {value.status!r})"
    return None


ROUTES: tuple[Route, ...] = (
    Route(
        name="sleep",
        method="POST",
        path="/sleep",
        reader=model_reader(SleepResult, empty_ok=True),
        idempotent=True,
        # Level 2 drops the weights and may move a lot of memory: no bound on the answer by default.
        long_running=When("at level 2", lambda a: a["level"] == 2),
        doc="POST /sleep: put the engine to sleep (level 2 has no HTTP timeout by default).",
        answer=SleepResult,
        params=(
            Param(
                name="level",
                send="query",
                check=_level,
                type=int,
                default=1,
                positional=True,
                choices=(0, 1, 2),
                help="0 pauses, 1 offloads the weights, 2 discards them.",
            ),
            Param(
                name="mode", send="query", check=pause_mode, type=PauseMode, default="abort", help=MODE_HELP
            ),
            RESET_CONNECTOR,
        ),
        cli=Cli(topic="sleep"),
    ),
    Route(
        name="wake_up",
        method="POST",
        path="/wake_up",
        reader=read_wake_up,
        idempotent=True,
        long_running=True,
        doc="POST /wake_up; `.awake` is False on a partial wake (no HTTP timeout by default).",
        answer=WakeUpResult,
        params=(
            Param(
                name="tags",
                send="query",
                check=check.texts,
                type=Sequence[str] | None,
                default=None,
                positional=True,
                option="--tag",
                help='What to wake (e.g. ["weights"], then ["kv_cache"]); None: everything.',
            ),
        ),
        cli=Cli(topic="sleep", verdict=_still_asleep),
    ),
    Route(
        name="is_sleeping",
        method="GET",
        path="/is_sleeping",
        reader=field_reader("is_sleeping", bool),
        idempotent=True,
        doc="GET /is_sleeping.",
        answer=bool,
        cli=Cli(topic="sleep"),
    ),
)
