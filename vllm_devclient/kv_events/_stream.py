"""Sequence tracking and replay bookkeeping: the one state machine behind both subscribers (no I/O here).

Per rank it keeps `expected`, the next sequence number to deliver, and delivers every batch once, in
order, or reports it lost:

- a live batch at `expected` is delivered at once (the hot path);
- a live batch above `expected` is held, and the gap is asked for on the replay socket (from
  `expected`); ZMQ keeps order per connection, so a gap on the live socket is a real drop;
- replayed batches are cached and delivered as soon as they are next in line, also ahead of their live
  copies, which are then recognised (same sequence number, same bytes) and dropped;
- once a replay has answered, every missing sequence number up to what the publisher had by then is
  gone from its buffer and is reported lost, with its range; likewise after a replay timeout;
- a live batch below `expected` (and not such a copy) means the publisher restarted and counts from 0
  again: that is reported as a restart, and the new publisher's history is recovered from 0.

Drivers feed frames in (`on_live`, `on_replay`), call `check_timeouts`, send `requests` on the replay
socket of each rank (after replacing the socket of each rank in `resets`, so that answers to an abandoned
request cannot arrive later) and take batches out with `pop`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import msgspec

from ._errors import KVEventsLostError
from ._events import (
    EventsLost,
    KVEvent,
    KVEventBatch,
    KVEventTally,
    LossReason,
    PublisherRestarted,
    _PayloadDecoder,
)

__all__ = ["END_SEQ", "SubscriberStats"]

END_SEQ = b"\xff" * 8
"""Sequence frame of the replay end marker ((-1).to_bytes(8, "big", signed=True))."""

# (rank, seq, payload) on the hot path, else (rank, seq, payload, replayed, losses, restart).
_Ready = (
    tuple[int, int, bytes] | tuple[int, int, bytes, bool, tuple[EventsLost, ...], "PublisherRestarted | None"]
)


@dataclass(slots=True)
class SubscriberStats:
    """Counters for diagnosis; batches themselves are counted in the tally."""

    replay_requests: int = 0
    replay_timeouts: int = 0
    replayed_batches: int = 0
    duplicates_dropped: int = 0
    malformed_messages: int = 0
    stale_replay_messages: int = 0


class _Rank:
    __slots__ = (
        "cache",
        "deadline",
        "dups",
        "expected",
        "held",
        "in_flight",
        "last_live",
        "losses",
        "rank",
        "replay",
        "replay_max",
        "replay_ok_at",
        "replayed_through",
        "request_horizon",
        "restart",
        "simple",
        "through_reason",
    )

    def __init__(self, rank: int, replay: bool) -> None:
        self.rank = rank
        self.replay = replay
        # Next sequence number to deliver; None until the first batch sets the baseline.
        self.expected: int | None = None
        # True when nothing below needs attention, so an in-order live batch takes the hot path.
        self.simple = True
        self.held: deque[tuple[int, bytes]] = deque()  # live batches waiting behind a gap, arrival order
        self.cache: dict[int, bytes] = {}  # replayed batches, all >= expected
        self.dups: deque[tuple[int, bytes]] = deque()  # delivered from replay ahead of their live copies
        self.in_flight = False
        self.deadline = 0.0
        self.request_horizon = -1  # highest live seq received before the request went out
        self.replay_max = -1  # highest seq the outstanding replay returned
        self.replayed_through = -1  # missing seqs up to here are gone from the publisher's buffer
        self.through_reason: LossReason = "not_in_replay_buffer"
        self.replay_ok_at = 0.0  # after a timeout, gaps are not replayed until then
        self.last_live = -1
        self.losses: list[EventsLost] = []
        self.restart: PublisherRestarted | None = None


class EventStream:
    """The shared state machine; see the module docstring."""

    def __init__(
        self,
        ranks: Iterable[tuple[int, bool]],
        *,
        backlog: bool,
        replay_timeout: float,
        raise_on_loss: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ranks = {rank: _Rank(rank, replay) for rank, replay in ranks}
        self._replay_timeout = replay_timeout
        self._raise_on_loss = raise_on_loss
        self._clock = clock
        self._decoder = _PayloadDecoder()
        self._typed_decode = self._decoder.typed().decode  # hot path; `_decoder.decode` for the rest
        self.ready: deque[_Ready] = deque()
        self._feeders: dict[int, Callable[[list[bytes]], None]] = {}
        self.requests: list[tuple[int, int]] = []
        self.resets: list[int] = []
        self.tally = KVEventTally()
        self.stats = SubscriberStats()
        self.losses: list[EventsLost] = []
        self.restarts: list[PublisherRestarted] = []
        if backlog:
            for st in self._ranks.values():
                if st.replay:
                    self._request(st, 0)

    # -- input ---------------------------------------------------------------------------------------

    def live_feeder(self, rank: int) -> Callable[[list[bytes]], None]:
        """`on_live` bound to one rank: what a driver calls per message (the hot path, kept lean)."""
        feed = self._feeders.get(rank)
        if feed is None:
            feed = self._feeders[rank] = self._make_feeder(rank)
        return feed

    def _make_feeder(self, rank: int) -> Callable[[list[bytes]], None]:
        st = self._ranks[rank]
        ready = self.ready.append
        from_bytes = int.from_bytes
        slow = self._live_slow

        def feed(frames: list[bytes]) -> None:
            try:
                _, seq_b, payload = frames
            except ValueError:
                seq_b = payload = b""
            if len(seq_b) != 8:
                self.stats.malformed_messages += 1
                return
            seq = from_bytes(seq_b, "big")
            if st.simple and seq == st.expected:
                st.expected = seq + 1  # last_live is implied (expected - 1) while simple
                ready((rank, seq, payload))
                return
            slow(st, seq, payload)

        return feed

    def on_live(self, rank: int, frames: list[bytes]) -> None:
        """One message from the rank's SUB socket: [topic, seq (8 bytes big-endian), payload]."""
        self.live_feeder(rank)(frames)

    def _live_slow(self, st: _Rank, seq: int, payload: bytes) -> None:
        st.last_live = max(st.last_live, seq, -1 if st.expected is None else st.expected - 1)
        st.held.append((seq, payload))
        self._pump(st)

    def on_replay(self, rank: int, frames: list[bytes]) -> None:
        """One message from the rank's DEALER: ["", topic, seq, payload] (vLLM >= 0.26) or
        ["", seq, payload] (older); the end marker has seq b"\\xff" * 8 and an empty payload."""
        st = self._ranks[rank]
        if len(frames) == 4 and frames[0] == b"":
            seq_b, payload = frames[2], frames[3]
        elif len(frames) == 3 and frames[0] == b"":
            seq_b, payload = frames[1], frames[2]
        else:
            self.stats.malformed_messages += 1
            return
        if not st.in_flight:
            self.stats.stale_replay_messages += 1
            return
        if seq_b == END_SEQ:
            self._replay_done(st, "not_in_replay_buffer")
            return
        if len(seq_b) != 8:
            self.stats.malformed_messages += 1
            return
        seq = int.from_bytes(seq_b, "big")
        if seq > st.replay_max:
            st.replay_max = seq
        if st.expected is None or seq >= st.expected:
            st.cache[seq] = payload
            if seq == st.expected:
                self._pump(st)

    def check_timeouts(self, now: float | None = None) -> None:
        """Give up on replays past their deadline (drain the replay sockets first)."""
        now = self._clock() if now is None else now
        for st in self._ranks.values():
            if st.in_flight and now >= st.deadline:
                self.abandon_replay(st.rank, now)

    def abandon_replay(self, rank: int, now: float | None = None) -> None:
        """The request could not be sent, or got no complete answer in time."""
        st = self._ranks[rank]
        if not st.in_flight:
            return
        self.stats.replay_timeouts += 1
        self.resets.append(rank)
        st.replay_ok_at = (self._clock() if now is None else now) + self._replay_timeout
        self._replay_done(st, "replay_timeout")

    def probe(self) -> bool:
        """Ask each idle rank's replay socket for anything after the last delivered batch.

        Catches batches lost at the tail of a stream (a subscriber that joined after them, or a drop with
        no later batch to reveal it). False when no rank could be asked.
        """
        asked = False
        for st in self._ranks.values():
            if st.replay and not st.in_flight and st.expected is not None and not st.held:
                if self._clock() >= st.replay_ok_at:
                    self._request(st, st.expected)
                    asked = True
        return asked

    def next_deadline(self) -> float | None:
        deadlines = [st.deadline for st in self._ranks.values() if st.in_flight]
        return min(deadlines) if deadlines else None

    def held_count(self) -> int:
        return sum(len(st.held) for st in self._ranks.values())

    def replaying(self) -> bool:
        return any(st.in_flight for st in self._ranks.values())

    # -- output --------------------------------------------------------------------------------------

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
                return self._pop_other((rank, seq, payload, False, (), None))
            events: list[KVEvent] = wire.events  # type: ignore[assignment]  # invariant list, never mutated
            self.tally.add_events(events)
            return KVEventBatch(rank, seq, wire.ts, events, wire.data_parallel_rank)
        return self._pop_other(item)

    def _pop_other(
        self, item: tuple[int, int, bytes, bool, tuple[EventsLost, ...], PublisherRestarted | None]
    ) -> KVEventBatch:
        rank, seq, payload, replayed, losses, restart = item
        try:
            ts, events, dp_rank = self._decoder.decode(payload)
            batch = KVEventBatch(rank, seq, ts, events, dp_rank, replayed, losses, restart)
        except (msgspec.DecodeError, ValueError) as exc:
            lost = EventsLost(rank, seq, seq, "undecodable", f"{type(exc).__name__}: {exc}")
            batch = KVEventBatch(rank, seq, 0.0, [], None, replayed, (*losses, lost), restart)
        self.tally.add(batch)
        if restart is not None:
            self.restarts.append(restart)
        if batch.losses:
            self.losses.extend(batch.losses)
            if self._raise_on_loss:
                raise KVEventsLostError(batch)
        return batch

    # -- internals -----------------------------------------------------------------------------------

    def _request(self, st: _Rank, start: int) -> None:
        st.in_flight = True
        st.simple = False
        st.deadline = self._clock() + self._replay_timeout
        st.request_horizon = max(st.last_live, -1 if st.expected is None else st.expected - 1)
        st.replay_max = -1
        self.stats.replay_requests += 1
        self.requests.append((st.rank, start))

    def _replay_done(self, st: _Rank, reason: LossReason) -> None:
        st.in_flight = False
        # Everything up to `through` existed at the publisher when it answered (or should have answered).
        through = max(st.replay_max, st.request_horizon)
        if through > st.replayed_through:
            st.replayed_through = through
            st.through_reason = reason
        self._pump(st)

    def _emit(self, st: _Rank, seq: int, payload: bytes, replayed: bool) -> None:
        losses: tuple[EventsLost, ...] = ()
        if st.losses:
            losses = tuple(st.losses)
            st.losses.clear()
        restart, st.restart = st.restart, None
        self.ready.append((st.rank, seq, payload, replayed, losses, restart))

    def _lose(self, st: _Rank, first: int, last: int, reason: LossReason) -> None:
        if first <= last:
            st.losses.append(EventsLost(st.rank, first, last, reason))

    def _is_dup(self, st: _Rank, seq: int, payload: bytes) -> bool:
        dups = st.dups
        while dups and dups[0][0] < seq:
            dups.popleft()
        if dups and dups[0][0] == seq and dups[0][1] == payload:
            dups.popleft()
            self.stats.duplicates_dropped += 1
            return True
        return False

    def _restarted(self, st: _Rank, seq: int) -> None:
        assert st.expected is not None
        st.restart = PublisherRestarted(st.rank, st.expected - 1, seq)
        st.cache.clear()
        st.dups.clear()
        st.replayed_through = -1
        st.last_live = seq
        for held_seq, _ in st.held:
            st.last_live = max(st.last_live, held_seq)
        if st.in_flight:
            # The answer may come from either publisher: drop it with its socket.
            st.in_flight = False
            self.resets.append(st.rank)
        # A new publisher counts from 0; what it sent before we saw `seq` is a gap like any other.
        st.expected = 0

    def _pump(self, st: _Rank) -> None:
        """Deliver whatever is deliverable for this rank; ask for a replay or report losses at gaps."""
        cache = st.cache
        held = st.held
        while True:
            exp = st.expected
            if exp is None:
                if st.in_flight:
                    break  # the initial backlog replay sets the baseline
                if cache:
                    exp = st.expected = min(cache)
                elif held:
                    exp = st.expected = held[0][0]
                else:
                    break
            if exp in cache:
                payload = cache.pop(exp)
                st.dups.append((exp, payload))
                self.stats.replayed_batches += 1
                self._emit(st, exp, payload, True)
                st.expected = exp + 1
                continue
            if held:
                seq, payload = held[0]
                if seq < exp:
                    if self._is_dup(st, seq, payload):
                        held.popleft()
                        continue
                    self._restarted(st, seq)
                    continue
                if seq == exp:
                    held.popleft()
                    # Live copies of earlier replayed batches would have arrived before this one.
                    st.dups.clear()
                    self._emit(st, seq, payload, False)
                    st.expected = seq + 1
                    continue
                nxt = seq
            elif cache:
                nxt = min(cache)  # every cached seq is above exp
            else:
                break
            # Gap [exp, nxt - 1].
            if exp <= st.replayed_through:
                last = min(nxt - 1, st.replayed_through)
                if cache:
                    last = min(last, min(cache) - 1)
                self._lose(st, exp, last, st.through_reason)
                st.expected = last + 1
                continue
            if st.in_flight:
                break  # the outstanding replay may still bring it
            if st.replay and self._clock() >= st.replay_ok_at:
                self._request(st, exp)
                break
            self._lose(st, exp, nxt - 1, "replay_timeout" if st.replay else "replay_unavailable")
            st.expected = nxt
        st.simple = not (held or cache or st.dups or st.in_flight or st.losses or st.restart is not None)
