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


def test_gap_is_replayed_from_the_last_delivered_and_filled_in_order() -> None:
    s, _ = make()
    s.on_live(0, live(0))
    s.on_live(0, live(3))  # 1, 2 dropped
    assert s.requests == [(0, 0)]  # from the last delivered batch: its bytes tell the publisher is the same
    s.requests.clear()
    assert seqs(drain(s)) == [0]  # 3 is held behind the gap
    for i in (0, 1, 2, 3, 4, 5):  # the replay brings everything buffered from 0 on
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
    assert s.requests == [(0, 0)]
    for i in (6, 7, 8, 9, 10):  # 0..5 rolled out of the publisher's buffer
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
    assert s.requests == [(0, 0)]
    s.requests.clear()
    s.on_replay(0, replayed(0))
    s.on_replay(0, replayed(1))  # partial answer, then silence
    clock.now += 2.5
    s.check_timeouts()
    assert s.resets == [0]
    out = drain(s)
    assert seqs(out) == [0, 1, 3]
    assert [(x.first_seq, x.last_seq, x.reason) for x in out[2].losses] == [(2, 2, "replay_timeout")]
    # Answers to the abandoned request are ignored, and within the back-off a new gap is not replayed:
    # it was never asked for, so it is unavailable, not timed out.
    s.on_replay(0, replayed(2))
    assert s.stats.stale_replay_messages == 1
    s.on_live(0, live(5))
    out = drain(s)
    assert seqs(out) == [5] and out[0].losses[0].reason == "replay_unavailable"
    assert not s.requests
    clock.now += 3.0
    s.on_live(0, live(7))
    assert s.requests == [(0, 5)]


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
    s, clock = make()
    s.on_live(0, live(0))
    drain(s)
    assert s.probe()
    assert s.requests == [(0, 0)]
    for i in (0, 3, 4):  # 1 and 2 are gone, 3 and 4 were dropped on the live socket
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    # 1 and 2 could still be on their way on the live socket: nothing is lost before it stays silent.
    assert s.pop() is None and s.replaying() and s.next_deadline() == clock.now + 2.0
    assert not s.probe()  # the tail is known already
    clock.now += 1.9
    s.check_timeouts()
    assert s.pop() is None
    clock.now += 0.1
    s.check_timeouts()
    out = drain(s)
    assert seqs(out) == [3, 4] and not s.replaying()
    assert [(x.first_seq, x.last_seq) for x in out[0].losses] == [(1, 2)]
    assert not s.probe() or s.requests[-1] == (0, 4)


def test_two_ranks_are_tracked_separately() -> None:
    s, _ = make(ranks=2)
    s.on_live(0, live(0))
    s.on_live(1, live(7))
    s.on_live(1, live(8))
    s.on_live(0, live(2))
    assert s.requests == [(0, 0)]
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


# -- publisher restarts: reconnections, fingerprints, late batches of the old publisher -------------------


def new(seqs_: range | list[int]) -> list[list[bytes]]:
    """The new publisher's replay answer (tag 1) for these sequence numbers, with its end marker."""
    return [replayed(i, tag=1) for i in seqs_] + [END]


def feed_replay(s: EventStream, frames: list[list[bytes]]) -> None:
    for f in frames:
        s.on_replay(0, f)


def tags(batches: list[KVEventBatch]) -> list[tuple[int, int]]:
    """(seq, tag) per batch: which publisher's batch was delivered under which sequence number."""
    return [(b.seq, b.events[0].block_hashes[1]) for b in batches]  # type: ignore[union-attr]


def delivered_old(s: EventStream, n: int) -> None:
    for i in range(n):
        s.on_live(0, live(i))
    assert seqs(drain(s)) == list(range(n))


