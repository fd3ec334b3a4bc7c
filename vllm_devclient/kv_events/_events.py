"""Typed KV-cache events and the decoding of every payload shape vLLM has published.

Wire facts (vLLM 0.33.0 `vllm/distributed/kv_events.py`, checked against older releases):

- a batch is msgpack `[ts, events, data_parallel_rank]` (positional; the rank is absent in old releases,
  and one development line sent the batch as a map with those keys);
- an event is a map tagged by `"type"` (current releases), or a positional array whose first element is
  the type name (releases before vLLM PR #42892). Fields that still hold their default are omitted;
- block hashes are unsigned 64-bit ints by default, raw bytes with `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0`.

The current shape decodes through one typed msgspec decoder (the hot path); anything else goes through a
generic decode and per-event conversion, so a batch with an event type this client does not know still
yields its known events plus an `UnknownEvent` that keeps the raw data.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, field
from typing import Any, Final, Literal, TypeAlias

import msgspec

__all__ = [
    "MEDIUM_CPU",
    "MEDIUM_GPU",
    "MEDIUM_STORAGE",
    "AllBlocksCleared",
    "BlockHash",
    "BlockRemoved",
    "BlockStored",
    "DecodedPayload",
    "EventsLost",
    "KVEvent",
    "KVEventBatch",
    "KVEventTally",
    "LossReason",
    "MediumTally",
    "PublisherRestarted",
    "UnknownEvent",
    "decode_payload",
]

MEDIUM_GPU: Final = "GPU"
MEDIUM_CPU: Final = "CPU"
MEDIUM_STORAGE: Final = "STORAGE"

BlockHash: TypeAlias = int | bytes


class _Event(msgspec.Struct, tag=True, frozen=True, gc=False):
    """Base of the known events: the class name is the `"type"` tag vLLM writes."""


class BlockStored(_Event, frozen=True):
    """Blocks entered a cache tier (`medium`: "GPU", "CPU" for the offloading connector, "STORAGE"...).

    Only `block_hashes` is required: every other field has a default so that older releases (no `medium`,
    no `lora_name`) decode too. The offloading connector's default "placeholder" CPU events carry one hash
    per offloaded chunk, `token_ids=[]`, `block_size=0` and no parent.
    """

    block_hashes: list[BlockHash]
    parent_block_hash: BlockHash | None = None
    token_ids: list[int] = []
    block_size: int = 0
    lora_id: int | None = None
    medium: str | None = None
    lora_name: str | None = None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(_Event, frozen=True):
    """Blocks left a cache tier."""

    block_hashes: list[BlockHash]
    medium: str | None = None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(_Event, frozen=True):
    """The GPU prefix cache was reset (sent after a successful /reset_prefix_cache); carries no medium."""


class UnknownEvent(msgspec.Struct, frozen=True, gc=False):
    """An event this client cannot type: `type` is its tag when it has one, `data` the decoded raw value."""

    type: str | None
    data: Any


KVEvent: TypeAlias = BlockStored | BlockRemoved | AllBlocksCleared | UnknownEvent

LossReason: TypeAlias = Literal["replay_unavailable", "not_in_replay_buffer", "replay_timeout", "undecodable"]


class EventsLost(msgspec.Struct, frozen=True, gc=False):
    """Batches `first_seq..last_seq` (inclusive) of one rank that this subscriber could not deliver.

    reason: "replay_unavailable" (not asked for: no replay endpoint, replay backing off after a timeout,
    or a restarted publisher's predecessor, which is gone), "not_in_replay_buffer" (the publisher no
    longer buffers them, and the live stream passed them or stayed silent), "replay_timeout" (asked for,
    and the answer did not start, or stalled, within the replay timeout), "undecodable"
    (the payload arrived but is not a KV event batch; `detail` says why).
    """

    rank: int
    first_seq: int
    last_seq: int
    reason: LossReason
    detail: str = ""

    @property
    def count(self) -> int:
        return self.last_seq - self.first_seq + 1


class PublisherRestarted(msgspec.Struct, frozen=True, gc=False):
    """A rank's publisher (the engine) restarted and counts from 0 again; set on the new publisher's first
    batch. Seen from a lower sequence number, or from a reconnection or a replay that answers other bytes
    for the last delivered sequence number (see `_stream`)."""

    rank: int
    last_seq: int
    """The last sequence number of the previous publisher, delivered or reported lost."""
    first_seq: int
    """The first sequence number received from the new one (live if any came live, else replayed)."""


class KVEventBatch(msgspec.Struct, frozen=True, gc=False):
    """One published batch (at most one per engine step) of one data-parallel rank.

    `rank` is the rank of the socket it came from; `data_parallel_rank` what the publisher stamped.
    `losses` lists what was lost in this rank's stream right before this batch, `restart` is set on the
    first batch after a publisher restart; both are also collected on the subscriber.
    """

    rank: int
    seq: int
    ts: float
    events: list[KVEvent]
    data_parallel_rank: int | None
    replayed: bool = False
    losses: tuple[EventsLost, ...] = ()
    restart: PublisherRestarted | None = None


class _WireBatch(msgspec.Struct, array_like=True, gc=False):
    """The current batch shape; trailing fields a newer release may add are ignored by msgspec."""

    ts: float
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]
    data_parallel_rank: int | None = None


_KNOWN: dict[str, type[BlockStored] | type[BlockRemoved] | type[AllBlocksCleared]] = {
    cls.__name__: cls for cls in (BlockStored, BlockRemoved, AllBlocksCleared)
}


class DecodedPayload(msgspec.Struct, frozen=True, gc=False):
    """A decoded batch payload, without the transport's sequence number."""

    ts: float
    events: list[KVEvent]
    data_parallel_rank: int | None


