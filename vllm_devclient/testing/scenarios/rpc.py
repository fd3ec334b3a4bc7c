"""collective_rpc: what the engine returns, and how each frontend shapes it."""

from __future__ import annotations

from ... import errors
from ..contract import Scenario, call, raises, returns
from ..engine_actions import Return
from ._shared import COLLECTIVE_RPC, rpc

_PY_STRINGS = "the Python frontend str()s every per-worker result that is not a dict, list or None"


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "collective_rpc_worker_scalar",
        "one worker answers the scalar 7 (engine result [7])",
        rpc,
        {"python": returns(["7"]), "rust": returns([7])},
        COLLECTIVE_RPC,
        script={"collective_rpc": [Return([7])]},
        sdk_difference=_PY_STRINGS,
    ),
    Scenario(
        "collective_rpc_worker_list",
        "one worker answers a list (engine result [[1, 'x']])",
        rpc,
        returns([[1, "x"]]),
        COLLECTIVE_RPC,
        script={"collective_rpc": [Return([[1, "x"]])]},
    ),
    Scenario(
        "collective_rpc_worker_dict",
        "one worker answers a dict (engine result [{'a': 1}])",
        rpc,
        returns([{"a": 1}]),
        COLLECTIVE_RPC,
        script={"collective_rpc": [Return([{"a": 1}])]},
    ),
    Scenario(
        "collective_rpc_worker_none",
        "one worker answers None (engine result [None]): the default",
        rpc,
        returns([None]),
        COLLECTIVE_RPC,
    ),
    Scenario(
        "collective_rpc_two_workers",
        "two workers (engine result [1, 2])",
        rpc,
        {"python": returns(["1", "2"]), "rust": returns([1, 2])},
        COLLECTIVE_RPC,
        script={"collective_rpc": [Return([1, 2])]},
        sdk_difference=_PY_STRINGS,
    ),
    Scenario(
        "collective_rpc_bare_none",
        "the engine result is None itself: Python answers an empty 200, Rust [null]; both give [None]",
        rpc,
        returns([None]),
        COLLECTIVE_RPC,
        script={"collective_rpc": [Return(None)]},
    ),
    Scenario(
        "collective_rpc_bare_scalar",
        "the engine result is the scalar 7, not a per-worker list",
        rpc,
        {
            "python": raises(errors.BadRequestError, {"status_code": 400}),
            "rust": returns([7]),
        },
        COLLECTIVE_RPC,
        script={"collective_rpc": [Return(7)]},
        sdk_difference="Python iterates the result and fails with 400; Rust wraps a scalar in a list",
    ),
    Scenario(
        "collective_rpc_bare_dict",
        "the engine result is a dict, not a per-worker list",
        rpc,
        {"python": returns(["a"]), "rust": returns([{"a": 1}])},
        COLLECTIVE_RPC,
        script={"collective_rpc": [Return({"a": 1})]},
        sdk_difference="Python iterates the dict (its keys, str()-ed); Rust wraps a map in a list",
    ),
    Scenario(
        "collective_rpc_timeout",
        "rpc_timeout reaches the engine as the collective_rpc timeout",
        lambda c: c.collective_rpc("echo", args=[], rpc_timeout=5.0),
        returns([None]),
        (call("collective_rpc", "echo", 5.0, [], {}),),
    ),
)
