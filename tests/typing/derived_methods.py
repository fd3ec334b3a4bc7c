"""What `mypy --strict` sees of the derived methods: both fleets' (from the client's methods) and the
blocking client's route methods (from the async ones). tests/test_derived_methods.py checks that mypy
accepts every line but those marked `rejected`, and rejects each of those."""

from __future__ import annotations

from typing import assert_type

from vllm_devclient import (
    AsyncFleet,
    BarrierResult,
    DevClient,
    Fleet,
    FleetResult,
    MessageResult,
    RawResponse,
    SleepResult,
    StatusResult,
)


async def derived(afleet: AsyncFleet, fleet: Fleet, client: DevClient) -> None:
    assert_type(await afleet.sleep(2, mode="wait"), FleetResult[SleepResult])
    assert_type(fleet.sleep(2, mode="wait", timeout=3.0), FleetResult[SleepResult])
    assert_type(await afleet.pause("keep", rollback=True), FleetResult[StatusResult])
    assert_type(fleet.pause(), FleetResult[StatusResult])
    assert_type(await afleet.wait_until_ready(deadline=5.0), FleetResult[None])
    assert_type(fleet.barrier(deadline=5.0), FleetResult[BarrierResult])
    assert_type(await afleet.init_weight_transfer_engine({"x": 1}), FleetResult[MessageResult])
    assert_type(fleet.init_weight_transfer_engine({"x": 1}), FleetResult[MessageResult])
    assert_type(client.sleep(2), SleepResult)
    assert_type(client.with_raw_response.sleep(2), RawResponse[SleepResult])
    fleet.sleep("deep")  # rejected
    await afleet.health(timeout="x")  # rejected
    fleet.wait_until_ready(timeout=1.0)  # rejected
    await afleet.collective_rpc()  # rejected
    client.get_world_size(False)  # rejected
    client.server_info(config_format="yaml")  # rejected
    client.with_raw_response.sleep(mode="later")  # rejected
