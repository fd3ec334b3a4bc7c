"""The records of the client methods written by hand, because each spans several exchanges: completions
(the served model is looked up first), engine stepping, the offload barrier, the waits, and `request()`.

Their code is in `_async/waits.py` and `_async/core.py` (behaviour in `operations/`); these records say
what their signatures are, for the fleets' tables and the command line, and a test checks that the two
agree. See `records.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from .constants import (
    DEFAULT_BARRIER_DEADLINE,
    DEFAULT_BARRIER_POLL_INTERVAL,
    DEFAULT_BARRIER_REQUEST_TIMEOUT,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_POLL_MAX_INTERVAL,
    DEFAULT_READY_DEADLINE,
    DEFAULT_READY_REQUEST_TIMEOUT,
    DEFAULT_VERIFY_DEADLINE,
    DEFAULT_WAIT_DEADLINE,
    DEFAULT_WAIT_REQUEST_TIMEOUT,
)
from .models import BarrierResult, CheckpointStatus, Completion
from .records import Call, Cli, Param
from .reset_check import VerifiedReset
from .responses import HTTPResponse

__all__ = ["CALLS", "Reached", "RequestAnswer"]


class Reached(BaseModel):
    """A wait's JSON result on the command line: the state every target reached."""

    state: Literal["ready", "sleeping", "awake", "paused", "resumed"]


class RequestAnswer(BaseModel):
    """`request`'s JSON result on the command line: the status and the body (JSON when it is JSON)."""

    status_code: int
    body: Any


def _verified(value: VerifiedReset) -> str:
    return f"reset verified ({', '.join(value.tiers)}) from the {value.evidence}"


def _barrier(value: BarrierResult) -> str:
    return f"reset after {value.attempts} attempts, {value.engine_steps} engine steps, {value.elapsed_s:.2f}s"


def _wait_params(deadline: float, request_timeout: float) -> tuple[Param, ...]:
    """The `WaitOptions` every wait takes, with this wait's defaults."""
    return (
        Param(
            name="deadline",
            type=float,
            default=deadline,
            role="deadline",
            help="Seconds the whole wait may take.",
        ),
        Param(
            name="request_timeout",
            type=float | None,
            default=None,
            role="request_timeout",
            help=f"Seconds for each try (default: the client's timeout when set, else {request_timeout:g}).",
        ),
        Param(
            name="interval",
            type=float,
            default=DEFAULT_POLL_INTERVAL,
            help="Seconds between the first tries (doubling up to 1 s).",
        ),
    )


def _wait(state: str, doc: str, deadline: float, request_timeout: float) -> Call:
    reached = Reached(state=state)
    return Call(
        name=f"wait_until_{state}",
        doc=doc,
        answer=None,
        params=_wait_params(deadline, request_timeout),
        options="wait",
        cli=Cli(
            topic="wait",
            command=f"wait-{state}",
            render=lambda value: state,
            result=lambda value: reached,
            result_type=Reached,
        ),
    )


def _raw_answer(value: HTTPResponse) -> RequestAnswer:
    try:
        body: Any = value.json()
    except ValueError:
        body = value.text
    return RequestAnswer(status_code=value.status_code, body=body)