class _PayloadDecoder:
    """Typed decoder for the current shape, generic fallback for the rest (one instance per subscriber)."""

    __slots__ = ("_any", "_typed")

    def __init__(self) -> None:
        self._typed = msgspec.msgpack.Decoder(_WireBatch)
        self._any = msgspec.msgpack.Decoder()

    def decode(self, payload: bytes) -> tuple[float, list[KVEvent], int | None]:
        """Raise msgspec.DecodeError (not msgpack) or ValueError (not a batch) for garbage."""
        try:
            wire = self._typed.decode(payload)
        except msgspec.ValidationError:
            return self.decode_any(payload)
        events: list[KVEvent] = wire.events  # type: ignore[assignment]  # list is invariant; never mutated
        return wire.ts, events, wire.data_parallel_rank

    def typed(self) -> msgspec.msgpack.Decoder[_WireBatch]:
        """The hot-path decoder for the current shape; fall back to `decode_any` on ValidationError."""
        return self._typed

    def decode_any(self, payload: bytes) -> tuple[float, list[KVEvent], int | None]:
        """Any shape vLLM has sent, through a generic decode and per-event conversion."""
        raw = self._any.decode(payload)
        ts: object
        events: object
        rank: object
        if isinstance(raw, list) and len(raw) >= 2:
            ts, events = raw[0], raw[1]
            rank = raw[2] if len(raw) > 2 else None
        elif isinstance(raw, dict):
            ts, events, rank = raw.get("ts"), raw.get("events"), raw.get("data_parallel_rank")
        else:
            raise ValueError(f"payload is a {type(raw).__name__}, not a KV event batch")
        if isinstance(ts, bool) or not isinstance(ts, int | float):
            raise ValueError(f"batch timestamp is {ts!r}, not a number")
        if not isinstance(events, list):
            raise ValueError(f"batch events are a {type(events).__name__}, not a list")
        if rank is not None and (isinstance(rank, bool) or not isinstance(rank, int)):
            rank = None
        return float(ts), [_convert_event(e) for e in events], rank


def _convert_event(raw: object) -> KVEvent:
    """Type one generically decoded event: by name for maps, by the known field order for tagged arrays."""
    name: object = None
    if isinstance(raw, dict):
        name = raw.get("type")
        cls = _KNOWN.get(name) if isinstance(name, str) else None
        if cls is not None:
            try:
                return msgspec.convert(raw, cls)
            except msgspec.ValidationError:
                pass
    elif isinstance(raw, list) and raw and isinstance(raw[0], str):
        name = raw[0]
        cls = _KNOWN.get(raw[0])
        if cls is not None:
            # Positional events (older releases) list the fields in declaration order; extra trailing
            # values from a newer release are dropped by zip.
            try:
                return msgspec.convert(dict(zip(cls.__struct_fields__, raw[1:], strict=False)), cls)
            except msgspec.ValidationError:
                pass
    return UnknownEvent(name if isinstance(name, str) else None, raw)


