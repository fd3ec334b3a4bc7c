"""staged_wake() on both real frontends: the weights, the block (a weight update), then the KV cache, for a
client and for fleets of three (all or none: a target failing to wake its weights puts the others back to
sleep before the block runs)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from vllm_devclient import AsyncDevClient, AsyncFleet, DevClient, EngineCallError, Fleet, FleetError
from vllm_devclient.testing.engine_actions import Raise
from vllm_devclient.testing.frontends import Frontend

pytestmark = pytest.mark.frontend

BOTH = frozenset({"weights", "kv_cache"})


def _wakes(fe: Frontend) -> list[Any]:
    """The tags of every wake_up the engine got, in order."""
    return [c.args[0] for c in fe.engine.calls_for("wake_up")]


def _weight_steps(fe: Frontend) -> list[str]:
    return [c.args[0] for c in fe.engine.calls_for("collective_rpc")]


def test_the_weights_wake_before_the_block_and_the_kv_cache_after(frontend: Frontend) -> None:
    with DevClient(frontend.base_url) as client:
        client.sleep(1)
        client.wait_until_sleeping()
        with client.staged_wake():
            assert frontend.engine.state.asleep == {"kv_cache"}
            assert client.is_sleeping()
            with client.weight_update(weight_version="v2") as update:
                update.update({"names": ["w"], "dtype_names": ["float32"], "shapes": [[2]]})
            assert frontend.engine.state.asleep == {"kv_cache"}
        assert not client.is_sleeping()
    assert _wakes(frontend) == [["weights"], ["kv_cache"]]
    assert _weight_steps(frontend) == ["start_weight_update", "update_weights", "finish_weight_update"]
    assert frontend.engine.state.weight_version == "v2" and not frontend.engine.state.asleep


def test_a_failing_block_still_wakes_the_kv_cache_and_raises(frontend: Frontend) -> None:
    with DevClient(frontend.base_url) as client:
        client.sleep(1)
        with pytest.raises(RuntimeError, match="trainer died"), client.staged_wake():
            raise RuntimeError("trainer died")
        assert not client.is_sleeping()
    assert _wakes(frontend) == [["weights"], ["kv_cache"]]


def test_the_async_client_stages_the_same_way(frontend: Frontend) -> None:
    async def main() -> frozenset[str]:
        async with AsyncDevClient(frontend.base_url) as client:
            await client.sleep(1)
            async with client.staged_wake():
                inside = frontend.engine.state.asleep
        return inside

    assert asyncio.run(main()) == {"kv_cache"}
    assert _wakes(frontend) == [["weights"], ["kv_cache"]]


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_fleet_of_three_wakes_in_stages(kind: str, three_frontends: list[Frontend]) -> None:
    urls = [fe.base_url for fe in three_frontends]
    seen: list[frozenset[str]] = []
    if kind == "sync":
        with Fleet(urls) as fleet:
            fleet.sleep(1).raise_for_errors()
            with fleet.staged_wake():
                seen += [fe.engine.state.asleep for fe in three_frontends]
    else:

        async def main() -> None:
            async with AsyncFleet(urls) as fleet:
                (await fleet.sleep(1)).raise_for_errors()
                async with fleet.staged_wake():
                    seen.extend(fe.engine.state.asleep for fe in three_frontends)

        asyncio.run(main())
    assert seen == [{"kv_cache"}] * 3
    for fe in three_frontends:
        assert _wakes(fe) == [["weights"], ["kv_cache"]] and not fe.engine.state.asleep


def test_a_fleet_target_failing_to_wake_its_weights_puts_the_others_back_to_sleep(
    three_frontends: list[Frontend],
) -> None:
    failing = three_frontends[1]
    ran = False
    with Fleet([fe.base_url for fe in three_frontends]) as fleet:
        fleet.sleep(1).raise_for_errors()
        failing.engine.script("wake_up", Raise("out of memory waking the weights"))
        with pytest.raises(FleetError) as caught, fleet.staged_wake():
            ran = True
    assert not ran, "the block ran although a target's weights did not wake"
    err = caught.value
    assert err.operation == "wake_up" and list(err.errors) == [failing.base_url]
    assert isinstance(err.errors[failing.base_url], EngineCallError)
    others = [three_frontends[0], three_frontends[2]]
    assert err.result.rollback is not None and list(err.result.rollback.ok) == [fe.base_url for fe in others]
    for fe in others:
        assert _wakes(fe) == [["weights"]]
        assert [c.args[0] for c in fe.engine.calls_for("sleep")] == [1, 1]
        assert fe.engine.state.asleep == BOTH
    assert failing.engine.state.asleep == BOTH
