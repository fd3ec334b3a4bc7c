"""Sleep and wake: /sleep at each level and mode, /wake_up (tags, partial), /is_sleeping,
/release_kv_cache_memory, the sleep waits; and wait_until_ready (here for the parity report's row order)."""

from __future__ import annotations

from collections.abc import Callable

from ...endpoints import PauseMode
from ..contract import Client, Scenario, call, returns, returns_model
from ..engine_actions import Return

_MODES: tuple[tuple[int, PauseMode], ...] = ((1, "abort"), (0, "keep"), (2, "wait"))


def _sleep(level: int, mode: PauseMode) -> Callable[[Client], object]:
    return lambda c: c.sleep(level=level, mode=mode)


def _sleep_at(level: int, mode: PauseMode) -> Scenario:
    return Scenario(
        f"sleep_level{level}_{mode}",
        f"POST /sleep?level={level}&mode={mode}",
        _sleep(level, mode),
        returns_model("SleepResult", {"status": "sleeping", "level": level}),
        # vLLM 0.34 sends reset_connector to the engine (True unless asked otherwise).
        (call("sleep", level, mode, True),),
    )


SCENARIOS: tuple[Scenario, ...] = (
    *(_sleep_at(level, mode) for level, mode in _MODES),
    Scenario(
        "wake_up",
        "POST /wake_up with no tags wakes everything",
        lambda c: c.wake_up(),
        returns_model("WakeUpResult", {"awake": True, "status": "awake", "tags": None}),
        (call("wake_up", None),),
    ),
    Scenario(
        "wake_up_tags",
        "POST /wake_up?tags=weights&tags=kv_cache passes the tags in order",
        lambda c: c.wake_up(["weights", "kv_cache"]),
        returns_model("WakeUpResult", {"awake": True, "tags": ["weights", "kv_cache"]}),
        (call("wake_up", ["weights", "kv_cache"]),),
    ),
    Scenario(
        "wake_up_partial",
        "the engine answers false (still partly asleep): status sleeping, awake False",
        lambda c: c.wake_up(["weights"]),
        returns_model("WakeUpResult", {"awake": False, "status": "sleeping", "tags": ["weights"]}),
        (call("wake_up", ["weights"]),),
        script={"wake_up": [Return(False)]},
    ),
    Scenario(
        "is_sleeping_false",
        "GET /is_sleeping, engine awake",
        lambda c: c.is_sleeping(),
        returns(False),
        (call("is_sleeping"),),
        safe=True,
    ),
    Scenario(
        "is_sleeping_true",
        "GET /is_sleeping, engine asleep",
        lambda c: c.is_sleeping(),
        returns(True),
        (call("is_sleeping"),),
        script={"is_sleeping": [Return(True)]},
    ),
    Scenario(
        "release_kv_cache_memory",
        "POST /release_kv_cache_memory",
        lambda c: c.release_kv_cache_memory(),
        returns_model("KVCacheReleaseResult", {"status": "kv_cache_released"}),
        (call("release_kv_cache_memory", True),),
    ),
    Scenario(
        "sleep_keep_connector",
        "POST /sleep?level=1&reset_connector=false keeps the KV connector's tier (vLLM 0.34)",
        lambda c: c.sleep(1, reset_connector=False),
        returns_model("SleepResult", {"status": "sleeping", "level": 1}),
        (call("sleep", 1, "abort", False),),
    ),
    Scenario(
        "release_kv_cache_memory_keep_connector",
        "POST /release_kv_cache_memory?reset_connector=false keeps the KV connector's tier (vLLM 0.34)",
        lambda c: c.release_kv_cache_memory(reset_connector=False),
        returns_model("KVCacheReleaseResult", {"status": "kv_cache_released"}),
        (call("release_kv_cache_memory", False),),
    ),
    Scenario(
        "wait_until_sleeping",
        "wait_until_sleeping polls /is_sleeping until the engine says true (false, false, true)",
        lambda c: c.wait_until_sleeping(deadline=10.0, interval=0.01),
        returns(None),
        (call("is_sleeping"), call("is_sleeping"), call("is_sleeping")),
        script={"is_sleeping": [Return(False), Return(False), Return(True)]},
    ),
    Scenario(
        "wait_until_awake",
        "wait_until_awake polls /is_sleeping until the engine says false (true, false)",
        lambda c: c.wait_until_awake(deadline=10.0, interval=0.01),
        returns(None),
        (call("is_sleeping"), call("is_sleeping")),
        script={"is_sleeping": [Return(True), Return(False)]},
    ),
    Scenario(
        "wait_until_ready",
        "wait_until_ready on a healthy server: one /health",
        lambda c: c.wait_until_ready(deadline=10.0),
        returns(None),
        (),
        safe=True,
    ),
)
