"""The prefix cache and the other caches: reset_prefix_cache (flags, refusal), reset_mm_cache,
reset_encoder_cache."""

from __future__ import annotations

from ... import reset_check
from ..contract import Scenario, call, raises, returns, returns_model
from ..engine_actions import Return

SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "reset_prefix_cache",
        "POST /reset_prefix_cache with the defaults; the engine answers true",
        lambda c: c.reset_prefix_cache(),
        returns_model("ResetPrefixCacheResult", {"success": True, "status_code": 200}),
        (call("reset_prefix_cache", False, False),),
    ),
    Scenario(
        "reset_prefix_cache_all_flags",
        "reset_running_requests and reset_external reach the engine as booleans",
        lambda c: c.reset_prefix_cache(reset_running_requests=True, reset_external=True),
        returns_model("ResetPrefixCacheResult", {"success": True}),
        (call("reset_prefix_cache", True, True),),
    ),
    Scenario(
        "reset_prefix_cache_refused",
        "the engine refuses the reset (blocks still held): success is False, not an error",
        lambda c: c.reset_prefix_cache(),
        returns_model("ResetPrefixCacheResult", {"success": False, "status_code": 200}),
        (call("reset_prefix_cache", False, False),),
        script={"reset_prefix_cache": [Return(False)]},
    ),
    Scenario(
        "reset_mm_cache",
        "POST /reset_mm_cache answers an empty 200",
        lambda c: c.reset_mm_cache(),
        returns(None),
        (call("reset_mm_cache"),),
    ),
    Scenario(
        "reset_encoder_cache",
        "POST /reset_encoder_cache answers an empty 200",
        lambda c: c.reset_encoder_cache(),
        returns(None),
        (call("reset_encoder_cache"),),
    ),
    Scenario(
        "reset_prefix_cache_verified_refused",
        "the verified reset when the engine refuses: ResetNotVerifiedError, no probe sent",
        lambda c: c.reset_prefix_cache_verified("hello", reset_external=True, deadline=0),
        raises(reset_check.ResetNotVerifiedError, {"tier": None}),
        (call("reset_prefix_cache", False, True),),
        script={"reset_prefix_cache": [Return(False)]},
    ),
)
