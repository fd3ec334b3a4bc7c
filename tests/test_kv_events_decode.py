"""Decoding every payload shape vLLM has published, from hand-built msgpack (no vllm import)."""

from __future__ import annotations

import msgspec
import pytest

from vllm_devclient.kv_events import (
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVEvent,
    KVEventBatch,
    KVEventTally,
    UnknownEvent,
    decode_payload,
)

ENC = msgspec.msgpack.Encoder()
H32 = b"\xab" * 32


def test_current_map_events_with_defaults_omitted() -> None:
    payload = ENC.encode(
        [
            1.5,
            [
                {"type": "BlockStored", "block_hashes": [1, 2**64 - 1], "parent_block_hash": None,
                 "token_ids": [7, 8], "block_size": 16, "lora_id": None, "medium": "GPU", "lora_name": None,
                 "group_idx": 0},
                {"type": "BlockRemoved", "block_hashes": [1], "medium": "CPU"},
                {"type": "AllBlocksCleared"},
            ],
            3,
        ]
    )  # fmt: skip
    got = decode_payload(payload)
    assert (got.ts, got.data_parallel_rank) == (1.5, 3)
    assert got.events == [
        BlockStored(block_hashes=[1, 2**64 - 1], token_ids=[7, 8], block_size=16, medium="GPU", group_idx=0),
        BlockRemoved(block_hashes=[1], medium="CPU"),
        AllBlocksCleared(),
    ]


def test_unknown_fields_and_trailing_batch_elements_are_ignored() -> None:
    payload = ENC.encode(
        [
            2.0,
            [{"type": "BlockRemoved", "block_hashes": [5], "medium": "GPU", "new_field": {"x": 1}}],
            0,
            "future",
        ]
    )
    got = decode_payload(payload)
    assert got.events == [BlockRemoved(block_hashes=[5], medium="GPU")]
    assert got.data_parallel_rank == 0


def test_bytes_hashes() -> None:
    payload = ENC.encode(
        [0.0, [{"type": "BlockStored", "block_hashes": [H32, b"\x00"], "parent_block_hash": H32,
                "token_ids": [], "block_size": 0, "lora_id": None, "medium": "CPU", "lora_name": None}]]
    )  # fmt: skip
    (event,) = decode_payload(payload).events
    assert isinstance(event, BlockStored)
    assert event.block_hashes == [H32, b"\x00"] and event.parent_block_hash == H32
    assert decode_payload(payload).data_parallel_rank is None  # old two-element batch


def test_older_tagged_array_events() -> None:
    """Releases before vLLM PR #42892 sent each event as ["Name", field, field, ...] in declaration order."""
    payload = ENC.encode(
        [
            3.0,
            [
                ["BlockStored", [H32], None, [1, 2, 3], 16, None],  # before `medium` existed
                ["BlockStored", [10, 11], 9, [4], 16, 2, "GPU", "lora-x", [["lora-x"], None], 1],
                ["BlockRemoved", [10], "GPU", 1, None, None, "a-future-field"],
                ["AllBlocksCleared"],
            ],
        ]
    )
    got = decode_payload(payload)
    assert got.events == [
        BlockStored(block_hashes=[H32], token_ids=[1, 2, 3], block_size=16),
        BlockStored(block_hashes=[10, 11], parent_block_hash=9, token_ids=[4], block_size=16, lora_id=2,
                    medium="GPU", lora_name="lora-x", extra_keys=[("lora-x",), None], group_idx=1),
        BlockRemoved(block_hashes=[10], medium="GPU", group_idx=1),
        AllBlocksCleared(),
    ]  # fmt: skip


def test_map_encoded_batch() -> None:
    """One development line of vLLM sent the batch itself as a map."""
    payload = ENC.encode({"ts": 4.0, "events": [{"type": "AllBlocksCleared"}], "data_parallel_rank": 1})
    got = decode_payload(payload)
    assert (got.ts, got.events, got.data_parallel_rank) == (4.0, [AllBlocksCleared()], 1)


def test_unknown_event_type_keeps_raw_data_next_to_known_events() -> None:
    raw_map = {"type": "BlockMoved", "block_hashes": [1], "to": "STORAGE"}
    raw_array = ["BlockPinned", [2]]
    payload = ENC.encode(
        [5.0, [raw_map, {"type": "BlockRemoved", "block_hashes": [3], "medium": None}, raw_array, 42], 0]
    )
    got = decode_payload(payload)
    assert got.events == [
        UnknownEvent("BlockMoved", raw_map),
        BlockRemoved(block_hashes=[3]),
        UnknownEvent("BlockPinned", raw_array),
        UnknownEvent(None, 42),
    ]


def test_known_type_with_wrong_field_type_is_kept_raw() -> None:
    raw = {"type": "BlockStored", "block_hashes": "not-a-list"}
    (event,) = decode_payload(ENC.encode([0.0, [raw]])).events
    assert event == UnknownEvent("BlockStored", raw)


@pytest.mark.parametrize(
    ("payload", "error"),
    [
        (b"\xc1", msgspec.DecodeError),
        (ENC.encode("text"), ValueError),
        (ENC.encode(["ts", []]), ValueError),
        (ENC.encode([1.0, "events"]), ValueError),
    ],
)
def test_garbage_raises_typed_errors(payload: bytes, error: type[Exception]) -> None:
    with pytest.raises(error):
        decode_payload(payload)


def test_tally_counts_blocks_per_medium() -> None:
    tally = KVEventTally()
    events: list[KVEvent] = [
        BlockStored(block_hashes=[1, 2], medium="CPU"),
        BlockStored(block_hashes=[3], medium="GPU"),
        BlockStored(block_hashes=[4]),
        BlockRemoved(block_hashes=[1], medium="CPU"),
        AllBlocksCleared(),
        UnknownEvent("X", {}),
    ]
    tally.add(KVEventBatch(0, 0, 0.0, events, 0))
    snapshot = tally.copy()
    tally.add(KVEventBatch(0, 1, 0.0, [BlockStored(block_hashes=[9], medium="CPU")], 0))
    assert (tally.stored("CPU"), tally.stored("GPU"), tally.stored(None), tally.removed("CPU")) == (
        3,
        1,
        1,
        1,
    )
    assert tally.stored_events == {"CPU": 2, "GPU": 1, None: 1}
    assert tally.stored_blocks == {"CPU": 3, "GPU": 1, None: 1}
    assert tally.removed_blocks == {"CPU": 1}
    assert (tally.batches, tally.cleared, tally.unknown) == (2, 1, 1)
    assert snapshot.stored("CPU") == 2 and snapshot.batches == 1  # copies do not follow


def test_events_are_immutable_and_encodable() -> None:
    event = BlockStored(block_hashes=[1], medium="CPU")
    with pytest.raises(AttributeError):
        event.medium = "GPU"  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(event))["type"] == "BlockStored"
