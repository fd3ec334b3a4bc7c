"""The engine's routes: a method on every worker, and the profiler."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .. import arguments as check
from ..answers import model_reader, nothing, read_collective_rpc
from ..errors import InvalidParameterError
from ..models import FaultToleranceAccepted
from ..records import Cli, Param, Route

__all__ = ["ROUTES"]

# vLLM's ALLOWED_FT_INSTRUCTIONS (0.34.0).
_FT_INSTRUCTIONS = ("retry", "scale_down")


def _instruction(value: object, name: str) -> str:
    if value not in _FT_INSTRUCTIONS:
        raise InvalidParameterError(f"{name} must be one of {', '.join(_FT_INSTRUCTIONS)}; got {value!r}")
    return str(value)


ROUTES: tuple[Route, ...] = (
    Route(
        name="collective_rpc",
        method="POST",
        path="/collective_rpc",
        reader=read_collective_rpc,
        long_running=True,
        doc=(
            "POST /collective_rpc: a method on every worker, one result each (never resent, no HTTP timeout)."
        ),
        answer=list[Any],
        params=(
            Param(
                name="method",
                send="body",
                check=check.text,
                type=str,
                positional=True,
                help="The worker method's name.",
            ),
            Param(
                name="args",
                send="body",
                check=check.json_sequence,
                type=Sequence[Any],
                default=(),
                help="Positional arguments, a JSON list.",
            ),
            Param(
                name="kwargs",
                send="body",
                check=check.json_mapping,
                none={},
                type=Mapping[str, Any] | None,
                default=None,
                help="Keyword arguments, a JSON object.",
            ),
            Param(
                name="rpc_timeout",
                send="body",
                key="timeout",
                check=check.seconds,
                type=float | None,
                default=None,
                help="Seconds the workers get for the call (engine side; the HTTP timeout ends the try).",
            ),
        ),
        cli=Cli(topic="engine"),
    ),
    Route(
        name="start_profile",
        method="POST",
        path="/start_profile",
        reader=nothing,
        dev_route=False,
        empty_body=False,
        doc="POST /start_profile (a server started with --profiler-config); 409 while one runs.",
        answer=None,
        params=(
            Param(
                name="profile_prefix",
                send="body",
                check=check.text,
                type=str | None,
                default=None,
                help="A prefix for the trace files.",
            ),
            Param(
                name="delay_iterations",
                send="body",
                check=check.non_negative_int,
                type=int | None,
                default=None,
                help="Engine steps to skip before recording.",
            ),
            Param(
                name="max_iterations",
                send="body",
                check=check.positive_int,
                type=int | None,
                default=None,
                help="Engine steps to record at most.",
            ),
        ),
        cli=Cli(topic="engine"),
    ),
    Route(
        name="stop_profile",
        method="POST",
        path="/stop_profile",
        reader=nothing,
        dev_route=False,
        # Writing the trace can take a while.
        long_running=True,
        doc="POST /stop_profile: stop and write the trace (no HTTP timeout by default).",
        answer=None,
        cli=Cli(topic="engine"),
    ),
    Route(
        name="apply_fault_tolerance",
        method="POST",
        path="/v1/fault_tolerance/apply",
        reader=model_reader(FaultToleranceAccepted),
        dev_route=False,
        doc="POST /v1/fault_tolerance/apply: start a recovery round (--enable-fault-tolerance).",
        answer=FaultToleranceAccepted,
        params=(
            Param(
                name="instruction",
                send="body",
                check=_instruction,
                type=str,
                positional=True,
                choices=_FT_INSTRUCTIONS,
                help="retry or scale_down.",
            ),
            Param(
                name="request_id",
                send="body",
                check=check.text,
                type=str,
                help="The round's id: the same on every engine of one recovery round.",
            ),
            Param(
                name="params",
                send="body",
                check=check.json_mapping,
                type=Mapping[str, Any] | None,
                default=None,
                help="The instruction's parameters.",
            ),
        ),
        cli=Cli(topic="engine"),
    ),
)
