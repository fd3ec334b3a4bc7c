"""The shared sequence-tracking state machine, driven frame by frame with a fake clock (no sockets)."""

from __future__ import annotations

import msgspec
import pytest

from vllm_devclient.kv_events import BlockStored, KVEventBatch, KVEventsLostError
from vllm_devclient.kv_events._stream import END_SEQ, EventStream

ENC = msgspec.msgpack.Encoder()


def payload(seq: int, tag: int = 0) -> bytes:
    """A current-format batch whose one event carries `seq` (and `tag`, to tell publishers apart)."""
    return ENC.encode([float(seq), [{"type": "BlockStored", "block_hashes": [seq, tag], "medium": "GPU"}], 0])


def live(seq: int, tag: int = 0) -> list[bytes]:
    return [b"kv", seq.to_bytes(8, "big"), payload(seq, tag)]


def replayed(seq: int, tag: int = 0, *, topic: bool = True) -> list[bytes]:
    if topic:  # vLLM >= 0.26
        return [b"", b"kv", seq.to_bytes(8, "big"), payload(seq, tag)]
    return [b"", seq.to_bytes(8, "big"), payload(seq, tag)]  # older releases: no topic frame


END = [b"", b"", END_SEQ, b""]
OLD_END = [b"", END_SEQ, b""]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(
    *, replay: bool = True, backlog: bool = False, ranks: int = 1, raise_on_loss: bool = False
) -> tuple[EventStream, Clock]:
    clock = Clock()
    ranks_ = [(r, replay) for r in range(ranks)]
    stream = EventStream(
        ranks_, backlog=backlog, replay_timeout=2.0, raise_on_loss=raise_on_loss, clock=clock
    )
    return stream, clock


def drain(stream: EventStream) -> list[KVEventBatch]:
    out = []
    while (b := stream.pop()) is not None:
        out.append(b)
    return out


def seqs(batches: list[KVEventBatch]) -> list[int]:
    return [b.seq for b in batches]


def test_in_order_live_is_delivered_and_decoded() -> None:
    s, _ = make()
    for i in range(5, 8):
        s.on_live(0, live(i))
    out = drain(s)
    assert seqs(out) == [5, 6, 7]  # the first batch sets the baseline; nothing before it is "lost"
    assert out[0].events == [BlockStored(block_hashes=[5, 0], medium="GPU")]
    assert not s.requests and not s.losses


def test_gap_is_replayed_from_expected_and_filled_in_order() -> None:
    s, _ = make()
    s.on_live(0, live(0))
    s.on_live(0, live(3))  # 1, 2 dropped
    assert s.requests == [(0, 1)]
    s.requests.clear()
    assert seqs(drain(s)) == [0]  # 3 is held behind the gap
    for i in (1, 2, 3, 4, 5):  # the replay brings everything buffered from 1 on
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    out = drain(s)
    assert seqs(out) == [1, 2, 3, 4, 5]
    # 1, 2 from replay, 3 from the live socket, 4 and 5 from replay ahead of their live copies
    assert [b.replayed for b in out] == [True, True, False, True, True]
    assert all(b.events[0].block_hashes[0] == b.seq for b in out)  # type: ignore[union-attr]
    # Those live copies are dropped, not delivered twice nor taken for a publisher restart.
    for i in (4, 5, 6):
        s.on_live(0, live(i))
    assert seqs(drain(s)) == [6]
    assert s.stats.duplicates_dropped == 2 and not s.restarts and not s.losses


def test_what_replay_no_longer_has_is_reported_lost_with_its_range() -> None:
    s, _ = make()
    s.on_live(0, live(0))
    s.on_live(0, live(10))
    assert s.requests == [(0, 1)]
    for i in (6, 7, 8, 9, 10):  # 1..5 rolled out of the publisher's buffer
        s.on_replay(0, replayed(i, topic=False))
    s.on_replay(0, OLD_END)
    out = drain(s)
    assert seqs(out) == [0, 6, 7, 8, 9, 10]
    loss = out[1].losses[0]
    assert (loss.rank, loss.first_seq, loss.last_seq, loss.reason, loss.count) == (
        0,
        1,
        5,
        "not_in_replay_buffer",
        5,
    )
    assert s.losses == [loss] and s.tally.lost_batches == 5


def test_lower_sequence_is_a_restart_not_a_gap() -> None:
    s, _ = make()
    for i in range(4):
        s.on_live(0, live(i))
    drain(s)
    s.on_live(0, live(2, tag=1))  # new publisher; its 0 and 1 were missed
    assert s.requests == [(0, 0)]
    s.requests.clear()
    for i in range(3):
        s.on_replay(0, replayed(i, tag=1))
    s.on_replay(0, END)
    out = drain(s)
    assert seqs(out) == [0, 1, 2]
    assert all(b.events[0].block_hashes == [b.seq, 1] for b in out)  # type: ignore[union-attr]
    assert out[0].restart is not None
    assert (out[0].restart.last_seq, out[0].restart.first_seq) == (3, 2)
    assert not s.losses and s.tally.restarts == 1


