"""Sequence tracking and replay bookkeeping: the one state machine behind both subscribers (no I/O here).

The invariant, per rank and publisher, however late or out of step the frames are fed: each sequence
number is delivered at most once, in increasing order; a number is reported lost only if it was never
delivered and never will be; the two sets are disjoint, and together they cover every number after the
first delivered one.

Per rank it keeps `expected`, the next sequence number to deliver, and delivers every batch once, in
order, or reports it lost:

- a live batch at `expected` is delivered at once (the hot path);
- a live batch above `expected` is held, and the gap is asked for on the replay socket; ZMQ keeps order
  per connection, so a gap on the live socket is a real drop;
- replayed batches are cached and delivered as soon as they are next in line, also ahead of their live
  copies, which are then recognised (same sequence number, same bytes) and dropped;
- a missing number is lost only when both the publisher no longer has it (a replay answered without it:
  up to what the publisher had by then, or a replay timed out) and the live stream has passed it (a
  later live batch was read, `live_top`). A replay answers whatever the publisher buffers, which can run
  far ahead of the live socket when the consumer is slow: the numbers between the last live batch read
  and the first replayed one may still be queued on the live socket, unread. Such a gap waits for the
  live stream; it is lost once a later live batch is read, or once the live stream has stayed silent for
  `replay_timeout` (`settle_at`: a tail dropped with nothing after it);
- a gap that is not asked for (no replay endpoint, or replay backing off after a timeout) is reported
  lost at once as `replay_unavailable`; `replay_timeout` means a request went out and its answer did not
  start, or stalled, for `replay_timeout` (each replayed frame read renews the deadline, so a long answer
  read slowly is no timeout).

Publisher restarts. A restarted publisher (a restarted engine) counts from 0 again on the same endpoints,
and its first batches can go unseen (published before the SUB reconnected, or read late behind the old
publisher's last ones), so a lower sequence number is not the only sign. Three kinds of evidence:

- a live sequence number below `expected` that is no copy of a replayed batch: a restart, at once (the
  same publisher sends none: nothing is taken for lost before the live stream passed it, or stayed silent
  for `replay_timeout` after the replay that answered without it);
- a reconnection of the rank's SUB socket, reported by the driver with `on_reconnect` (it reads the
  socket monitor after each read of the live socket, so that the report comes before any message of
  the new connection is fed): the publisher may have changed. Live batches of the rank are held and a
  replay is asked to tell;
- a fingerprint: every replay request of a rank that has delivered a batch asks from that last
  delivered batch (`last`), not from `expected`, and the first answer tells which publisher answered:
  the same bytes at that sequence number: the same publisher; other bytes, or an end marker with nothing
  at or after it: a new publisher (the old one still had at least that batch); a first sequence number
  above it: the batch rolled out of the buffer, the same publisher as far as can be told (a new one
  that published more than its whole buffer looks the same). While such a check is outstanding, live
  batches of the rank are held; a check that times out tells nothing, and the rank carries on as with
  the same publisher. A backoff after a replay timeout belongs to the publisher that timed out: a
  reconnection or a restart clears it.

On a restart the rank holds every live batch, asks the new publisher's replay from 0 and, once it has
answered, tells apart the held live batches by (seq, payload): one with the bytes the new publisher
replayed at its sequence number is the new publisher's (a copy, dropped); one at a sequence number the
replay covers with other bytes, one that arrived before the request above what the new publisher had,
or one below the replay's first sequence number and at or above the old `expected` is the old
publisher's (read late); any other is the new publisher's (published after it answered). The old
publisher's late batches are delivered first, in order, their gaps reported lost (`replay_unavailable`:
the old publisher is gone); then the new publisher's from 0, the first carrying `PublisherRestarted`.
Without a replay endpoint only a lower sequence number reveals a restart, and every held batch is taken
for the new publisher's; so too when the new publisher's replay times out.

Drivers feed frames in (`on_live`, `on_replay`, `on_reconnect`), call `check_timeouts`, send `requests`
on the replay socket of each rank (after replacing the socket of each rank in `resets`, so that answers
to an abandoned request cannot arrive later; a driver stops reading a rank's replay socket as soon as
the rank is in `resets`) and take batches out with `pop`.

Counting since the start: batches from the initial backlog replay that were published before the
subscriber started are left out of `stored_since_start` and `tally_since_start`. A backlog batch counts
when its sequence number is at or after the first live batch of its rank (the live one proves the
subscription was on), else when its publisher timestamp `ts` is not before `started_at`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

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

# (rank, seq, payload) on the hot path, else (rank, seq, payload, replayed, losses, restart, early);
# `early`: from the initial backlog and before the first live batch (see "Counting since the start").
_Other = tuple[int, int, bytes, bool, tuple[EventsLost, ...], "PublisherRestarted | None", bool]
_Ready = tuple[int, int, bytes] | _Other


@dataclass(slots=True)
class SubscriberStats:
    """Counters for diagnosis; batches themselves are counted in the tally."""

    replay_requests: int = 0
    replay_timeouts: int = 0
    replayed_batches: int = 0
    duplicates_dropped: int = 0
    malformed_messages: int = 0
    stale_replay_messages: int = 0
    reconnects: int = 0


@dataclass(slots=True, eq=False)
class _Rank:
    rank: int
    replay: bool
    # Next sequence number to deliver; None until the first batch sets the baseline.
    expected: int | None = None
    # True when nothing below needs attention, so an in-order live batch takes the hot path.
    simple: bool = True
    held: deque[tuple[int, bytes]] = field(default_factory=deque)  # live batches behind a gap, arrival order
    cache: dict[int, bytes] = field(default_factory=dict)  # replayed batches, all >= expected
    dups: deque[tuple[int, bytes]] = field(default_factory=deque)  # replayed ahead of their live copies
    in_flight: bool = False
    deadline: float = 0.0
    request_horizon: int = -1  # highest live seq received before the request went out
    replay_max: int = -1  # highest seq the outstanding replay returned
    replayed_through: int = -1  # missing seqs up to here are gone from the publisher's buffer
    through_reason: LossReason = "not_in_replay_buffer"
    replay_ok_at: float = 0.0  # after a timeout, gaps are not replayed until then
    last_live: int = -1
    live_top: int = -1  # highest live seq read (the hot path's is `last` while that is a live item)
    settle_at: float = 0.0  # when a gap the live stream has not passed is reported lost; 0: none pending
    losses: list[EventsLost] = field(default_factory=list)
    restart: PublisherRestarted | None = None
    last: _Ready | None = None  # the last delivered batch of the current publisher: the fingerprint
    suspect: bool = False  # reconnected and not yet checked: hold live batches
    check: tuple[int, bytes] | None = None  # (seq, payload) the outstanding replay must start with
    restarting: bool = False  # a restart is confirmed, the new publisher's replay from 0 is outstanding
    fresh: dict[int, bytes] = field(default_factory=dict)  # that replay's batches
    held_mark: int = 0  # len(held) when it was asked
    backlog_max: int = -1  # highest seq of the initial backlog replay
    first_live: int = -1  # first live seq received


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
        started_at: float | None = None,
    ) -> None:
        """`started_at`: the subscriber's start on the publishers' clock (time.time()); None counts the
        whole backlog as after the start."""
        self._ranks = {rank: _Rank(rank, replay) for rank, replay in ranks}
        self._replay_timeout = replay_timeout
        self._raise_on_loss = raise_on_loss
        self._clock = clock
        self._started_at = started_at
        self._decoder = _PayloadDecoder()
        self._typed_decode = self._decoder.typed().decode  # hot path; `_decoder.decode` for the rest
        self.ready: deque[_Ready] = deque()
        self._feeders: dict[int, Callable[[list[bytes]], None]] = {}
        self.requests: list[tuple[int, int]] = []
        self.resets: list[int] = []
        self.tally = KVEventTally()
        self.before_start = KVEventTally()  # the delivered batches published before `started_at`
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
                item = (rank, seq, payload)
                st.last = item
                ready(item)
                return
            slow(st, seq, payload)

        return feed

    def on_live(self, rank: int, frames: list[bytes]) -> None:
        """One message from the rank's SUB socket: [topic, seq (8 bytes big-endian), payload]."""
        self.live_feeder(rank)(frames)

    def _live_slow(self, st: _Rank, seq: int, payload: bytes) -> None:
        if st.first_live < 0:
            st.first_live = seq
        st.last_live = max(st.last_live, seq, -1 if st.expected is None else st.expected - 1)
        if seq > st.live_top:
            st.live_top = seq
        st.settle_at = 0.0  # the live stream moved: a gap it has not passed gets its full wait again
        st.held.append((seq, payload))
        self._pump(st)

    def on_reconnect(self, rank: int) -> None:
        """The rank's SUB socket connected again (a new TCP connection after its first): the publisher
        may have restarted. Live batches of the rank are held until a replay tells."""
        st = self._ranks[rank]
        self.stats.reconnects += 1
        st.replay_ok_at = 0.0  # a backoff belongs to the connection that timed out
        if not st.replay or st.expected is None:
            return  # nothing to compare with: a lower sequence number is the only sign left
        st.suspect = True
        st.simple = False
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
        # The answer is coming: a long one read slowly (a busy consumer, a busy host) is no timeout.
        st.deadline = self._clock() + self._replay_timeout
        if seq_b == END_SEQ:
            if st.check is not None:
                self._confirm_restart(st)  # nothing at or after the fingerprint: not the same publisher
            elif st.restarting:
                self._attribute(st, complete=True)
            else:
                self._replay_done(st, "not_in_replay_buffer")
            return
        if len(seq_b) != 8:
            self.stats.malformed_messages += 1
            return
        seq = int.from_bytes(seq_b, "big")
        if seq > st.replay_max:
            st.replay_max = seq
        if st.restarting:
            st.fresh[seq] = payload
            return
        if st.check is not None:
            fp_seq, fp_payload = st.check
            if seq < fp_seq:
                self.stats.malformed_messages += 1  # a publisher answers from the sequence asked
                return
            st.check = None
            if seq == fp_seq and payload != fp_payload:
                self._confirm_restart(st)
                return
            # The same bytes (delivered already), or the fingerprint rolled out of the buffer: the same
            # publisher; the live batches held for the check may go.
            if st.expected is not None and seq >= st.expected:
                st.cache[seq] = payload
            self._pump(st)
            return
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
            elif st.settle_at and now >= st.settle_at:
                self._pump(st, now)

    def abandon_replay(self, rank: int, now: float | None = None) -> None:
        """The request could not be sent, or got no complete answer in time."""
        st = self._ranks[rank]
        if not st.in_flight:
            return
        self.stats.replay_timeouts += 1
        self.resets.append(rank)
        st.replay_ok_at = (self._clock() if now is None else now) + self._replay_timeout
        if st.restarting:
            self._attribute(st, complete=False)
            return
        st.check = None  # no verdict: carry on as the same publisher
        self._replay_done(st, "replay_timeout")

    def probe(self) -> bool:
        """Ask each idle rank's replay socket for anything after the last delivered batch.

        Catches batches lost at the tail of a stream (a subscriber that joined after them, or a drop with
        no later batch to reveal it), and checks the publisher is the same. False when no rank could be
        asked.
        """
        asked = False
        for st in self._ranks.values():
            # A rank with replayed batches waiting for the live stream knows its tail already.
            if st.replay and not st.in_flight and st.expected is not None and not st.held and not st.cache:
                if self._clock() >= st.replay_ok_at:
                    self._ask(st)
                    asked = True
        return asked

    def next_deadline(self) -> float | None:
        """When the earliest outstanding replay times out or the earliest unpassed gap is settled (the
        clock's time); None when neither is pending."""
        deadlines = [st.deadline if st.in_flight else st.settle_at for st in self._ranks.values()]
        deadlines = [d for d in deadlines if d]
        return min(deadlines) if deadlines else None

    def held_count(self) -> int:
        """Live batches held behind gaps or checks, over all ranks."""
        return sum(len(st.held) for st in self._ranks.values())

    def replaying(self) -> bool:
        """Whether any replay request is outstanding, or replayed batches wait behind a gap the live
        stream has not passed yet."""
        return any(st.in_flight or st.settle_at for st in self._ranks.values())

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
                # Not the current shape: the typed decoder already failed, go straight to the generic one.
                return self._pop_other((rank, seq, payload, False, (), None, False), self._decoder.decode_any)
            events: list[KVEvent] = wire.events  # type: ignore[assignment]  # invariant list, never mutated
            self.tally.add_events(events)
            return KVEventBatch(rank, seq, wire.ts, events, wire.data_parallel_rank)
        return self._pop_other(item)

    def _pop_other(
        self, item: _Other, decode: Callable[[bytes], tuple[float, list[KVEvent], int | None]] | None = None
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

    # -- internals -----------------------------------------------------------------------------------

    def _request(self, st: _Rank, start: int) -> None:
        st.in_flight = True
        st.simple = False
        st.deadline = self._clock() + self._replay_timeout
        st.request_horizon = max(st.last_live, -1 if st.expected is None else st.expected - 1)
        st.replay_max = -1
        self.stats.replay_requests += 1
        self.requests.append((st.rank, start))

    def _ask(self, st: _Rank) -> None:
        """Ask for everything after the last delivered batch, from that batch on: its bytes tell
        whether the same publisher answers."""
        st.suspect = False
        if st.last is None:
            assert st.expected is not None
            self._request(st, st.expected)
            return
        st.check = (st.last[1], st.last[2])
        self._request(st, st.last[1])

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
        if restart is not None and restart.first_seq < 0:  # nothing of the new publisher was seen before
            restart = PublisherRestarted(st.rank, restart.last_seq, seq)
        early = replayed and seq <= st.backlog_max and (st.first_live < 0 or seq < st.first_live)
        item = (st.rank, seq, payload, replayed, losses, restart, early)
        st.last = item
        self.ready.append(item)

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

    def _confirm_restart(self, st: _Rank) -> None:
        """The rank's publisher is a new one: hold everything and ask its replay from 0."""
        st.check = None
        st.suspect = False
        st.simple = False
        st.replay_ok_at = 0.0  # the backoff was the old publisher's
        if st.in_flight:
            # The outstanding answer is dropped with its socket; the new publisher is asked again from 0.
            st.in_flight = False
            self.resets.append(st.rank)
        st.restarting = True
        st.fresh = {}
        if st.replay:
            self._request(st, 0)
            st.held_mark = len(st.held)
        else:
            self._attribute(st, complete=False)

    def _attribute(self, st: _Rank, *, complete: bool) -> None:
        """Tell the old publisher's late batches from the new one's (see the module docstring), deliver
        the former, and start the new publisher from 0."""
        assert st.expected is not None
        st.in_flight = False
        st.restarting = False
        fresh, st.fresh = st.fresh, {}
        old_exp = st.expected
        fmin = min(fresh) if fresh else 0
        fmax = max(fresh) if fresh else -1
        mark = st.held_mark if complete else 0
        old = {seq: (payload, True) for seq, payload in st.cache.items() if seq >= old_exp}
        new: deque[tuple[int, bytes]] = deque()
        first_new = -1
        for i, (seq, payload) in enumerate(st.held):
            theirs = fresh.get(seq)
            if theirs == payload:
                self.stats.duplicates_dropped += 1  # the new publisher's, delivered from its replay
                is_new = True
            elif theirs is not None:
                is_new = False
            elif seq > fmax:
                is_new = i >= mark  # published after the new publisher answered
            else:  # below the replay's first: rolled out of the new publisher's buffer, or the old one's
                is_new = seq < old_exp
            if is_new:
                if first_new < 0:
                    first_new = seq
                if theirs != payload:
                    new.append((seq, payload))
            elif seq >= old_exp and seq not in old:
                old[seq] = (payload, False)
            else:
                self.stats.duplicates_dropped += 1  # a second copy of an old batch already accounted for
        # The old publisher's late batches first; it is gone, so its gaps cannot be replayed.
        nxt = old_exp
        for seq in sorted(old):
            payload, replayed = old[seq]
            self._lose_old(st, nxt, seq - 1)
            if replayed:
                self.stats.replayed_batches += 1
            self._emit(st, seq, payload, replayed)
            nxt = seq + 1
        if first_new < 0 and fresh:
            first_new = fmin
        st.restart = PublisherRestarted(st.rank, nxt - 1, first_new)
        # The new publisher, from 0.
        st.expected = 0
        st.last = None
        st.cache = fresh
        st.held = new
        st.dups.clear()
        st.backlog_max = -1
        st.last_live = st.live_top = max((seq for seq, _ in new), default=-1)
        st.settle_at = 0.0
        if complete:
            st.replayed_through, st.through_reason = fmax, "not_in_replay_buffer"
        else:
            st.replayed_through = max(fmax, new[0][0] - 1 if new else -1)
            st.through_reason = "replay_timeout" if st.replay else "replay_unavailable"
        self._pump(st)

    def _gone_through(self, st: _Rank, exp: int, nxt: int, now: float | None) -> int:
        """The end of the part of gap [exp, nxt - 1] that is lost (below `exp` when none is yet).

        The publisher's buffer no longer holds it up to `replayed_through`; but the live stream may still
        bring it, unless a later live batch was read (ZMQ keeps order per connection, so the live stream
        dropped what it passed). A gap that only replayed batches lie beyond waits for the live stream:
        it is lost once the live stream passes it, or stays silent for `replay_timeout`.
        """
        last = min(nxt - 1, st.replayed_through)
        if st.cache:
            last = min(last, min(st.cache) - 1)
        if st.live_top >= exp:
            st.settle_at = 0.0
            return min(last, st.live_top)
        if st.in_flight:
            return exp - 1  # the outstanding replay's end settles it first
        now = self._clock() if now is None else now
        if not st.settle_at:
            st.settle_at = now + self._replay_timeout
        if now < st.settle_at:
            return exp - 1
        st.settle_at = 0.0
        return last

    def _lose_old(self, st: _Rank, first: int, last: int) -> None:
        """A gap of a publisher that is gone: what a replay said was gone keeps its reason."""
        known = min(last, st.replayed_through)
        self._lose(st, first, known, st.through_reason)
        self._lose(st, max(first, known + 1), last, "replay_unavailable")

    def _pump(self, st: _Rank, now: float | None = None) -> None:
        """Deliver whatever is deliverable for this rank; ask for a replay or report losses at gaps."""
        if st.last is not None and len(st.last) == 3 and st.last[1] > st.live_top:
            st.live_top = st.last[1]  # delivered on the hot path, which keeps no live_top of its own
        cache = st.cache
        held = st.held
        while True:
            exp = st.expected
            if exp is None:
                if st.in_flight:
                    break  # the initial backlog replay sets the baseline
                if cache:
                    exp = st.expected = min(cache)
                    st.backlog_max = max(cache)
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
            if st.restarting:
                break  # everything waits for the new publisher's replay
            if st.suspect and not st.in_flight:
                if st.replay:
                    self._ask(st)
                else:
                    st.suspect = False
            if st.suspect or st.check is not None:
                break  # live batches wait until the replay tells which publisher sent them
            if held:
                seq, payload = held[0]
                if seq < exp:
                    if self._is_dup(st, seq, payload):
                        held.popleft()
                        continue
                    self._confirm_restart(st)
                    cache, held = st.cache, st.held  # replaced when the restart is settled at once
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
                last = self._gone_through(st, exp, nxt, now)
                if last < exp:
                    break  # its live copies may still be on their way
                self._lose(st, exp, last, st.through_reason)
                st.expected = last + 1
                continue
            if st.in_flight:
                break  # the outstanding replay may still bring it
            if st.replay and self._clock() >= st.replay_ok_at:
                self._ask(st)
                break
            self._lose(st, exp, nxt - 1, "replay_unavailable")  # not asked: never timed out
            st.expected = nxt
        busy = held or cache or st.dups or st.in_flight or st.losses or st.suspect or st.restarting
        st.simple = not busy and st.restart is None