def test_a_restart_whose_first_batches_were_missed_is_found_by_the_fingerprint() -> None:
    """The new publisher's first live batch is above `expected`: the gap's replay, asked from the last
    delivered batch, answers other bytes there, so it is a restart, not the old publisher's gap."""
    s, _ = make()
    delivered_old(s, 15)
    s.on_live(0, live(30, tag=1))
    assert s.requests == [(0, 14)]
    s.requests.clear()
    s.on_replay(0, replayed(14, tag=1))  # not the batch 14 delivered: another publisher
    assert s.requests == [(0, 0)] and s.resets == [0]  # its answer is dropped with its socket
    assert not drain(s)
    feed_replay(s, new(range(31)))
    out = drain(s)
    assert tags(out) == [(i, 1) for i in range(31)]
    assert out[0].restart is not None and (out[0].restart.last_seq, out[0].restart.first_seq) == (14, 30)
    assert [b.restart is None for b in out[1:]] == [True] * 30
    assert not s.losses and s.tally.restarts == 1 and s.restarts == [out[0].restart]
    s.on_live(0, live(31, tag=1))
    assert tags(drain(s)) == [(31, 1)] and s._ranks[0].simple


def test_a_reconnect_holds_live_batches_and_reveals_a_restart_at_the_expected_sequence() -> None:
    """After a reconnection the new publisher's first live batch can carry exactly `expected`."""
    s, _ = make()
    delivered_old(s, 5)
    s.on_reconnect(0)
    assert s.requests == [(0, 4)]
    s.requests.clear()
    s.on_live(0, live(5, tag=1))
    assert not drain(s)  # held: which publisher sent it is not known yet
    s.on_replay(0, replayed(4, tag=1))
    assert s.requests == [(0, 0)]
    feed_replay(s, new(range(6)))
    out = drain(s)
    assert tags(out) == [(i, 1) for i in range(6)]
    assert out[0].restart is not None and (out[0].restart.last_seq, out[0].restart.first_seq) == (4, 5)
    assert not s.losses


def test_a_reconnect_to_the_same_publisher_is_no_restart() -> None:
    s, _ = make()
    delivered_old(s, 5)
    s.on_reconnect(0)
    s.on_live(0, live(5))
    s.on_live(0, live(7))  # 6 was published while disconnected
    assert not drain(s)
    s.requests.clear()
    for i in (4, 5, 6, 7):  # the same bytes at 4: the same publisher
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    out = drain(s)
    assert seqs(out) == [5, 6, 7] and [b.replayed for b in out] == [False, True, False]
    assert not s.restarts and not s.losses and not s.requests and s.stats.reconnects == 1


def test_a_fingerprint_rolled_out_of_the_buffer_means_the_same_publisher() -> None:
    s, _ = make()
    delivered_old(s, 5)
    s.on_reconnect(0)
    s.on_live(0, live(5))
    feed_replay(s, [replayed(5), END])  # 4 is no longer buffered
    assert seqs(drain(s)) == [5] and not s.restarts


def test_an_end_marker_with_nothing_after_the_fingerprint_is_a_restart() -> None:
    """The old publisher had at least the last delivered batch: a buffer without it is a new one's."""
    s, _ = make()
    delivered_old(s, 50)
    s.on_reconnect(0)
    assert s.requests == [(0, 49)]
    s.requests.clear()
    s.on_replay(0, END)
    assert s.requests == [(0, 0)]
    feed_replay(s, new(range(3)))
    out = drain(s)
    assert tags(out) == [(0, 1), (1, 1), (2, 1)]
    assert out[0].restart is not None and (out[0].restart.last_seq, out[0].restart.first_seq) == (49, 0)


