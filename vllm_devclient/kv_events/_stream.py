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

Where it lives: this module takes the drivers' input and runs each rank's replay conversation, a table of
phase x event -> action and next phase (`_phases.py`, as h11 keeps its states); a rank's state and the
in-order delivery of its batches are `_rank.py`, the telling apart of a restart's held batches
`_restart.py`, the decoding and counting of what is delivered `_output.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from ._events import LossReason
from ._output import Output
from ._phases import TRANSITIONS, Event, Phase
from ._rank import Rank, Shared, SubscriberStats

__all__ = ["END_SEQ", "SubscriberStats"]

END_SEQ = b"\xff" * 8
"""Sequence frame of the replay end marker ((-1).to_bytes(8, "big", signed=True))."""


class EventStream(Output):
    """The shared state machine; see the module docstring. What it delivers is read as an `Output`."""

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
        super().__init__(raise_on_loss=raise_on_loss, started_at=started_at)
        self._replay_timeout = replay_timeout
        self._clock = clock
        self.stats = SubscriberStats()
        self.requests: list[tuple[int, int]] = []
        self.resets: list[int] = []
        shared = Shared(self.ready, self.stats, clock, replay_timeout, self._fire)
        self._ranks = {rank: Rank(shared, rank, replay) for rank, replay in ranks}
        self._feeders: dict[int, Callable[[list[bytes]], None]] = {}
        # The table with its actions bound: phase -> event -> (action, next phase).
        self._steps = {
            phase: {event: (getattr(self, "_" + action), nxt) for event, (action, nxt) in row.items()}
            for phase, row in TRANSITIONS.items()
        }
        if backlog:
            for st in self._ranks.values():
                if st.replay:
                    self._fire(st, Event.ASK)

    def _fire(self, st: Rank, event: Event, *args: Any) -> None:
        """Take the table's step for the rank's phase and `event`: enter the next phase, then run the action
        (which may deliver, and so raise the next event)."""
        action: Callable[..., None]
        action, st.phase = self._steps[st.phase][event]
        action(st, *args)

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
        fire, live = self._fire, Event.LIVE

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
            fire(st, live, seq, payload)

        return feed

    def on_live(self, rank: int, frames: list[bytes]) -> None:
        """One message from the rank's SUB socket: [topic, seq (8 bytes big-endian), payload]."""
        self.live_feeder(rank)(frames)

    def on_reconnect(self, rank: int) -> None:
        """The rank's SUB socket connected again (a new TCP connection after its first): the publisher
        may have restarted. Live batches of the rank are held until a replay tells."""
        self._fire(self._ranks[rank], Event.RECONNECT)

    def on_replay(self, rank: int, frames: list[bytes]) -> None:
        """One message from the rank's DEALER: ["", topic, seq, payload] (vLLM >= 0.26) or
        ["", seq, payload] (older); the end marker has seq b"\\xff" * 8 and an empty payload."""
        if len(frames) == 4 and frames[0] == b"":
            seq_b, payload = frames[2], frames[3]
        elif len(frames) == 3 and frames[0] == b"":
            seq_b, payload = frames[1], frames[2]
        else:
            self.stats.malformed_messages += 1
            return
        if seq_b == END_SEQ:
            self._fire(self._ranks[rank], Event.REPLAY_END)
        else:
            self._fire(self._ranks[rank], Event.REPLAYED, seq_b, payload)

    def check_timeouts(self, now: float | None = None) -> None:
        """Give up on replays past their deadline (drain the replay sockets first)."""
        now = self._clock() if now is None else now
        for st in self._ranks.values():
            if st.phase is not Phase.IDLE and now >= st.deadline:
                self.abandon_replay(st.rank, now)
            elif st.settle_at and now >= st.settle_at:
                st.pump(now)

    def abandon_replay(self, rank: int, now: float | None = None) -> None:
        """The request could not be sent, or got no complete answer in time."""
        self._fire(self._ranks[rank], Event.REPLAY_TIMEOUT, self._clock() if now is None else now)

    def probe(self) -> bool:
        """Ask each idle rank's replay socket for anything after the last delivered batch.

        Catches batches lost at the tail of a stream (a subscriber that joined after them, or a drop with
        no later batch to reveal it), and checks the publisher is the same. False when no rank could be
        asked.
        """
        asked = False
        for st in self._ranks.values():
            # A rank with replayed batches waiting for the live stream knows its tail already.
            idle = st.phase is Phase.IDLE and st.expected is not None and not st.held and not st.cache
            if st.replay and idle and self._clock() >= st.replay_ok_at:
                st.ask()
                asked = True
        return asked

    def next_deadline(self) -> float | None:
        """When the earliest outstanding replay times out or the earliest unpassed gap is settled (the
        clock's time); None when neither is pending."""
        deadlines = [st.settle_at if st.phase is Phase.IDLE else st.deadline for st in self._ranks.values()]
        deadlines = [d for d in deadlines if d]
        return min(deadlines) if deadlines else None

    def held_count(self) -> int:
        """Live batches held behind gaps or checks, over all ranks."""
        return sum(len(st.held) for st in self._ranks.values())

    def replaying(self) -> bool:
        """Whether any replay request is outstanding, or replayed batches wait behind a gap the live
        stream has not passed yet."""
        return any(st.phase is not Phase.IDLE or st.settle_at for st in self._ranks.values())

    # -- the table's actions (`_phases.py`), in its order --------------------------------------------

    def _hold_live(self, st: Rank, seq: int, payload: bytes) -> None:
        if st.first_live < 0:
            st.first_live = seq
        st.last_live = max(st.last_live, seq, -1 if st.expected is None else st.expected - 1)
        if seq > st.live_top:
            st.live_top = seq
        st.settle_at = 0.0  # the live stream moved: a gap it has not passed gets its full wait again
        st.held.append((seq, payload))
        st.pump()

    def _suspect(self, st: Rank) -> None:
        self.stats.reconnects += 1
        st.replay_ok_at = 0.0  # a backoff belongs to the connection that timed out
        if not st.replay or st.expected is None:
            return  # nothing to compare with: a lower sequence number is the only sign left
        st.suspect = True
        st.simple = False
        st.pump()

    def _stale(self, st: Rank, *frames: bytes) -> None:
        self.stats.stale_replay_messages += 1

    def _nothing(self, st: Rank, now: float) -> None:
        pass

    def _ask_from_expected(self, st: Rank) -> None:
        st.suspect = False
        self._request(st, 0 if st.expected is None else st.expected)

    def _ask_from_last(self, st: Rank) -> None:
        assert st.last is not None
        st.suspect = False
        st.fingerprint = (st.last[1], st.last[2])
        self._request(st, st.last[1])

    def _restart(self, st: Rank) -> None:
        """The rank's publisher is a new one: hold everything and ask its replay from 0."""
        st.suspect = False
        st.simple = False
        st.replay_ok_at = 0.0  # the backoff was the old publisher's
        st.fresh = {}
        if st.replay:
            self._request(st, 0)
            st.held_mark = len(st.held)
        else:
            self._fire(st, Event.REPLAY_UNAVAILABLE)

    def _cache_replayed(self, st: Rank, seq_b: bytes, payload: bytes) -> None:
        seq = self._answered(st, seq_b)
        if seq is not None and (st.expected is None or seq >= st.expected):
            st.cache[seq] = payload
            if seq == st.expected:
                st.pump()

    def _replay_ended(self, st: Rank) -> None:
        self._replay_done(st, "not_in_replay_buffer")

    def _replay_timed_out(self, st: Rank, now: float) -> None:
        self._given_up(st, now)
        self._replay_done(st, "replay_timeout")

    def _restart_in_flight(self, st: Rank) -> None:
        # The outstanding answer is dropped with its socket; the new publisher is asked again from 0.
        self.resets.append(st.rank)
        self._restart(st)

    def _check_publisher(self, st: Rank, seq_b: bytes, payload: bytes) -> None:
        seq = self._answered(st, seq_b)
        if seq is None:
            return
        fp_seq, fp_payload = st.fingerprint
        if seq < fp_seq:
            self.stats.malformed_messages += 1  # a publisher answers from the sequence asked
        elif seq == fp_seq and payload != fp_payload:
            self._fire(st, Event.RESTART)
        else:
            self._fire(st, Event.SAME_PUBLISHER, seq, payload)

    def _same_publisher(self, st: Rank, seq: int, payload: bytes) -> None:
        # The same bytes (delivered already), or the fingerprint rolled out of the buffer: the live batches
        # held for the check may go.
        if st.expected is not None and seq >= st.expected:
            st.cache[seq] = payload
        st.pump()

    def _keep_fresh(self, st: Rank, seq_b: bytes, payload: bytes) -> None:
        seq = self._answered(st, seq_b)
        if seq is not None:
            st.fresh[seq] = payload

    def _settle_restart(self, st: Rank) -> None:
        st.settle_restart(complete=True)

    def _restart_timed_out(self, st: Rank, now: float) -> None:
        self._given_up(st, now)
        st.settle_restart(complete=False)

    def _settle_unasked(self, st: Rank) -> None:
        st.settle_restart(complete=False)

    def _never(self, st: Rank, *args: object) -> None:
        raise AssertionError(
            f"rank {st.rank}: an event the table has as never came in phase {st.phase.value}"
        )

    # -- what the actions share ----------------------------------------------------------------------

    def _request(self, st: Rank, start: int) -> None:
        st.simple = False
        st.deadline = self._clock() + self._replay_timeout
        st.request_horizon = max(st.last_live, -1 if st.expected is None else st.expected - 1)
        st.replay_max = -1
        self.stats.replay_requests += 1
        self.requests.append((st.rank, start))

    def _answered(self, st: Rank, seq_b: bytes) -> int | None:
        """A replayed batch's sequence number (None when malformed); the answer is coming, so a long one read
        slowly (a busy consumer, a busy host) is no timeout."""
        st.deadline = self._clock() + self._replay_timeout
        if len(seq_b) != 8:
            self.stats.malformed_messages += 1
            return None
        seq = int.from_bytes(seq_b, "big")
        if seq > st.replay_max:
            st.replay_max = seq
        return seq

    def _given_up(self, st: Rank, now: float) -> None:
        self.stats.replay_timeouts += 1
        self.resets.append(st.rank)
        st.replay_ok_at = now + self._replay_timeout

    def _replay_done(self, st: Rank, reason: LossReason) -> None:
        # Everything up to `through` existed at the publisher when it answered (or should have answered).
        through = max(st.replay_max, st.request_horizon)
        if through > st.replayed_through:
            st.replayed_through = through
            st.through_reason = reason
        st.pump()
