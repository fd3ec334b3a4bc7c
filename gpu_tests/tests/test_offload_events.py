"""Per-cache-group KV event accounting, fed with vLLM's own event classes (vllm 0.33.0, CPU build).

Events are built with ``vllm.distributed.kv_events`` exactly as vLLM's GPU block pool and its offloading
connector build them (GPU stores carry ``group_idx`` and ``kv_cache_spec_kind``; CPU placeholders one hash,
no tokens, ``block_size=0``; self-describing CPU stores the chunk's tokens), encoded with vLLM's own
``KVEventBatch`` and msgpack, decoded by this package, and accounted per (medium, group).
"""

from __future__ import annotations

import importlib.util
from types import ModuleType
from typing import Any

import msgspec
import pytest

from gpu_tests.offload_check.events import GroupEventAccount
from vllm_devclient.kv_events import decode_payload

pytestmark = pytest.mark.needs("vllm")

BLOCK = 16


def kv_events() -> ModuleType:
    """vllm.distributed.kv_events (imported once: sys.modules keeps it)."""
    return importlib.import_module("vllm.distributed.kv_events")


def gpu_store(group: int, kind: str, hashes: list[int], parent: int | None = None) -> Any:
    return kv_events().BlockStored(
        block_hashes=hashes,
        parent_block_hash=parent,
        token_ids=list(range(BLOCK * len(hashes))),
        block_size=BLOCK,
        lora_id=None,
        medium="GPU",
        lora_name=None,
        group_idx=group,
        kv_cache_spec_kind=kind,
    )


def cpu_store(hashes: list[int], group: int | None) -> Any:
    """A CPU-tier store with no tokens and ``block_size=0``."""
    return kv_events().BlockStored(
        block_hashes=hashes,
        parent_block_hash=None,
        token_ids=[],
        block_size=0,
        lora_id=None,
        medium="CPU",
        lora_name=None,
        group_idx=group,
    )


def cpu_placeholder(group: int, chunk_hash: int) -> Any:
    # OffloadingEventsTracker._placeholder_stored: one hash per chunk, no tokens, block_size 0.
    return cpu_store([chunk_hash], group)


def cpu_self_describing(group: int, kind: str, hashes: list[int], tokens: int | None = None) -> Any:
    return kv_events().BlockStored(
        block_hashes=hashes,
        parent_block_hash=None,
        token_ids=list(range(BLOCK * len(hashes) if tokens is None else tokens)),
        block_size=BLOCK,
        lora_id=None,
        medium="CPU",
        lora_name=None,
        group_idx=group,
        kv_cache_spec_kind=kind,
    )


def removed(medium: str, group: int, hashes: list[int]) -> Any:
    return kv_events().BlockRemoved(block_hashes=hashes, medium=medium, group_idx=group)


def over_the_wire(events: list[Any]) -> list[Any]:
    """vLLM's batch -> msgpack bytes -> this package's decoder."""
    payload = msgspec.msgpack.encode(kv_events().KVEventBatch(ts=1.0, events=events))
    return decode_payload(payload).events


def gpu() -> list[Any]:
    """A hybrid layout like a tiny Nemotron-H or Gemma 4: two full-attention groups and a non-attention
    group (made by each test: building vLLM's events imports vLLM)."""
    return [
        gpu_store(0, "mamba", [1, 2]),
        gpu_store(1, "full_attention", [11, 12]),
        gpu_store(2, "full_attention", [21, 22]),
    ]


@pytest.mark.parametrize("wire", [False, True], ids=["vllm-objects", "decoded"])
def test_cpu_stores_must_cover_every_full_attention_group(wire: bool) -> None:
    feed = over_the_wire if wire else (lambda events: events)
    account = GroupEventAccount()
    account.add(feed([*gpu(), cpu_placeholder(0, 2), cpu_placeholder(1, 12)]))
    assert account.gpu_full_attention_groups() == [1, 2]
    assert account.missing_cpu_groups() == [2]  # "some CPU store" is not enough
    account.add(feed([cpu_placeholder(2, 22)]))
    summary = account.summary()
    assert summary.missing_cpu_groups == []
    assert summary.cpu_stored_groups == [0, 1, 2]
    assert summary.group_kinds == {0: "mamba", 1: "full_attention", 2: "full_attention"}
    # The CPU placeholders name no kind; the group's kind comes from the GPU events.
    assert [(g.medium, g.group_idx, g.kind, g.stored_blocks) for g in summary.groups] == [
        ("CPU", 0, "mamba", 1),
        ("CPU", 1, "full_attention", 1),
        ("CPU", 2, "full_attention", 1),
        ("GPU", 0, "mamba", 2),
        ("GPU", 1, "full_attention", 2),
        ("GPU", 2, "full_attention", 2),
    ]
    assert summary.payload_problems == []  # placeholders everywhere, as asked
    assert summary.cpu_blocks_by_group() == {0: 1, 1: 1, 2: 1}


def test_mla_groups_count_as_full_attention() -> None:
    account = GroupEventAccount()
    account.add([gpu_store(0, "mla_attention", [1])])
    assert account.missing_cpu_groups() == [0]
    account.add([cpu_placeholder(0, 1)])
    assert account.missing_cpu_groups() == []


def test_self_describing_payloads_full_attention_carry_tokens_others_stay_placeholders() -> None:
    account = GroupEventAccount(self_describing=True)
    account.add(
        over_the_wire(
            [
                *gpu(),
                cpu_self_describing(1, "full_attention", [11, 12]),  # 2 hashes x 16 tokens
                cpu_placeholder(0, 2),  # the mamba group keeps the placeholder
            ]
        )
    )
    assert account.summary().payload_problems == []
    account.add(over_the_wire([cpu_self_describing(2, "full_attention", [21, 22], tokens=17)]))
    account.add(over_the_wire([cpu_self_describing(0, "mamba", [1])]))  # a non-attention group with tokens
    problems = account.summary().payload_problems
    assert len(problems) == 2
    assert any(
        "group 2 (full_attention) expected self-describing" in p and "tokens=17" in p for p in problems
    )
    assert any("group 0 (mamba) expected placeholder" in p for p in problems)