_DEFAULT_DECODER = _PayloadDecoder()


def decode_payload(payload: bytes) -> DecodedPayload:
    """Decode the last frame of a KV-event message (any shape vLLM has sent).

    Raises msgspec.DecodeError when it is not msgpack, ValueError when it is msgpack but not a batch.
    """
    ts, events, rank = _DEFAULT_DECODER.decode(payload)
    return DecodedPayload(ts, events, rank)


@dataclass(slots=True)
class MediumTally:
    """Counts for one medium ("GPU", "CPU", ..., or None for events without one)."""

    stored_events: int = 0
    stored_blocks: int = 0
    removed_events: int = 0
    removed_blocks: int = 0


@dataclass(slots=True)
class KVEventTally:
    """Running counts over the batches a subscriber has delivered (announcements, not distinct blocks:
    vLLM may announce the same hash more than once, for example per overlapping offloaded chunk)."""

    batches: int = 0
    media: dict[str | None, MediumTally] = field(default_factory=dict)
    cleared: int = 0
    unknown: int = 0
    lost_batches: int = 0
    restarts: int = 0

    def stored(self, medium: str | None = MEDIUM_CPU) -> int:
        """Block hashes announced stored in `medium` (None: events without a medium, i.e. old releases)."""
        counts = self.media.get(medium)
        return 0 if counts is None else counts.stored_blocks

    def removed(self, medium: str | None = MEDIUM_CPU) -> int:
        """Block hashes announced removed from `medium`."""
        counts = self.media.get(medium)
        return 0 if counts is None else counts.removed_blocks

    @property
    def stored_blocks(self) -> dict[str | None, int]:
        return {m: c.stored_blocks for m, c in self.media.items() if c.stored_events}

    @property
    def stored_events(self) -> dict[str | None, int]:
        return {m: c.stored_events for m, c in self.media.items() if c.stored_events}

    @property
    def removed_blocks(self) -> dict[str | None, int]:
        return {m: c.removed_blocks for m, c in self.media.items() if c.removed_events}

    def add(self, batch: KVEventBatch) -> None:
        self.add_events(batch.events)
        if batch.losses:
            self.lost_batches += sum(loss.count for loss in batch.losses)
        if batch.restart is not None:
            self.restarts += 1

    def add_events(self, events: list[KVEvent]) -> None:
        """Count one batch's events."""
        self.batches += 1
        media = self.media
        for ev in events:
            if type(ev) is BlockStored:
                counts = media.get(ev.medium)
                if counts is None:
                    counts = media[ev.medium] = MediumTally()
                counts.stored_events += 1
                counts.stored_blocks += len(ev.block_hashes)
            elif type(ev) is BlockRemoved:
                counts = media.get(ev.medium)
                if counts is None:
                    counts = media[ev.medium] = MediumTally()
                counts.removed_events += 1
                counts.removed_blocks += len(ev.block_hashes)
            elif type(ev) is AllBlocksCleared:
                self.cleared += 1
            else:
                self.unknown += 1

    def minus(self, other: KVEventTally) -> KVEventTally:
        """These counts less `other`'s (a tally of some of the same batches); a new object."""
        media = {}
        for medium, c in self.media.items():
            o = other.media.get(medium, MediumTally())
            media[medium] = MediumTally(*(a - b for a, b in zip(astuple(c), astuple(o), strict=True)))
        return KVEventTally(
            self.batches - other.batches,
            media,
            self.cleared - other.cleared,
            self.unknown - other.unknown,
            self.lost_batches - other.lost_batches,
            self.restarts - other.restarts,
        )

    def copy(self) -> KVEventTally:
        media = {m: MediumTally(*astuple(c)) for m, c in self.media.items()}
        return KVEventTally(self.batches, media, self.cleared, self.unknown, self.lost_batches, self.restarts)