def test_restart_without_replay_reports_the_missed_start_as_lost() -> None:
    s, _ = make(replay=False)
    for i in range(4):
        s.on_live(0, live(i))
    s.on_live(0, live(1, tag=1))
    out = drain(s)
    assert seqs(out) == [0, 1, 2, 3, 1]
    assert out[-1].restart is not None
    assert [(x.first_seq, x.last_seq, x.reason) for x in out[-1].losses] == [(0, 0, "replay_unavailable")]


def test_no_replay_endpoint_reports_gap_at_once() -> None:
    s, _ = make(replay=False)
    s.on_live(0, live(0))
    s.on_live(0, live(5))
    out = drain(s)
    assert seqs(out) == [0, 5]
    assert [(x.first_seq, x.last_seq, x.reason) for x in out[1].losses] == [(1, 4, "replay_unavailable")]
    assert not s.requests


def test_replay_timeout_reports_loss_resets_socket_and_backs_off() -> None:
    s, clock = make()
    s.on_live(0, live(0))
    s.on_live(0, live(3))
    assert s.requests == [(0, 1)]
    s.requests.clear()
    s.on_replay(0, replayed(1))  # partial answer, then silence
    clock.now += 2.5
    s.check_timeouts()
    assert s.resets == [0]
    out = drain(s)
    assert seqs(out) == [0, 1, 3]
    assert [(x.first_seq, x.last_seq, x.reason) for x in out[2].losses] == [(2, 2, "replay_timeout")]
    # Answers to the abandoned request are ignored, and within the back-off a new gap is not replayed.
    s.on_replay(0, replayed(2))
    assert s.stats.stale_replay_messages == 1
    s.on_live(0, live(5))
    out = drain(s)
    assert seqs(out) == [5] and out[0].losses[0].reason == "replay_timeout"
    assert not s.requests
    clock.now += 3.0
    s.on_live(0, live(7))
    assert s.requests == [(0, 6)]


def test_initial_backlog_sets_baseline_and_merges_with_live() -> None:
    s, _ = make(backlog=True)
    assert s.requests == [(0, 0)]
    s.on_live(0, live(12))  # live arrives while the backlog is still streaming in
    s.on_live(0, live(13))
    for i in range(7, 13):  # buffer holds 7..12
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    out = drain(s)
    assert seqs(out) == [7, 8, 9, 10, 11, 12, 13]
    assert not s.losses  # history before the subscription started is not a loss
    assert s.stats.duplicates_dropped == 1


def test_initial_backlog_timeout_falls_back_to_live() -> None:
    s, clock = make(backlog=True)
    s.on_live(0, live(4))
    clock.now += 3
    s.check_timeouts()
    assert seqs(drain(s)) == [4] and not s.losses


def test_tail_probe_recovers_dropped_tail_and_reports_rolled_out_tail() -> None:
    s, _ = make()
    s.on_live(0, live(0))
    drain(s)
    assert s.probe()
    assert s.requests == [(0, 1)]
    for i in (3, 4):  # 1 and 2 are gone, 3 and 4 were dropped on the live socket
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    out = drain(s)
    assert seqs(out) == [3, 4]
    assert [(x.first_seq, x.last_seq) for x in out[0].losses] == [(1, 2)]
    assert not s.probe() or s.requests[-1] == (0, 5)


def test_two_ranks_are_tracked_separately() -> None:
    s, _ = make(ranks=2)
    s.on_live(0, live(0))
    s.on_live(1, live(7))
    s.on_live(1, live(8))
    s.on_live(0, live(2))
    assert s.requests == [(0, 1)]
    out = drain(s)
    assert [(b.rank, b.seq) for b in out] == [(0, 0), (1, 7), (1, 8)]


def test_undecodable_payload_is_reported_not_raised() -> None:
    s, _ = make()
    s.on_live(0, [b"kv", (0).to_bytes(8, "big"), b"\xc1garbage"])
    s.on_live(0, [b"kv", (1).to_bytes(8, "big"), ENC.encode({"no": "batch"})])
    out = drain(s)
    assert [b.events for b in out] == [[], []]
    assert [b.losses[0].reason for b in out] == ["undecodable", "undecodable"]
    assert "timestamp" in out[1].losses[0].detail


def test_malformed_frames_are_counted_and_skipped() -> None:
    s, _ = make()
    s.on_live(0, [b"kv", b"\x00\x01", b"x"])
    s.on_live(0, [b"only-one"])
    s.on_replay(0, [b"x", b"y"])
    assert s.stats.malformed_messages == 3 and s.pop() is None


def test_raise_on_loss() -> None:
    s, _ = make(replay=False, raise_on_loss=True)
    s.on_live(0, live(0))
    s.on_live(0, live(2))
    assert s.pop() is not None
    with pytest.raises(KVEventsLostError) as info:
        s.pop()
    assert info.value.batch.seq == 2 and info.value.losses[0].first_seq == 1


def test_replayed_payloads_are_released_once_live_catches_up() -> None:
    s, _ = make(backlog=True)
    for i in range(100):
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    assert len(drain(s)) == 100
    s.on_live(0, live(99))  # a live copy still in flight: dropped
    s.on_live(0, live(100))
    assert seqs(drain(s)) == [100]
    assert not s._ranks[0].dups  # nothing kept for copies that can no longer come
    s.on_live(0, live(101))
    assert seqs(drain(s)) == [101] and s._ranks[0].simple
