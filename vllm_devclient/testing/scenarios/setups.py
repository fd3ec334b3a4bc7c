"""The frontends in other setups: dev mode off (dev routes 404, the rest still served), `--api-key` (only
/v1 is guarded; that setup's engine also announces a KV-events publisher), and a dead engine."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ... import errors
from ..contract import Check, Client, EngineCallSpec, Expect, Scenario, call, raises, returns, returns_model
from ._shared import COLLECTIVE_RPC, is_a, rpc


def _dev_off(name: str, description: str, fn: Callable[[Client], object], expect: Expect) -> Scenario:
    """Dev mode off: nothing reaches the engine."""
    return Scenario(name, f"dev mode off: {description}", fn, expect, (), setup="dev_mode_off")


# The client asked whether any dev route is served (none is): it says dev mode is off, and only that.
_DEV_MODE_OFF = raises(
    errors.DevModeDisabledError,
    {"status_code": 404},
    Check("says VLLM_SERVER_DEV_MODE=1", lambda e: "VLLM_SERVER_DEV_MODE=1" in str(e)),
    Check("does not blame the release", lambda e: "no such route" not in str(e)),
)


def _keyed(
    name: str,
    description: str,
    fn: Callable[[Client], object],
    expect: Expect,
    engine_calls: Sequence[EngineCallSpec] = (),
    *,
    key: str | None = "",
) -> Scenario:
    """The server runs with --api-key; the client sends `key` ("": none, None: the right one)."""
    return Scenario(
        name, f"--api-key set, {description}", fn, expect, engine_calls, setup="api_key", api_key=key
    )


SCENARIOS: tuple[Scenario, ...] = (
    _dev_off(
        "dev_off_reset_prefix_cache",
        "a dev route is 404 and the SDK says how to turn it on",
        lambda c: c.reset_prefix_cache(),
        _DEV_MODE_OFF,
    ),
    _dev_off("dev_off_is_sleeping", "GET /is_sleeping is 404", lambda c: c.is_sleeping(), _DEV_MODE_OFF),
    _dev_off("dev_off_collective_rpc", "POST /collective_rpc is 404", rpc, _DEV_MODE_OFF),
    _dev_off(
        "dev_off_health",
        "/health is not a dev route",
        lambda c: c.health(),
        returns(True),
    ),
    _keyed(
        "api_key_models_without_key",
        "no key sent: /v1/models is 401",
        lambda c: c.models(),
        raises(errors.AuthenticationError, {"status_code": 401}),
    ),
    _keyed(
        "api_key_models_wrong_key",
        "a wrong key: /v1/models is 401",
        lambda c: c.models(),
        raises(errors.AuthenticationError, {"status_code": 401}),
        key="sk-wrong",
    ),
    _keyed(
        "api_key_models_with_key",
        "the key sent: /v1/models answers",
        lambda c: c.models(),
        returns_model("ModelList", {"len(data)": 1}),
        key=None,
    ),
    _keyed(
        "api_key_dev_route_without_key",
        "no key sent: dev routes are NOT protected (reset goes through)",
        lambda c: c.reset_prefix_cache(),
        returns_model("ResetPrefixCacheResult", {"success": True}),
        (call("reset_prefix_cache", False, False),),
    ),
    _keyed(
        "api_key_collective_rpc_without_key",
        "no key sent: even /collective_rpc answers",
        rpc,
        returns([None]),
        COLLECTIVE_RPC,
    ),
    _keyed(
        "api_key_server_info_without_key",
        "no key sent: /server_info answers",
        lambda c: c.server_info(),
        returns_model("ServerInfo", {}, is_a(dict, "config")),
    ),
    _keyed(
        "api_key_step_engine_without_key",
        "no key sent: engine stepping (/v1/models) is 401",
        lambda c: c.step_engine(),
        raises(errors.AuthenticationError, {"status_code": 401}),
    ),
    Scenario(
        "kv_event_sources",
        "the engine announces a KV-events publisher: /kv_event_sources passes its config through",
        lambda c: c.kv_event_sources(),
        returns_model(
            "dict",
            {
                "len()": 1,
                "0.endpoint": "tcp://*:5557",
                "0.replay_endpoint": "tcp://*:5558",
                "0.topic": "kv-events",
                "0.publisher": "zmq",
            },
        ),
        (),
        setup="api_key",
        api_key="",
    ),
    _dev_off(
        "dev_off_kv_event_sources",
        "/kv_event_sources is not a dev route",
        lambda c: c.kv_event_sources(),
        returns({}),
    ),
    Scenario(
        "dead_engine_health",
        "the engine declared itself dead: /health is 503 and the SDK raises EngineDeadError",
        lambda c: c.health(),
        raises(errors.EngineDeadError, {"status_code": 503}),
        (),
        setup="dead_engine",
    ),
)
