"""The process-checkpoint routes (vLLM 0.34): prepare, its state, restore, and the fault-tolerance route
(served only with --enable-fault-tolerance, which the kit's frontends are not started with)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import errors
from ..contract import Client, EngineCallSpec, Expect, Scenario, call, raises, returns, returns_model
from ..engine_actions import Return

# vLLM's Python frontend registers these routes only with --enable-sleep-mode, which it refuses on a CPU
# platform (the kit's): there it answers 404; vllm-rs serves them.
_PYTHON_CPU = (
    "the Python frontend serves the checkpoint routes only with sleep mode, which vLLM refuses on a CPU "
    "platform (404 there); vllm-rs serves them"
)


def _checkpoint(
    name: str,
    description: str,
    fn: Callable[[Client], object],
    rust: Expect,
    calls: tuple[EngineCallSpec, ...],
    **kw: Any,
) -> Scenario:
    return Scenario(
        name,
        description,
        fn,
        {"python": raises(errors.NotFoundError, {"status_code": 404}), "rust": rust},
        {"python": (), "rust": calls},
        sdk_difference=_PYTHON_CPU,
        **kw,
    )


SCENARIOS: tuple[Scenario, ...] = (
    _checkpoint(
        "checkpoint_status_running",
        "GET /checkpoint/status while serving: 503 with state running, read as not yet prepared",
        lambda c: c.checkpoint_status(),
        returns_model("CheckpointStatus", {"state": "running", "prepared": False, "status_code": 503}),
        (call("checkpoint_state"),),
    ),
    _checkpoint(
        "checkpoint_prepare",
        "POST /checkpoint/prepare with nothing in flight: the drain ends at once, state prepared",
        lambda c: c.checkpoint_prepare(),
        returns_model("CheckpointStatus", {"state": "prepared", "prepared": True, "status_code": 200}),
        (call("checkpoint_state"), call("checkpoint_prepare", "wait"), call("checkpoint_state")),
    ),
    _checkpoint(
        "checkpoint_restore_running",
        "POST /checkpoint/restore while serving: a no-op that answers the running state",
        lambda c: c.checkpoint_restore(),
        returns_model("CheckpointStatus", {"state": "running", "status_code": 200}),
        (call("checkpoint_state"),),
    ),
    Scenario(
        "apply_fault_tolerance_not_enabled",
        "POST /v1/fault_tolerance/apply on a server started without --enable-fault-tolerance: 404",
        lambda c: c.apply_fault_tolerance("retry", request_id="round-1"),
        raises(errors.NotFoundError, {"status_code": 404}),
        (),
    ),
)


def _checkpointed(c: Client) -> object:
    """The state `checkpointed()` yields, sync or async."""
    from ...client import AsyncDevClient, DevClient

    if isinstance(c, AsyncDevClient):
        manager = c.checkpointed(deadline=10.0)

        async def block() -> object:
            async with manager as status:
                return status.state

        return block()
    if not isinstance(c, DevClient):  # the route guard's spy: it only notes the method names
        c.checkpointed(deadline=10.0)
        return None
    with c.checkpointed(deadline=10.0) as status:
        return status.state


SCENARIOS += (
    _checkpoint(
        "wait_until_checkpoint_prepared",
        "wait_until_checkpoint_prepared polls /checkpoint/status through its 503 (preparing) to prepared",
        lambda c: c.wait_until_checkpoint_prepared(deadline=10.0, interval=0.01),
        returns_model("CheckpointStatus", {"state": "prepared", "prepared": True, "status_code": 200}),
        (call("checkpoint_state"), call("checkpoint_state")),
        script={"checkpoint_state": [Return(["preparing", None]), Return(["prepared", None])]},
    ),
    _checkpoint(
        "flow_checkpointed",
        "checkpointed(): prepare, wait until prepared, the block, restore",
        _checkpointed,
        returns("prepared"),
        (
            call("checkpoint_state"),
            call("checkpoint_prepare", "wait"),
            call("checkpoint_state"),
            call("checkpoint_state"),
            call("checkpoint_state"),
            call("checkpoint_restore"),
            call("checkpoint_state"),
        ),
    ),
)
