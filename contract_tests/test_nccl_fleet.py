"""vLLM's own NCCL trainer engine over a fleet of three real frontends (Python, Rust, Rust): each server gets
its own rank offset after the world sizes are checked, through `WeightSync` over a `Fleet` and an
`AsyncFleet`. Only the communicator and the broadcast are played on the CPU (as in
test_vllm_weight_sync.py); every call the engine makes on its client is vLLM's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from cpu_trainer import cpu_nccl_trainer

from vllm_devclient import AsyncFleet, Fleet, FleetError, WeightSync, WorldSizeMismatchError
from vllm_devclient.testing.engine_actions import Raise, Return
from vllm_devclient.testing.frontends import Frontend
from vllm_devclient.testing.misbehaving import MisbehavingServer
from vllm_devclient.testing.misbehaving_behaviours import Answer

if TYPE_CHECKING:
    from vllm.distributed.weight_transfer import ModuleSource
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

pytestmark = [pytest.mark.needs("vllm"), pytest.mark.frontend]


@pytest.fixture
def three(three_frontends: list[Frontend]) -> list[Frontend]:
    return three_frontends


def _rpcs(fe: Frontend) -> list[tuple[str, Any]]:
    """The weight-transfer steps the engine got: (worker method, its init or update info) in order."""
    out: list[tuple[str, Any]] = []
    for c in fe.engine.calls:
        if c.kind == "utility" and c.method == "collective_rpc":
            kwargs = c.args[3] or {}
            out.append((c.args[0], kwargs.get("update_info", kwargs.get("init_info"))))
    return out


def _info(world_size: int) -> NCCLTrainerInitInfo:
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    return NCCLTrainerInitInfo(rank=0, master_address="127.0.0.1", master_port=29612, world_size=world_size)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_each_server_gets_its_own_rank_offset(kind: str, three: list[Frontend], source: ModuleSource) -> None:
    urls = [fe.base_url for fe in three]
    fleet: Fleet | AsyncFleet = Fleet(urls) if kind == "sync" else AsyncFleet(urls)
    sync = WeightSync(fleet)
    try:
        engine = cpu_nccl_trainer().trainer_init(_info(1 + 3), client=sync, source=source)
        engine.send_weights()
    finally:
        sync.close()
        if isinstance(fleet, Fleet):
            fleet.close()
    names = [m.name for m in source.metadata]
    assert engine.sent == names
    for index, fe in enumerate(three):
        steps = _rpcs(fe)
        assert [s for s, _ in steps] == [
            "init_weight_transfer_engine", "start_weight_update", "update_weights", "finish_weight_update",
        ]  # fmt: skip
        init = steps[0][1]
        # Server i starts after the trainer (rank 0) and the servers before it (world size 1 each here).
        assert (init["rank_offset"], init["world_size"]) == (1 + index, 4), fe.frontend
        assert (init["master_address"], init["master_port"], init["packed"]) == ("127.0.0.1", 29612, True)
        assert steps[2][1]["names"] == names


def test_a_trainer_planned_for_fewer_servers_is_refused_before_anything_is_sent(
    three: list[Frontend], source: ModuleSource
) -> None:
    with Fleet([fe.base_url for fe in three]) as fleet, pytest.raises(WorldSizeMismatchError) as caught:
        cpu_nccl_trainer().trainer_init(_info(1 + 2), client=WeightSync(fleet), source=source)
    err = caught.value
    assert err.planned == 3 and err.world_sizes == {fe.base_url: 1 for fe in three}
    assert "world_size=4" in str(err)
    assert all(_rpcs(fe) == [] for fe in three)


def test_a_server_that_gives_no_world_size_is_named(three: list[Frontend], source: ModuleSource) -> None:
    with MisbehavingServer() as odd:
        odd.script("/get_world_size", Answer(500, json={"error": {"message": "no executor"}}))
        urls = [three[0].base_url, odd.base_url, three[1].base_url]
        with Fleet(urls, max_retries=0) as fleet, pytest.raises(WorldSizeMismatchError) as caught:
            cpu_nccl_trainer().trainer_init(_info(4), client=WeightSync(fleet), source=source)
        assert [r.path for r in odd.requests] == ["/get_world_size"]
    err = caught.value
    assert list(err.unanswered) == [odd.base_url] and odd.base_url in str(err)
    assert set(err.world_sizes) == {three[0].base_url, three[1].base_url}
    assert _rpcs(three[0]) == [] and _rpcs(three[1]) == []


def test_an_init_failing_on_one_server_is_shut_down_on_the_others(
    three: list[Frontend], source: ModuleSource
) -> None:
    three[2].engine.script("collective_rpc", [Raise("NCCL rendezvous failed"), Return([None])])
    with Fleet([fe.base_url for fe in three]) as fleet, pytest.raises(FleetError) as caught:
        cpu_nccl_trainer().trainer_init(_info(4), client=WeightSync(fleet), source=source)
    err = caught.value
    assert err.operation == "init_weight_transfer_engine" and list(err.errors) == [three[2].base_url]
    rollback = err.result.rollback
    assert rollback is not None and list(rollback.ok) == [three[0].base_url, three[1].base_url]
    for index, fe in enumerate(three[:2]):
        steps = _rpcs(fe)
        assert [s for s, _ in steps] == ["init_weight_transfer_engine", "shutdown_weight_transfer_engine"]
        assert steps[0][1]["rank_offset"] == 1 + index
    assert [s for s, _ in _rpcs(three[2])] == ["init_weight_transfer_engine"]


def test_the_fleets_own_init_plans_the_ranks_too(three: list[Frontend]) -> None:
    payload = {"master_address": "127.0.0.1", "master_port": 29613, "rank_offset": 1, "world_size": 4}
    with Fleet([fe.base_url for fe in three]) as fleet:
        assert fleet.init_weight_transfer_engine(payload).all_ok
    assert [_rpcs(fe)[0][1]["rank_offset"] for fe in three] == [1, 2, 3]
