"""Waiting for a process checkpoint to be prepared (vLLM 0.34): /checkpoint/status answers 503 until the
drain is done ("not yet", never an error), 200 once safe to capture, 500 once the cycle failed.

Sans-IO: the clients run the operation (see `polling`).
"""

from __future__ import annotations

from .errors import APIConnectionError, CheckpointFailedError, DevClientError
from .models import CheckpointStatus
from .operations import CallContext, Operation
from .polling import Plan, wait_until
from .routes import endpoint as route

__all__ = ["wait_until_checkpoint_prepared"]


def _reached(status: CheckpointStatus) -> bool:
    return status.prepared or status.failed


def _tolerated(exc: DevClientError) -> bool:
    return isinstance(exc, APIConnectionError)


def wait_until_checkpoint_prepared(*, plan: Plan, ctx: CallContext) -> Operation[CheckpointStatus]:
    """Poll /checkpoint/status until prepared; CheckpointFailedError once it says failed."""
    status: CheckpointStatus = yield from wait_until(
        route("checkpoint_status"),
        _reached,
        what="checkpoint/status == prepared",
        plan=plan,
        ctx=ctx,
        tolerate=_tolerated,
    )
    if status.failed:
        raise CheckpointFailedError(
            ctx.secrets.redact(f"{ctx.base_url}: the checkpoint failed: {status.error or 'no reason given'}"),
            status=status,
        )
    return status
