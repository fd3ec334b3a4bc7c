"""rank_plan: each server's NCCL rank offset from the servers' world sizes (no I/O), and the fleets' own
init_weight_transfer_engine using it (mock transports; real frontends: contract_tests/test_nccl_fleet.py)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from vllm_devclient import APIConnectionError, AsyncFleet, InvalidParameterError, WorldSizeMismatchError
from vllm_devclient.rank_plan import plans_ranks, worker_payloads

# What vLLM 0.33's NCCLTrainerWeightTransferEngine sends (nccl_common.build_worker_init_payload).
PAYLOAD = {
    "master_address": "10.0.0.1",
    "master_port": 29500,
    "rank_offset": 1,
    "world_size": 8,
    "packed": True,
}


def test_servers_of_different_sizes_follow_one_another_after_the_trainer() -> None:
    sizes = {"http://a": 4, "http://b": 1, "http://c": 2}
    out = worker_payloads(PAYLOAD, sizes)
    assert [p["rank_offset"] for p in out.values()] == [1, 5, 6]
    assert list(out) == list(sizes)
    # Everything else is the trainer's, unchanged; the trainer's payload is not touched.
    assert all({**p, "rank_offset": 1} == PAYLOAD for p in out.values())
    assert PAYLOAD["rank_offset"] == 1


def test_a_trainer_of_several_ranks_shifts_every_server() -> None:
    out = worker_payloads({**PAYLOAD, "rank_offset": 2, "world_size": 4}, {"http://a": 1, "http://b": 1})
    assert [p["rank_offset"] for p in out.values()] == [2, 3]


def test_sizes_that_do_not_make_the_plan_are_refused_with_the_size_that_would() -> None:
    with pytest.raises(WorldSizeMismatchError, match="world_size=7") as caught:
        worker_payloads(PAYLOAD, {"http://a": 4, "http://b": 2})
    assert caught.value.world_sizes == {"http://a": 4, "http://b": 2} and caught.value.planned == 8


def test_a_server_without_an_answer_is_named() -> None:
    down = APIConnectionError("cannot connect", method="GET", url="http://b/get_world_size")
    with pytest.raises(WorldSizeMismatchError, match="http://b: APIConnectionError") as caught:
        worker_payloads(PAYLOAD, {"http://a": 7, "http://b": down})
    assert caught.value.unanswered == {"http://b": down}


@pytest.mark.parametrize("size", [0, -1, True, 2.0, None])
def test_an_odd_world_size_is_refused_not_used(size: object) -> None:
    with pytest.raises(WorldSizeMismatchError, match="not a positive whole number"):
        worker_payloads(PAYLOAD, {"http://a": 7, "http://b": size})


@pytest.mark.parametrize("field", [{"rank_offset": 0}, {"world_size": "8"}])
def test_a_payload_without_whole_numbers_is_refused(field: dict[str, object]) -> None:
    with pytest.raises(WorldSizeMismatchError, match="whole numbers"):
        worker_payloads({**PAYLOAD, **field}, {"http://a": 7})


def test_only_rank_placed_payloads_are_planned() -> None:
    assert plans_ranks(PAYLOAD)
    assert not plans_ranks({"packed": True})  # IPC: one payload serves every server
    assert not plans_ranks([PAYLOAD])


def _fleet_of_sizes(sizes: dict[str, int | None], seen: list[tuple[str, object]]) -> AsyncFleet:
    """A fleet whose targets answer /get_world_size with their size (None: a 500) and record every init."""

    def answer(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if request.url.path == "/get_world_size":
            size = sizes[host]
            return httpx.Response(200, json={"world_size": size}) if size else httpx.Response(500, json={})
        seen.append((host, json.loads(request.content)["init_info"]))
        return httpx.Response(200, json={"message": "ok"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    return AsyncFleet([f"http://{h}" for h in sizes], http_client=http, max_retries=0)


def test_the_fleets_own_init_gives_servers_of_different_sizes_their_offsets() -> None:
    seen: list[tuple[str, object]] = []
    fleet = _fleet_of_sizes({"a": 2, "b": 4, "c": 1}, seen)
    result = asyncio.run(fleet.init_weight_transfer_engine({**PAYLOAD, "world_size": 8}))
    assert result.all_ok
    assert {host: info["rank_offset"] for host, info in seen} == {"a": 1, "b": 3, "c": 7}  # type: ignore[index]


def test_the_fleets_own_init_sends_nothing_when_a_size_is_missing() -> None:
    seen: list[tuple[str, object]] = []
    fleet = _fleet_of_sizes({"a": 2, "b": None}, seen)
    with pytest.raises(WorldSizeMismatchError, match="http://b"):
        asyncio.run(fleet.init_weight_transfer_engine({**PAYLOAD, "world_size": 3}))
    assert seen == []


def test_an_ipc_payload_goes_to_every_server_unchanged_without_asking_sizes() -> None:
    seen: list[tuple[str, object]] = []
    fleet = _fleet_of_sizes({"a": None, "b": None}, seen)
    assert asyncio.run(fleet.init_weight_transfer_engine({"packed": True})).all_ok
    assert seen == [("a", {"packed": True}), ("b", {"packed": True})]


def test_a_fleet_too_narrow_for_the_rendezvous_is_refused() -> None:
    fleet = AsyncFleet(["http://a", "http://b", "http://c"], max_concurrency=2)
    with pytest.raises(InvalidParameterError, match="max_concurrency=2"):
        asyncio.run(fleet.init_weight_transfer_engine(PAYLOAD))