CALLS: tuple[Call, ...] = (
    Call(
        name="reset_prefix_cache_until_success",
        doc=(
            "The offload barrier: reset the prefix cache until it succeeds, "
            "stepping the engine between tries."
        ),
        answer=BarrierResult,
        params=(
            Param(
                name="deadline",
                type=float,
                default=DEFAULT_BARRIER_DEADLINE,
                role="deadline",
                help="Seconds for the whole barrier.",
            ),
            Param(
                name="request_timeout",
                type=float | None,
                default=None,
                role="request_timeout",
                help=(
                    "Seconds for each try (default: the client's timeout when set, else "
                    f"{DEFAULT_BARRIER_REQUEST_TIMEOUT:g})."
                ),
            ),
            Param(
                name="reset_external",
                type=bool,
                default=False,
                help="Also reset the connector's tier (default False: keep the CPU tier).",
            ),
            Param(
                name="reset_running_requests",
                type=bool,
                default=False,
                help="Preempt running requests so their blocks can be freed.",
            ),
            Param(
                name="step_engine",
                type=bool,
                default=True,
                help="Send a 1-token completion between tries, so finished blocks are released.",
            ),
            Param(
                name="interval",
                type=float,
                default=DEFAULT_BARRIER_POLL_INTERVAL,
                help="First pause between tries (doubling up to max_interval).",
            ),
            Param(
                name="max_interval",
                type=float,
                default=DEFAULT_POLL_MAX_INTERVAL,
                help="Longest pause between tries.",
            ),
            Param(
                name="on_attempt",
                type=Callable[[int, object], None] | None,
                default=None,
                role="hook",
                help="Called after each try with (attempt number, its answer or error).",
            ),
        ),
        options="none",
        cli=Cli(topic="cache", command="barrier", render=_barrier),
    ),
    Call(
        name="reset_prefix_cache_verified",
        doc="Reset the prefix cache, then prove that every tier asked to clear serves nothing (opt-in).",
        answer=VerifiedReset,
        params=(
            Param(
                name="probe",
                type=str | Sequence[int],
                positional=True,
                help="A prompt of more than one KV-cache block (text or token ids); the check caches it.",
            ),
            Param(
                name="reset_external",
                type=bool,
                default=False,
                help="Also reset, and check, the connector's tier.",
            ),
            Param(
                name="reset_running_requests",
                type=bool,
                default=False,
                help="Preempt running requests so their blocks can be freed.",
            ),
            Param(
                name="deadline",
                type=float,
                default=DEFAULT_VERIFY_DEADLINE,
                role="deadline",
                help="Seconds for the check's waits: refused resets retried, /metrics counting the probe.",
            ),
        ),
        cli=Cli(topic="cache", command="verified-reset", render=_verified),
    ),
    _wait(
        "ready",
        "Poll /health until it answers 200; EngineDeadError at once when the engine is dead.",
        DEFAULT_READY_DEADLINE,
        DEFAULT_READY_REQUEST_TIMEOUT,
    ),
    _wait(
        "sleeping",
        "Poll /is_sleeping until true (a 200 from /sleep does not prove the engine sleeps).",
        DEFAULT_WAIT_DEADLINE,
        DEFAULT_WAIT_REQUEST_TIMEOUT,
    ),
    _wait("awake", "Poll /is_sleeping until false.", DEFAULT_WAIT_DEADLINE, DEFAULT_WAIT_REQUEST_TIMEOUT),
    _wait("paused", "Poll /is_paused until true.", DEFAULT_WAIT_DEADLINE, DEFAULT_WAIT_REQUEST_TIMEOUT),
    _wait("resumed", "Poll /is_paused until false.", DEFAULT_WAIT_DEADLINE, DEFAULT_WAIT_REQUEST_TIMEOUT),
    Call(
        name="wait_until_checkpoint_prepared",
        doc="Poll /checkpoint/status until prepared (its 503 is 'not yet'); CheckpointFailedError on failed.",
        answer=CheckpointStatus,
        params=_wait_params(DEFAULT_WAIT_DEADLINE, DEFAULT_WAIT_REQUEST_TIMEOUT),
        options="wait",
        cli=Cli(topic="wait", command="wait-checkpoint-prepared", render=lambda value: value.state),
    ),
    Call(
        name="completion",
        doc="POST /v1/completions, greedy by default (never resent: it would run twice).",
        answer=Completion,
        params=(
            Param(
                name="prompt",
                type=str | Sequence[int],
                positional=True,
                help="The prompt text, or its token ids.",
            ),
            Param(
                name="model",
                type=str | None,
                default=None,
                help="The model name; default the client's, else the first on /v1/models.",
            ),
            Param(name="max_tokens", type=int, default=16, help="Tokens to generate."),
            Param(name="temperature", type=float, default=0, help="Sampling temperature (0: greedy)."),
            Param(name="seed", type=int | None, default=None, help="Sampling seed."),
            Param(name="stop", type=Sequence[str] | None, default=None, help="Stop strings."),
        ),
        cli=Cli(topic="engine", render=lambda value: value.text),
    ),
    Call(
        name="step_engine",
        doc='Send a 1-token greedy completion (prompt "0") so the engine runs a step; returns its text.',
        answer=str,
        cli=Cli(topic="engine", render=lambda value: f"stepped (text {value!r})"),
    ),
    Call(
        name="request",
        doc="Any request, with this client's auth, timeouts and typed errors (a non-2xx raises).",
        answer=HTTPResponse,
        params=(
            Param(name="method", type=str, positional=True, help="The HTTP method."),
            Param(
                name="path",
                type=str,
                positional=True,
                help='The path, starting with "/" (no query: pass params).',
            ),
            Param(
                name="params",
                type=Mapping[str, Any] | Sequence[tuple[str, Any]] | None,
                default=None,
                option="--param",
                help="Query parameters; booleans go out as true/false.",
            ),
            Param(name="json", type=Any, default=None, option="--body", help="A JSON body."),
        ),
        cli=Cli(topic="engine", result=_raw_answer, result_type=RequestAnswer),
    ),
)
