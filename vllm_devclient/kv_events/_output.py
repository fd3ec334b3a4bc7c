"""What a stream hands its reader: the delivered batches, in delivery order, decoded (`pop`) and counted.

Items wait in `ready` undecoded: (rank, seq, payload) on the hot path, else (rank, seq, payload, replayed,
losses, restart, early); `early`: from the initial backlog and before the first live batch of its rank (see
"Counting since the start" in `_stream.py`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import msgspec

from ._errors import KVEventsLostError
from ._events import EventsLost, KVEvent, KVEventBatch, KVEventTally, PublisherRestarted, _PayloadDecoder

Marked = tuple[int, int, bytes, bool, tuple[EventsLost, ...], "PublisherRestarted | None", bool]
Ready = tuple[int, int, bytes] | Marked


class Output:
    """The delivered batches: decoded on `pop`, counted in `tally` (`before_start`: those published before
    `started_at`), their losses and restarts kept; with `raise_on_loss` a batch that reports a loss raises
    `KVEventsLostError` as it is popped."""

    def __init__(self, *, raise_on_loss: bool, started_at: float | None) -> None:
        self._raise_on_loss = raise_on_loss
        self._started_at = started_at
        self._decoder = _PayloadDecoder()
        self._typed_decode = self._decoder.typed().decode  # hot path; `_decoder.decode` for the rest
        self.ready: deque[Ready] = deque()
        self.tally = KVEventTally()
        self.before_start = KVEventTally()  # the delivered batches published before `started_at`
        self.losses: list[EventsLost] = []
        self.restarts: list[PublisherRestarted] = []

    def pop(self) -> KVEventBatch | None:
        """The next batch in delivery order, decoded; None when nothing is ready."""
        if not self.ready:
            return None
        item = self.ready.popleft()
        if len(item) == 3:  # the hot path: an in-order live batch with nothing to report
            rank, seq, payload = item
            try:
                wire = self._typed_decode(payload)
            except msgspec.DecodeError:
                # Not the current shape: the typed decoder already failed, go straight to the generic one.
                return self._pop_other((rank, seq, payload, False, (), None, False), self._decoder.decode_any)
            events: list[KVEvent] = wire.events  # type: ignore[assignment]  # invariant list, never mutated
            self.tally.add_events(events)
            return KVEventBatch(rank, seq, wire.ts, events, wire.data_parallel_rank)
        return self._pop_other(item)

    def _pop_other(
        self, item: Marked, decode: Callable[[bytes], tuple[float, list[KVEvent], int | None]] | None = None
    ) -> KVEventBatch:
        rank, seq, payload, replayed, losses, restart, early = item
        try:
            ts, events, dp_rank = (decode or self._decoder.decode)(payload)
            batch = KVEventBatch(rank, seq, ts, events, dp_rank, replayed, losses, restart)
        except (msgspec.DecodeError, ValueError) as exc:
            lost = EventsLost(rank, seq, seq, "undecodable", f"{type(exc).__name__}: {exc}")
            batch = KVEventBatch(rank, seq, 0.0, [], None, replayed, (*losses, lost), restart)
        self.tally.add(batch)
        if early and self._started_at is not None and batch.ts < self._started_at:
            self.before_start.add(batch)
        if restart is not None:
            self.restarts.append(restart)
        if batch.losses:
            self.losses.extend(batch.losses)
            if self._raise_on_loss:
                raise KVEventsLostError(batch)
        return batch

    def stored_since_start(self, medium: str | None) -> int:
        """Block hashes announced stored in `medium` by the batches delivered since the start."""
        return self.tally.stored(medium) - self.before_start.stored(medium)

    def tally_since_start(self) -> KVEventTally:
        """The tally of the batches delivered, less those published before the start (a new object)."""
        return self.tally.minus(self.before_start)