def test_a_restart_while_busy_delivers_the_old_publishers_late_batches_first() -> None:
    """The old publisher's last batches are read behind the reconnection, mixed with the new one's:
    each held batch is told apart by (seq, payload) against the new publisher's replay."""
    s, _ = make()
    delivered_old(s, 3)
    s.on_reconnect(0)
    s.requests.clear()
    late_old = [3, 4, 6, 7]  # 5 was dropped, and the old publisher is gone
    arrivals = [live(3), live(0, tag=1), live(4), live(1, tag=1), live(6), live(7)]
    arrivals += [live(i, tag=1) for i in range(2, 10)]
    for f in arrivals:
        s.on_live(0, f)
    assert not drain(s)
    s.on_replay(0, replayed(2, tag=1))
    assert s.requests == [(0, 0)]
    feed_replay(s, new(range(10)))
    out = drain(s)
    assert tags(out) == [(i, 0) for i in late_old] + [(i, 1) for i in range(10)]
    assert [(x.first_seq, x.last_seq, x.reason) for x in out[2].losses] == [(5, 5, "replay_unavailable")]
    restart = out[4].restart
    assert restart is not None and (restart.last_seq, restart.first_seq) == (7, 0)
    assert all(b.restart is None for b in out[:4] + out[5:])
    assert s.stats.duplicates_dropped == 10  # the new publisher's live copies


def test_late_batches_are_told_apart_by_when_they_arrived() -> None:
    """A held batch above what the new publisher had when asked is the old one's if it was read before
    the request (the new one had not published it), the new one's if read after."""
    s, _ = make()
    delivered_old(s, 3)
    s.on_live(0, live(2, tag=1))  # a lower sequence number: a restart at once
    assert s.requests == [(0, 0)]
    s.on_live(0, live(5, tag=1))  # read after the request: the new publisher's
    feed_replay(s, new(range(4)))
    assert tags(drain(s)) == [(i, 1) for i in range(4)]
    # 4 was dropped: asked for from the new publisher's last delivered batch
    assert s.requests[-1] == (0, 3)

    s, _ = make()
    delivered_old(s, 3)
    s.on_reconnect(0)
    s.on_live(0, live(8))  # the old publisher's, read before the restart was known
    s.on_replay(0, replayed(2, tag=1))
    feed_replay(s, new(range(4)))
    out = drain(s)
    assert tags(out) == [(8, 0)] + [(i, 1) for i in range(4)]
    assert [(x.first_seq, x.last_seq) for x in out[0].losses] == [(3, 7)]


def test_a_restart_clears_the_old_publishers_backoff() -> None:
    s, clock = make()
    delivered_old(s, 3)
    assert s.probe() and s.requests == [(0, 2)]
    clock.now += 2.5  # the old publisher is gone: the probe times out, replay backs off
    s.check_timeouts()
    s.requests.clear()
    s.on_live(0, live(1, tag=1))  # the new publisher, within the backoff
    assert s.requests == [(0, 0)]
    feed_replay(s, new(range(2)))
    out = drain(s)
    assert tags(out) == [(0, 1), (1, 1)] and not s.losses


def test_a_reconnect_clears_the_backoff() -> None:
    s, clock = make()
    delivered_old(s, 3)
    s.probe()
    clock.now += 2.5
    s.check_timeouts()
    s.requests.clear()
    s.on_reconnect(0)
    assert s.requests == [(0, 2)]


def test_a_timed_out_restart_replay_reports_the_new_publishers_start_lost() -> None:
    s, clock = make()
    delivered_old(s, 10)
    s.on_live(0, live(4, tag=1))
    s.on_live(0, live(5, tag=1))
    assert s.requests == [(0, 0)]
    clock.now += 2.5
    s.check_timeouts()
    out = drain(s)
    assert tags(out) == [(4, 1), (5, 1)]
    assert out[0].restart is not None
    assert [(x.first_seq, x.last_seq, x.reason) for x in out[0].losses] == [(0, 3, "replay_timeout")]


def test_a_reconnect_before_any_batch_changes_nothing() -> None:
    s, _ = make()
    s.on_reconnect(0)
    s.on_live(0, live(3))
    assert seqs(drain(s)) == [3] and not s.requests


# -- counting since the start ---------------------------------------------------------------------------


