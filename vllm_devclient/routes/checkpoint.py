"""The process-checkpoint routes (vLLM 0.34, served with sleep mode, not only in dev mode): prepare (drain
and release what a checkpoint must not hold), its state, restore."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..answers import read_checkpoint
from ..endpoints import PauseMode
from ..models import CheckpointStatus
from ..records import GATEWAY_STATUSES, Cli, Param, Route
from .pause import pause_mode

__all__ = ["ROUTES"]


def _state(value: CheckpointStatus) -> str:
    return value.state if value.error is None else f"{value.state}: {value.error}"


def _failed(value: CheckpointStatus, given: Mapping[str, Any]) -> str | None:
    return f"the checkpoint failed: {value.error}" if value.failed else None


# /checkpoint/status gives 503 and 500 a meaning (not yet prepared, failed): they are answers, not errors.
_STATUS_ANSWERS = frozenset({503, 500})

ROUTES: tuple[Route, ...] = (
    Route(
        name="checkpoint_prepare",
        method="POST",
        path="/checkpoint/prepare",
        reader=read_checkpoint,
        idempotent=True,  # repeating is a no-op in vLLM
        dev_route=False,
        doc="POST /checkpoint/prepare: drain, then release the KV cache (poll checkpoint_status).",
        answer=CheckpointStatus,
        params=(
            Param(
                name="mode",
                send="query",
                check=pause_mode,
                type=PauseMode,
                default="wait",
                positional=True,
                help="How the drain treats requests in flight: wait (they finish first), abort or keep.",
            ),
        ),
        cli=Cli(topic="sleep", verdict=_failed, render=_state),
    ),
    Route(
        name="checkpoint_status",
        method="GET",
        path="/checkpoint/status",
        reader=read_checkpoint,
        idempotent=True,
        dev_route=False,
        ok_statuses=_STATUS_ANSWERS,
        retry_statuses=GATEWAY_STATUSES - _STATUS_ANSWERS,
        doc="GET /checkpoint/status: `.prepared` once safe to capture (its 503 means not yet).",
        answer=CheckpointStatus,
        cli=Cli(topic="sleep", verdict=_failed, render=_state),
    ),
    Route(
        name="checkpoint_restore",
        method="POST",
        path="/checkpoint/restore",
        reader=read_checkpoint,
        idempotent=True,  # a restore in progress or done answers 200
        long_running=True,
        dev_route=False,
        doc="POST /checkpoint/restore: bring back what preparing released, and serve (no HTTP timeout).",
        answer=CheckpointStatus,
        cli=Cli(topic="sleep", verdict=_failed, render=_state),
    ),
)
