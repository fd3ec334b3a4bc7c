"""The table of a rank's replay conversation (`kv_events/_phases.py`): complete, its actions real, its
`never` pairs refused. Its behaviour is `test_kv_events_stream.py`'s."""

from __future__ import annotations

import inspect

import pytest

from vllm_devclient.kv_events._phases import TRANSITIONS, Event, Phase
from vllm_devclient.kv_events._stream import EventStream


def test_the_table_has_a_step_for_every_phase_and_event() -> None:
    assert set(TRANSITIONS) == set(Phase)
    for phase, row in TRANSITIONS.items():
        assert set(row) == set(Event), phase


def test_every_action_is_a_method_of_the_stream() -> None:
    actions = {action for row in TRANSITIONS.values() for action, _ in row.values()}
    for action in actions:
        assert inspect.isfunction(getattr(EventStream, "_" + action, None)), action


def test_every_phase_is_reached_from_idle_and_left() -> None:
    reached, todo = {Phase.IDLE}, [Phase.IDLE]
    while todo:
        for action, nxt in TRANSITIONS[todo.pop()].values():
            if action != "never" and nxt not in reached:
                reached.add(nxt)
                todo.append(nxt)
    assert reached == set(Phase)
    for phase in Phase:
        assert phase is Phase.IDLE or any(nxt is not phase for _, nxt in TRANSITIONS[phase].values())


def test_what_only_the_stream_raises_is_asked_of_an_idle_rank_alone() -> None:
    # A request goes out only from IDLE; a check's verdict comes only while CHECKING.
    for phase, row in TRANSITIONS.items():
        assert (row[Event.ASK][0] == "never") is (phase is not Phase.IDLE)
        assert (row[Event.CHECK][0] == "never") is (phase is not Phase.IDLE)
        assert (row[Event.SAME_PUBLISHER][0] == "never") is (phase is not Phase.CHECKING)


@pytest.mark.parametrize(
    ("phase", "event"),
    [(p, e) for p, row in TRANSITIONS.items() for e, (action, _) in row.items() if action == "never"],
)
def test_a_pair_the_table_has_as_never_raises(phase: Phase, event: Event) -> None:
    stream = EventStream([(0, True)], backlog=False, replay_timeout=2.0)
    rank = stream._ranks[0]
    rank.phase = phase
    with pytest.raises(AssertionError, match="never"):
        stream._fire(rank, event)