def test_without_self_describing_every_cpu_store_must_be_a_placeholder() -> None:
    account = GroupEventAccount(self_describing=False)
    account.add([*gpu(), cpu_self_describing(1, "full_attention", [11, 12])])
    (problem,) = account.summary().payload_problems
    assert "expected placeholder" in problem


def cpu_ungrouped(hashes: list[int]) -> Any:
    # vLLM 0.23.0's OffloadingConnectorScheduler.take_events: one event per stored job, no group_idx.
    return cpu_store(hashes, None)


@pytest.mark.parametrize("wire", [False, True], ids=["vllm-objects", "decoded"])
def test_ungrouped_cpu_stores_of_an_older_release_follow_their_own_rule(wire: bool) -> None:
    feed = over_the_wire if wire else (lambda events: events)
    account = GroupEventAccount(self_describing=True)
    account.add(feed([*gpu(), cpu_ungrouped([2, 12, 22]), cpu_ungrouped([1])]))
    summary = account.summary()
    # Which group an ungrouped store holds cannot be told: no group is called missing, and it says so.
    assert summary.ungrouped_cpu_blocks == 4 and summary.missing_cpu_groups == []
    assert summary.payload_problems == []
    account.add(feed([cpu_ungrouped([])]))  # an ungrouped store must still name its blocks
    (problem,) = account.summary().payload_problems
    assert "ungrouped" in problem and "hashes=0" in problem
    # Without ungrouped stores the coverage check stands.
    grouped = GroupEventAccount()
    grouped.add(feed([*gpu(), cpu_placeholder(1, 12)]))
    assert grouped.summary().ungrouped_cpu_blocks == 0 and grouped.missing_cpu_groups() == [2]


def test_repeated_hashes_are_reference_counted() -> None:
    # Chunks overlapping a shared prefix re-announce the shared hashes once per chunk.
    account = GroupEventAccount(self_describing=True)
    account.add(
        [
            *gpu(),
            cpu_self_describing(1, "full_attention", [11, 12]),
            cpu_self_describing(1, "full_attention", [12, 13]),
        ]
    )
    group1 = next(g for g in account.summary().groups if g.medium == "CPU" and g.group_idx == 1)
    assert (group1.stored_blocks, group1.live_blocks, group1.repeated_stores) == (4, 3, 1)
    account.add([removed("CPU", 1, [12])])  # one of two references goes: 12 stays live
    group1 = next(g for g in account.summary().groups if g.medium == "CPU" and g.group_idx == 1)
    assert group1.live_blocks == 3 and account.summary().refcount_problems == []
    account.add([removed("CPU", 1, [12, 11, 13])])
    group1 = next(g for g in account.summary().groups if g.medium == "CPU" and g.group_idx == 1)
    assert group1.live_blocks == 0 and group1.removed_blocks == 4
    account.mark("clean-1:reload")
    account.add([removed("CPU", 1, [12])])  # one remove too many: where in the sequence is said
    (problem,) = account.summary().refcount_problems
    assert (
        "removed hash 12 that is not stored" in problem
        and "after clean-1:reload, 0 AllBlocksCleared" in problem
    )


def test_a_full_reset_shows_as_all_blocks_cleared_or_removes() -> None:
    account = GroupEventAccount()
    account.add(over_the_wire([*gpu(), cpu_placeholder(1, 12)]))
    account.mark("before")
    assert account.since("before").cleared == 0
    account.add(over_the_wire([kv_events().AllBlocksCleared()]))
    delta = account.since("before")
    assert delta.cleared == 1 and delta.removed("GPU") == 0
    # The GPU pool is empty after the clear; the CPU tier's entries stay.
    live = {(g.medium, g.group_idx): g.live_blocks for g in account.summary().groups}
    assert live[("GPU", 1)] == 0 and live[("CPU", 1)] == 1
    account.mark("again")
    account.add(over_the_wire([removed("CPU", 1, [12])]))
    assert account.since("again").removed("CPU") == 1 and account.since("again").cleared == 0


def test_conflicting_kinds_for_one_group_are_reported() -> None:
    account = GroupEventAccount()
    account.add([gpu_store(0, "full_attention", [1]), gpu_store(0, "sliding_window", [2])])
    assert account.summary().payload_problems == ["group 0 announced as full_attention and as sliding_window"]


def test_reload_proven_notes_what_ungrouped_cpu_stores_leave_unchecked() -> None:
    from gpu_tests.offload_check.assertions import reload_proven
    from gpu_tests.offload_check.settings import CheckSettings
    from vllm_devclient.metrics import MetricsDelta

    settings = CheckSettings(expect_cpu_store_events=True)
    windows = {
        "cold": MetricsDelta(seconds=1, external_prefix_cache_hits=0),
        "reload": MetricsDelta(seconds=1, external_prefix_cache_hits=64),
    }
    older = GroupEventAccount()
    older.add([*gpu(), cpu_ungrouped([12, 22])])
    result = reload_proven(settings, windows, 2, older.summary())
    assert result.passed and "per-group CPU stores not checked: 2 CPU blocks" in result.message
    # A grouped stream that misses a full-attention group still fails.
    newer = GroupEventAccount()
    newer.add([*gpu(), cpu_placeholder(1, 12)])
    result = reload_proven(settings, windows, 1, newer.summary())
    assert not result.passed and "no CPU store for full-attention group(s) [2]" in result.message
