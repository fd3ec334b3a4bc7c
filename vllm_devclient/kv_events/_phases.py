"""A rank's replay conversation as a table, as h11 keeps its states (`h11/_state.py`): for each phase and
event, the action the stream takes (a method `_<action>` of `EventStream`) and the phase the rank goes to.

The phases of a rank (the spec is `_stream.py`'s docstring):

- IDLE: no replay request outstanding;
- REPLAYING: a request for what is missing (or the initial backlog) is outstanding; its batches are cached
  and delivered as soon as they are next in line;
- CHECKING: a request from the last delivered batch is outstanding; its first answer tells whether the
  same publisher answers (the fingerprint); live batches are held until it does;
- RESTARTING: a restart is confirmed and the new publisher's replay from 0 is outstanding; live batches are
  held until it answers, or is given up.

The events: from the drivers, LIVE (a live batch off the hot path), RECONNECT (the SUB socket connected
again), REPLAYED (a replayed batch), REPLAY_END (the end marker) and REPLAY_TIMEOUT (a request not sent, or
not answered in time); from the stream itself, ASK (a gap or a reconnection needs a replay and nothing was
delivered yet: from the next number), CHECK (the same, from the last delivered batch: its bytes tell the
publisher), SAME_PUBLISHER (the check's first answer: the same bytes, or the fingerprint rolled out),
RESTART (a new publisher: a live number below the next one that is no copy, or the check's answer) and
REPLAY_UNAVAILABLE (a restart on a rank without a replay endpoint: nothing to ask).

The next phase is entered before the action runs: an action may deliver, and delivering may raise the next
event. A pair that never happens (an event the stream raises only in another phase) has the action `never`,
which raises; `tests/test_kv_events_phases.py` keeps the table complete.
"""

from __future__ import annotations

import enum

__all__ = ["TRANSITIONS", "Event", "Phase"]


class Phase(enum.Enum):
    __hash__ = object.__hash__  # members are singletons; Enum's own hashes the name, in Python, per look-up

    IDLE = "idle"
    REPLAYING = "replaying"
    CHECKING = "checking"
    RESTARTING = "restarting"


class Event(enum.Enum):
    __hash__ = object.__hash__

    LIVE = "live"
    RECONNECT = "reconnect"
    REPLAYED = "replayed"
    REPLAY_END = "replay end"
    REPLAY_TIMEOUT = "replay timeout"
    ASK = "ask"
    CHECK = "check"
    SAME_PUBLISHER = "same publisher"
    RESTART = "restart"
    REPLAY_UNAVAILABLE = "replay unavailable"


IDLE, REPLAYING, CHECKING, RESTARTING = Phase
E = Event

# phase -> event -> (action, next phase)
TRANSITIONS: dict[Phase, dict[Event, tuple[str, Phase]]] = {
    IDLE: {
        E.LIVE: ("hold_live", IDLE),
        E.RECONNECT: ("suspect", IDLE),
        E.REPLAYED: ("stale", IDLE),  # an answer to a request given up, read before its socket was replaced
        E.REPLAY_END: ("stale", IDLE),
        E.REPLAY_TIMEOUT: ("nothing", IDLE),
        E.ASK: ("ask_from_expected", REPLAYING),
        E.CHECK: ("ask_from_last", CHECKING),
        E.SAME_PUBLISHER: ("never", IDLE),
        E.RESTART: ("restart", RESTARTING),
        E.REPLAY_UNAVAILABLE: ("never", IDLE),
    },
    REPLAYING: {
        E.LIVE: ("hold_live", REPLAYING),
        E.RECONNECT: ("suspect", REPLAYING),
        E.REPLAYED: ("cache_replayed", REPLAYING),
        E.REPLAY_END: ("replay_ended", IDLE),
        E.REPLAY_TIMEOUT: ("replay_timed_out", IDLE),
        E.ASK: ("never", REPLAYING),
        E.CHECK: ("never", REPLAYING),
        E.SAME_PUBLISHER: ("never", REPLAYING),
        E.RESTART: ("restart_in_flight", RESTARTING),  # the outstanding request is dropped with its socket
        E.REPLAY_UNAVAILABLE: ("never", REPLAYING),
    },
    CHECKING: {
        E.LIVE: ("hold_live", CHECKING),
        E.RECONNECT: ("suspect", CHECKING),
        E.REPLAYED: ("check_publisher", CHECKING),  # raises SAME_PUBLISHER or RESTART, or is malformed
        E.REPLAY_END: ("restart_in_flight", RESTARTING),  # nothing at or after the fingerprint
        E.REPLAY_TIMEOUT: ("replay_timed_out", IDLE),  # no verdict: carry on as the same publisher
        E.ASK: ("never", CHECKING),
        E.CHECK: ("never", CHECKING),
        E.SAME_PUBLISHER: ("same_publisher", REPLAYING),  # the rest of the answer is a replay like any
        E.RESTART: ("restart_in_flight", RESTARTING),
        E.REPLAY_UNAVAILABLE: ("never", CHECKING),
    },
    RESTARTING: {
        E.LIVE: ("hold_live", RESTARTING),
        E.RECONNECT: ("suspect", RESTARTING),
        E.REPLAYED: ("keep_fresh", RESTARTING),
        E.REPLAY_END: ("settle_restart", IDLE),
        E.REPLAY_TIMEOUT: ("restart_timed_out", IDLE),
        E.ASK: ("never", RESTARTING),
        E.CHECK: ("never", RESTARTING),
        E.SAME_PUBLISHER: ("never", RESTARTING),
        E.RESTART: ("never", RESTARTING),
        E.REPLAY_UNAVAILABLE: ("settle_unasked", IDLE),
    },
}