def test_backlog_published_before_the_start_is_left_out_of_the_count_since_the_start() -> None:
    """Payload ts equals the seq here: with started_at=5.5, backlog batches 0..5 were published before."""
    clock = Clock()
    s = EventStream([(0, True)], backlog=True, replay_timeout=2.0, clock=clock, started_at=5.5)
    s.on_live(0, live(9))  # the first live batch: 9 and on were published after the subscription
    for i in range(10):
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    assert seqs(drain(s)) == list(range(10))
    assert s.tally.stored("GPU") == 20  # two hashes per batch
    assert s.stored_since_start("GPU") == 8  # 6, 7, 8, 9
    since = s.tally_since_start()
    assert since.batches == 4 and since.stored("GPU") == 8 and s.tally.batches == 10
    s.on_live(0, live(10))
    drain(s)
    assert s.stored_since_start("GPU") == 10


def test_backlog_after_the_first_live_batch_counts_whatever_its_timestamp() -> None:
    clock = Clock()
    s = EventStream([(0, True)], backlog=True, replay_timeout=2.0, clock=clock, started_at=1e9)
    s.on_live(0, live(3))
    feed_replay(s, [replayed(i) for i in range(5)] + [END])
    drain(s)
    assert s.tally_since_start().batches == 2  # 3 and 4: the publisher's clock is not needed for them


def lost_seqs(stream: EventStream) -> list[int]:
    return [seq for loss in stream.losses for seq in range(loss.first_seq, loss.last_seq + 1)]


def test_a_probe_answered_from_far_ahead_of_the_live_socket_loses_nothing() -> None:
    """The interleaving that broke under CPU load: the consumer fell behind, so the publisher was more
    than its whole replay buffer ahead of the live socket when a probe was answered. The numbers between
    the last live batch read and the replay's first were taken for lost, and their live copies, read
    next, for a restarted publisher: delivered twice, out of order, and reported lost besides."""
    s, clock = make()
    for i in range(10):
        s.on_live(0, live(i))
    out = drain(s)
    assert s.probe() and s.requests == [(0, 9)]
    for i in range(100, 110):  # the buffer holds 100..109 only; 10..99 are queued on the live socket
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    assert s.pop() is None and not s.losses and not s.probe()
    clock.now += 1.0  # the consumer was busy; now it reads the live socket
    for i in range(10, 110):
        s.on_live(0, live(i))
    out += drain(s)
    assert seqs(out) == list(range(110))  # once each, in order
    assert [b.replayed for b in out[100:]] == [True] * 10  # ahead of their live copies...
    assert s.stats.duplicates_dropped == 10  # ...which are dropped
    assert not s.losses and not s.restarts and s.stats.replay_requests == 1


def test_a_gap_repair_answered_from_far_ahead_loses_only_what_the_live_stream_passed() -> None:
    s, _ = make()
    for i in range(10):
        s.on_live(0, live(i))
    s.on_live(0, live(12))  # 10 and 11 dropped on the live socket
    assert s.requests == [(0, 9)]
    for i in range(100, 110):  # 10..99 are no longer in the buffer
        s.on_replay(0, replayed(i))
    s.on_replay(0, END)
    out = drain(s)
    assert seqs(out) == [*range(10), 12] and lost_seqs(s) == [10, 11]  # the live stream passed them
    for i in [*range(13, 50), *range(60, 110)]:  # 50..59 dropped as well, passed by 60
        s.on_live(0, live(i))
    out += drain(s)
    delivered = seqs(out)
    assert delivered == sorted(set(delivered)) and not set(delivered) & set(lost_seqs(s))
    assert lost_seqs(s) == [10, 11, *range(50, 60)]
    assert sorted(delivered + lost_seqs(s)) == list(range(110))
    assert {x.reason for x in s.losses} == {"not_in_replay_buffer"} and not s.restarts


def test_a_long_answer_read_slowly_is_no_timeout() -> None:
    s, clock = make()
    s.on_live(0, live(0))
    s.on_live(0, live(5))
    assert s.requests == [(0, 0)]
    for i in range(5):  # each frame within the timeout (2 s) of the one before, the whole answer not
        clock.now += 1.5
        s.check_timeouts()
        s.on_replay(0, replayed(i))
    clock.now += 1.5
    s.check_timeouts()
    s.on_replay(0, END)
    assert seqs(drain(s)) == list(range(6))
    assert not s.losses and not s.resets and s.stats.replay_timeouts == 0
