"""Weight transfer: init, start (also of the draft model), update, finish, shut down, the weight version,
/weight_info and /weight_checker."""

from __future__ import annotations

from typing import Any

from ... import errors
from ..contract import EngineCallSpec, Scenario, call, raises, returns_model
from ..engine_actions import Return


def _worker_rpc(method: str, *rest: Any) -> dict[str, tuple[EngineCallSpec, ...]]:
    """The engine calls of a route that runs worker method `method` through collective_rpc, then `rest`:
    Python sends kwargs None, Rust {}."""
    extra = tuple(call(*spec) for spec in rest)
    return {
        fe: (call("collective_rpc", method, None, [], kwargs), *extra)
        for fe, kwargs in (("python", None), ("rust", {}))
    }


_CHECKSUMS = {
    "compute_weight_checksums": [Return([{"w1": "abc"}])],
    "collective_rpc": [Return([{"w1": "abc"}])],
}
_CHECKSUM_CALLS = {
    "python": (call("compute_weight_checksums"),),
    "rust": (call("collective_rpc", "compute_weight_checksums", None, [], {}),),
}

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
        _worker_rpc("start_weight_update"),
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
        in_weight_update=True,
    ),
    Scenario(
        "finish_weight_update",
        "POST /finish_weight_update with a version: two engine calls",
        lambda c: c.finish_weight_update(weight_version="v2"),
        returns_model("MessageResult", {"message": "Weight update finished"}),
        _worker_rpc("finish_weight_update", ("set_weight_version", "v2")),
        in_weight_update=True,
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
    Scenario(
        "start_draft_weight_update",
        "POST /start_draft_weight_update becomes a collective_rpc",
        lambda c: c.start_draft_weight_update(),
        returns_model("MessageResult", {"message": "Draft weight update started"}),
        _worker_rpc("start_draft_weight_update"),
    ),
    Scenario(
        "shutdown_weight_transfer_engine",
        "POST /shutdown_weight_transfer_engine becomes a collective_rpc",
        lambda c: c.shutdown_weight_transfer_engine(),
        returns_model("MessageResult", {"message": "Weight transfer shut down"}),
        _worker_rpc("shutdown_weight_transfer_engine"),
    ),
    Scenario(
        "weight_checker_checksum",
        "POST /weight_checker action=checksum: the workers' checksums merged (Python asks the engine "
        "directly, Rust through collective_rpc)",
        lambda c: c.weight_checker("checksum"),
        returns_model("WeightCheckResult", {"checksums": {"w1": "abc"}, "match": None}),
        _CHECKSUM_CALLS,
        script=_CHECKSUMS,
    ),
    Scenario(
        "weight_checker_compare",
        "POST /weight_checker action=compare with a baseline that differs: match false, the key named",
        lambda c: c.weight_checker("compare", baseline={"w1": "old"}),
        returns_model("WeightCheckResult", {"match": False, "mismatches": ["w1"]}),
        _CHECKSUM_CALLS,
        script=_CHECKSUMS,
    ),
    Scenario(
        "weight_checker_reset",
        "POST /weight_checker action=reset: the workers' reset_weights",
        lambda c: c.weight_checker("reset"),
        returns_model("WeightCheckResult", {"status": "reset"}),
        _worker_rpc("reset_weights"),
    ),
    Scenario(
        "weight_checker_compare_without_baseline",
        "action=compare without a baseline: both servers answer 400 (the SDK's weight_checker refuses it "
        "before sending, so this goes through request())",
        lambda c: c.request("POST", "/weight_checker", json={"action": "compare"}),
        raises(errors.BadRequestError, {"status_code": 400}),
    ),
)
