"""The flows: paused(), sleeping() and weight_update(), each one block that always undoes itself."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..contract import Client, Scenario, call, returns, returns_model
from ..engine_actions import Return


def _in_flow(flow: str, inside: Callable[[Any], object], **kw: Any) -> Callable[[Client], object]:
    """A call that runs `inside(handle)` in the block of `client.<flow>(**kw)`, sync or async."""

    def run(c: Client) -> object:
        from ...client import AsyncDevClient

        manager = getattr(c, flow)(**kw)
        if isinstance(c, AsyncDevClient):

            async def block() -> object:
                async with manager as handle:
                    return await inside(handle)  # type: ignore[misc]

            return block()
        if manager is None:  # the route guard's spy: it only notes the method names
            return inside(c)
        with manager as handle:
            return inside(handle)

    return run


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "flow_paused",
        "paused(): pause (keep), wait until paused, the block, resume",
        _in_flow("paused", lambda h: h.is_paused()),
        returns(True),
        (
            call("pause_generation", "keep", True),
            call("is_scheduler_paused"),
            call("is_scheduler_paused"),
            call("resume_scheduler"),
        ),
        script={"is_scheduler_paused": [Return(True)]},
    ),
    Scenario(
        "flow_sleeping",
        "sleeping(): sleep, wait until asleep, the block, wake up, wait until awake",
        _in_flow("sleeping", lambda h: h.is_sleeping()),
        returns(True),
        (
            call("sleep", 1, "abort", True),
            call("is_sleeping"),
            call("is_sleeping"),
            call("wake_up", None),
            call("is_sleeping"),
        ),
        script={"is_sleeping": [Return(True), Return(True), Return(False)]},
    ),
    Scenario(
        "flow_weight_update",
        "weight_update(): pause, start, one batch, finish with the version, resume",
        _in_flow("weight_update", lambda u: u.update({"names": ["w"]}), weight_version="v9"),
        returns_model("MessageResult", {"message": "Weights updated"}),
        {
            fe: (
                call("pause_generation", "keep", True),
                call("is_scheduler_paused"),
                call("collective_rpc", "start_weight_update", None, [], kw),
                call("collective_rpc", "update_weights", None, [], {"update_info": {"names": ["w"]}}),
                call("collective_rpc", "finish_weight_update", None, [], kw),
                call("set_weight_version", "v9"),
                call("resume_scheduler"),
            )
            for fe, kw in (("python", None), ("rust", {}))
        },
        script={"is_scheduler_paused": [Return(True)]},
    ),
)
