"""Weight transfer: init, start, update, finish, the weight version and /weight_info."""

from __future__ import annotations

from ..contract import Scenario, call, returns_model
from ..engine import Return

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "init_weight_transfer_engine",
        "POST /init_weight_transfer_engine becomes a collective_rpc",
        lambda c: c.init_weight_transfer_engine({"backend": "nccl", "rank": 0}),
        returns_model("MessageResult", {"message": "Weight transfer initialized"}),
        (
            call(
                "collective_rpc",
                "init_weight_transfer_engine",
                None,
                [],
                {"init_info": {"backend": "nccl", "rank": 0}},
            ),
        ),
    ),
    Scenario(
        "start_weight_update",
        "POST /start_weight_update (Python sends kwargs None, Rust {})",
        lambda c: c.start_weight_update(),
        returns_model("MessageResult", {"message": "Weight update started"}),
        {
            "python": (call("collective_rpc", "start_weight_update", None, [], None),),
            "rust": (call("collective_rpc", "start_weight_update", None, [], {}),),
        },
    ),
    Scenario(
        "update_weights",
        "POST /update_weights passes update_info through",
        lambda c: c.update_weights({"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2]]}),
        returns_model("MessageResult", {"message": "Weights updated"}),
        (
            call(
                "collective_rpc",
                "update_weights",
                None,
                [],
                {"update_info": {"names": ["w"], "dtype_names": ["bfloat16"], "shapes": [[2]]}},
            ),
        ),
    ),
    Scenario(
        "finish_weight_update",
        "POST /finish_weight_update with a version: two engine calls",
        lambda c: c.finish_weight_update(weight_version="v2"),
        returns_model("MessageResult", {"message": "Weight update finished"}),
        {
            "python": (
                call("collective_rpc", "finish_weight_update", None, [], None),
                call("set_weight_version", "v2"),
            ),
            "rust": (
                call("collective_rpc", "finish_weight_update", None, [], {}),
                call("set_weight_version", "v2"),
            ),
        },
    ),
    Scenario(
        "update_weight_version",
        "POST /update_weight_version",
        lambda c: c.update_weight_version("v3"),
        returns_model("WeightVersionResult", {"success": True, "new_version": "v3"}),
        (call("set_weight_version", "v3"),),
    ),
    Scenario(
        "weight_info",
        "GET /weight_info answers the engine's weight version",
        lambda c: c.weight_info(),
        returns_model("WeightInfo", {"weight_version": "w-7"}),
        (call("get_weight_version"),),
        script={"get_weight_version": [Return("w-7")]},
    ),
)
