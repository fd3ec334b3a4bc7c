"""One rank's sequence tracking: its state, and the in-order delivery of its batches (`Rank.pump`), with what
a gap needs and how a publisher restart is settled. The spec is `_stream.py`'s docstring; the rank's replay
conversation is the table of `_phases.py`, which the stream runs (`Shared.fire`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ._events import EventsLost, LossReason, PublisherRestarted
from ._output import Ready
from ._phases import Event, Phase
from ._restart import attribute

__all__ = ["Rank", "Shared", "SubscriberStats"]


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
class Shared:
    """What the ranks of one stream share: the delivery queue, the counters, the clock, the replay timeout,
    and `fire`, which takes a step of the stream's table for a rank."""

    ready: deque[Ready]
    stats: SubscriberStats
    clock: Callable[[], float]
    replay_timeout: float
    fire: Callable[[Rank, Event], None]


@dataclass(slots=True, eq=False)
class Rank:
    shared: Shared
    rank: int
    replay: bool
    phase: Phase = Phase.IDLE  # of the replay conversation (`_phases.py`)
    # Next sequence number to deliver; None until the first batch sets the baseline.
    expected: int | None = None
    # True when nothing below needs attention, so an in-order live batch takes the hot path.
    simple: bool = True
    held: deque[tuple[int, bytes]] = field(default_factory=deque)  # live batches behind a gap, arrival order
    cache: dict[int, bytes] = field(default_factory=dict)  # replayed batches, all >= expected
    dups: deque[tuple[int, bytes]] = field(default_factory=deque)  # replayed ahead of their live copies
    deadline: float = 0.0  # of the outstanding replay
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
    last: Ready | None = None  # the last delivered batch of the current publisher: the fingerprint
    suspect: bool = False  # reconnected and not yet checked: hold live batches
    fingerprint: tuple[int, bytes] = (-1, b"")  # (seq, payload) a CHECKING replay must start with
    fresh: dict[int, bytes] = field(default_factory=dict)  # a RESTARTING replay's batches
    held_mark: int = 0  # len(held) when the new publisher was asked
    backlog_max: int = -1  # highest seq of the initial backlog replay
    first_live: int = -1  # first live seq received

    # -- delivery ------------------------------------------------------------------------------------

    def pump(self, now: float | None = None) -> None:
        """Deliver whatever is deliverable; ask for a replay or report losses at gaps."""
        if self.last is not None and len(self.last) == 3 and self.last[1] > self.live_top:
            self.live_top = self.last[1]  # delivered on the hot path, which keeps no live_top of its own
        cache, held, stats = self.cache, self.held, self.shared.stats
        while True:
            exp = self.expected
            if exp is None and (exp := self._baseline()) is None:
                break
            if exp in cache:
                payload = cache.pop(exp)
                self.dups.append((exp, payload))
                stats.replayed_batches += 1
                self.emit(exp, payload, True)
                self.expected = exp + 1
                continue
            if not self._live_may_go():
                break
            if held:
                seq, payload = held[0]
                if seq == exp:
                    held.popleft()
                    self.dups.clear()  # live copies of earlier replayed batches would have come before this
                    self.emit(seq, payload, False)
                    self.expected = seq + 1
                    continue
                if seq < exp:
                    if self._is_dup(seq, payload):
                        held.popleft()
                    else:
                        self.shared.fire(self, Event.RESTART)
                        cache, held = self.cache, self.held  # replaced when the restart is settled at once
                    continue
                nxt = seq
            elif cache:
                nxt = min(cache)  # every cached seq is above exp
            else:
                break
            if not self._gap(exp, nxt, now):
                break
        busy = self.held or self.cache or self.dups or self.losses or self.suspect
        self.simple = not busy and self.phase is Phase.IDLE and self.restart is None

    def _live_may_go(self) -> bool:
        """Whether live batches may be delivered: not while a restart is settled or the publisher is in
        question (a reconnection, which asks a replay to tell, or a check outstanding)."""
        if self.phase is Phase.RESTARTING:
            return False  # everything waits for the new publisher's replay
        if self.suspect and self.phase is Phase.IDLE:
            if self.replay:
                self.ask()
            else:
                self.suspect = False
        return not self.suspect and self.phase is not Phase.CHECKING

    def _baseline(self) -> int | None:
        """The first number to deliver, from the first batches that came; None while there is none."""
        if self.phase is not Phase.IDLE:
            return None  # the initial backlog replay sets the baseline
        if self.cache:
            self.expected = min(self.cache)
            self.backlog_max = max(self.cache)
        elif self.held:
            self.expected = self.held[0][0]
        return self.expected

    def _gap(self, exp: int, nxt: int, now: float | None) -> bool:
        """Gap [exp, nxt - 1]: report what is gone lost, or ask for it; False when it must wait."""
        if exp <= self.replayed_through:
            last = self._gone_through(exp, nxt, now)
            if last < exp:
                return False  # its live copies may still be on their way
            self.lose(exp, last, self.through_reason)
            self.expected = last + 1
            return True
        if self.phase is not Phase.IDLE:
            return False  # the outstanding replay may still bring it
        if self.replay and self.shared.clock() >= self.replay_ok_at:
            self.ask()
            return False
        self.lose(exp, nxt - 1, "replay_unavailable")  # not asked: never timed out
        self.expected = nxt
        return True

    def _gone_through(self, exp: int, nxt: int, now: float | None) -> int:
        """The end of the part of gap [exp, nxt - 1] that is lost (below `exp` when none is yet).

        The publisher's buffer no longer holds it up to `replayed_through`; but the live stream may still
        bring it, unless a later live batch was read (ZMQ keeps order per connection, so the live stream
        dropped what it passed). A gap that only replayed batches lie beyond waits for the live stream:
        it is lost once the live stream passes it, or stays silent for `replay_timeout`.
        """
        last = min(nxt - 1, self.replayed_through)
        if self.cache:
            last = min(last, min(self.cache) - 1)
        if self.live_top >= exp:
            self.settle_at = 0.0
            return min(last, self.live_top)
        if self.phase is not Phase.IDLE:
            return exp - 1  # the outstanding replay's end settles it first
        now = self.shared.clock() if now is None else now
        if not self.settle_at:
            self.settle_at = now + self.shared.replay_timeout
        if now < self.settle_at:
            return exp - 1
        self.settle_at = 0.0
        return last

    def ask(self) -> None:
        """Ask for everything after the last delivered batch: from that batch on, whose bytes tell whether
        the same publisher answers, or from the next number when nothing was delivered."""
        self.shared.fire(self, Event.ASK if self.last is None else Event.CHECK)

    def emit(self, seq: int, payload: bytes, replayed: bool) -> None:
        losses: tuple[EventsLost, ...] = ()
        if self.losses:
            losses = tuple(self.losses)
            self.losses.clear()
        restart, self.restart = self.restart, None
        if restart is not None and restart.first_seq < 0:  # nothing of the new publisher was seen before
            restart = PublisherRestarted(self.rank, restart.last_seq, seq)
        early = replayed and seq <= self.backlog_max and (self.first_live < 0 or seq < self.first_live)
        item = (self.rank, seq, payload, replayed, losses, restart, early)
        self.last = item
        self.shared.ready.append(item)

    def lose(self, first: int, last: int, reason: LossReason) -> None:
        if first <= last:
            self.losses.append(EventsLost(self.rank, first, last, reason))

    def _is_dup(self, seq: int, payload: bytes) -> bool:
        dups = self.dups
        while dups and dups[0][0] < seq:
            dups.popleft()
        if dups and dups[0][0] == seq and dups[0][1] == payload:
            dups.popleft()
            self.shared.stats.duplicates_dropped += 1
            return True
        return False

    # -- a publisher restart -------------------------------------------------------------------------

    def settle_restart(self, *, complete: bool) -> None:
        """Tell the old publisher's late batches from the new one's (`_restart.attribute`), deliver the
        former, and start the new publisher from 0. `complete`: its replay answered in full."""
        assert self.expected is not None
        fresh, self.fresh = self.fresh, {}
        old_expected = self.expected
        told = attribute(self.held, fresh, self.cache, old_expected, self.held_mark if complete else 0)
        self.shared.stats.duplicates_dropped += told.copies
        # The old publisher's late batches first; it is gone, so its gaps cannot be replayed.
        nxt = old_expected
        for seq in sorted(told.old):
            payload, replayed = told.old[seq]
            self._lose_old(nxt, seq - 1)
            if replayed:
                self.shared.stats.replayed_batches += 1
            self.emit(seq, payload, replayed)
            nxt = seq + 1
        self.restart = PublisherRestarted(self.rank, nxt - 1, told.first_new)
        self._start_new_publisher(fresh, told.new, complete)
        self.pump()

    def _lose_old(self, first: int, last: int) -> None:
        """A gap of a publisher that is gone: what a replay said was gone keeps its reason."""
        known = min(last, self.replayed_through)
        self.lose(first, known, self.through_reason)
        self.lose(max(first, known + 1), last, "replay_unavailable")

    def _start_new_publisher(
        self, fresh: dict[int, bytes], new: deque[tuple[int, bytes]], complete: bool
    ) -> None:
        """The new publisher from 0: its replayed batches cached, its live ones held."""
        fresh_max = max(fresh) if fresh else -1
        self.expected = 0
        self.last = None
        self.cache = fresh
        self.held = new
        self.dups.clear()
        self.backlog_max = -1
        self.last_live = self.live_top = max((seq for seq, _ in new), default=-1)
        self.settle_at = 0.0
        if complete:
            self.replayed_through, self.through_reason = fresh_max, "not_in_replay_buffer"
        else:
            self.replayed_through = max(fresh_max, new[0][0] - 1 if new else -1)
            self.through_reason = "replay_timeout" if self.replay else "replay_unavailable"
