"""Subscriber lifecycle and I/O behaviour against a raw pyzmq publisher (no vllm import needed).

The raw publisher speaks vLLM's protocol; `legacy=True` answers replays in the layout of vLLM <= 0.25
(no topic frame), which the subscriber must read as well.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import msgspec
import pytest
import zmq

from vllm_devclient.kv_events import (
    AsyncKVEventSubscriber,
    BlockStored,
    KVEventsClosedError,
    KVEventSourceError,
    KVEventsTimeoutError,
    KVEventSubscriber,
)

ENC = msgspec.msgpack.Encoder()
END = b"\xff" * 8


def payload(seq: int, medium: str = "GPU") -> bytes:
    return ENC.encode([float(seq), [{"type": "BlockStored", "block_hashes": [seq], "medium": medium}], 0])


def bind_when_free(sock: zmq.Socket[bytes], endpoint: str) -> None:
    """Bind, retrying while a closed socket's port is still being released (ZMQ closes in its I/O thread)."""
    deadline = time.monotonic() + 5
    while True:
        try:
            sock.bind(endpoint)
            return
        except zmq.ZMQError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class RawPublisher:
    """PUB driven from the test thread; the replay ROUTER answered by a thread from a shared buffer."""

    def __init__(
        self,
        *,
        legacy: bool = False,
        topic: bytes = b"kv",
        endpoints: tuple[str, str] = ("tcp://127.0.0.1:0", "tcp://127.0.0.1:0"),
    ) -> None:
        self.ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self.topic = topic
        self.legacy = legacy
        self.pub = self.ctx.socket(zmq.XPUB)  # same wire protocol as PUB; tells us when a subscriber joined
        self.pub.setsockopt(zmq.LINGER, 0)
        bind_when_free(self.pub, endpoints[0])
        self.endpoint = self.pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.router = self.ctx.socket(zmq.ROUTER)
        self.router.setsockopt(zmq.LINGER, 0)
        bind_when_free(self.router, endpoints[1])
        self.replay_endpoint = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.buffer: list[tuple[int, bytes]] = []
        self.requests: list[int] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()
        self.seq = 0

    def _serve(self) -> None:
        while not self.stop.is_set():
            if not self.router.poll(20):
                continue
            ident, _, start_b = self.router.recv_multipart()
            start = int.from_bytes(start_b, "big")
            with self.lock:
                self.requests.append(start)
                items = [(s, p) for s, p in self.buffer if s >= start]
            for s, p in items:
                if self.legacy:
                    self.router.send_multipart([ident, b"", s.to_bytes(8, "big"), p])
                else:
                    self.router.send_multipart([ident, b"", self.topic, s.to_bytes(8, "big"), p])
            self.router.send_multipart([ident, b"", END, b""] if self.legacy else [ident, b"", b"", END, b""])

    def wait_subscribed(self) -> None:
        assert self.pub.poll(5000), "no subscriber joined"
        self.pub.recv()

    def publish(self, *, live: bool = True, medium: str = "GPU") -> int:
        seq, self.seq = self.seq, self.seq + 1
        p = payload(seq, medium)
        with self.lock:
            self.buffer.append((seq, p))
        if live:
            self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), p])
        return seq

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.router.close(linger=0)
        self.pub.close(linger=0)
        self.ctx.term()


def terminates_promptly(ctx: zmq.Context[zmq.Socket[bytes]]) -> bool:
    """Context.term() blocks while any of its sockets is open; it must return at once."""
    done = threading.Event()

    def term() -> None:
        ctx.term()
        done.set()

    threading.Thread(target=term, daemon=True).start()
    return done.wait(2)


@pytest.fixture
def raw() -> Iterator[RawPublisher]:
    pub = RawPublisher()
    yield pub
    pub.close()


@pytest.fixture
def legacy_raw() -> Iterator[RawPublisher]:
    pub = RawPublisher(legacy=True)
    yield pub
    pub.close()


def test_iteration_and_gap_repair_with_legacy_replay_frames(legacy_raw: RawPublisher) -> None:
    raw = legacy_raw
    with KVEventSubscriber(
        raw.endpoint, replay_endpoint=raw.replay_endpoint, topic="kv", backlog=False
    ) as sub:
        raw.wait_subscribed()
        for i in range(6):
            raw.publish(live=i not in (2, 3))
        got = []
        for batch in sub:
            got.append(batch)
            if batch.seq == 5:
                break
    assert [b.seq for b in got] == list(range(6))
    # 2 and 3 never went out live; others may come either way, depending on timing
    assert got[2].replayed and got[3].replayed
    assert got[2].events == [BlockStored(block_hashes=[2], medium="GPU")]
    assert raw.requests and raw.requests[0] == 1  # asked from the last delivered batch (its bytes tell)


def test_tail_drop_is_recovered_by_the_idle_probe(raw: RawPublisher) -> None:
    with KVEventSubscriber(
        raw.endpoint, replay_endpoint=raw.replay_endpoint, topic="kv", probe_interval=0.2
    ) as sub:
        raw.wait_subscribed()
        raw.publish()
        raw.publish(live=False)  # dropped, and nothing after it to reveal the gap
        assert sub.recv(deadline=5).seq == 0
        late = sub.recv(deadline=5)
        assert (late.seq, late.replayed) == (1, True)


def test_wait_until_quiet_probes_for_the_tail(raw: RawPublisher) -> None:
    with KVEventSubscriber(
        raw.endpoint, replay_endpoint=raw.replay_endpoint, topic="kv", probe_interval=None
    ) as sub:
        raw.wait_subscribed()
        raw.publish(medium="CPU")
        raw.publish(live=False, medium="CPU")
        tally = sub.wait_until_quiet(0.2, deadline=5)
        assert tally.batches == 2 and tally.stored("CPU") == 2
        with pytest.raises(KVEventsTimeoutError, match="not quiet"):
            sub.wait_until_quiet(1.0, deadline=0.5)  # cannot be proven within the deadline


def test_a_restart_at_the_expected_sequence_is_caught_by_the_reconnection() -> None:
    """The new publisher's first live batch carries exactly the sequence number the subscriber expects
    next (its earlier ones went out before the SUB reconnected): only the reconnection betrays it."""
    old = RawPublisher()
    try:
        with KVEventSubscriber(
            old.endpoint, replay_endpoint=old.replay_endpoint, topic="kv", backlog=False, probe_interval=None
        ) as sub:
            old.wait_subscribed()
            for _ in range(5):
                old.publish()
            assert [sub.recv(deadline=5).seq for _ in range(5)] == list(range(5))
            old.close()
            new = RawPublisher(endpoints=(old.endpoint, old.replay_endpoint))
            try:
                for _ in range(5):
                    new.publish(live=False, medium="CPU")  # nobody subscribed yet
                got = []
                deadline = time.monotonic() + 5
                while not new.pub.poll(20):  # the SUB subscribes again once it is read
                    assert time.monotonic() < deadline, "the subscriber did not reconnect"
                    if (b := sub.poll(0.0)) is not None:
                        got.append(b)
                new.pub.recv()
                new.publish(medium="CPU")  # seq 5: what the old publisher's next would have been
                while len(got) < 6:
                    got.append(sub.recv(deadline=5))
                assert [b.seq for b in got] == list(range(6))
                assert all(b.events[0].medium == "CPU" for b in got)  # type: ignore[union-attr]
                assert got[0].restart is not None and got[0].restart.last_seq == 4
                assert sub.stats.reconnects == 1 and not sub.losses
            finally:
                new.close()
    finally:
        if not old.ctx.closed:
            old.close()


def test_recv_deadline_and_poll(raw: RawPublisher) -> None:
    with KVEventSubscriber(raw.endpoint, topic="kv") as sub:
        assert sub.poll(0.05) is None
        started = time.monotonic()
        with pytest.raises(KVEventsTimeoutError, match="no KV event batch") as info:
            sub.recv(deadline=0.2)
        assert 0.15 < time.monotonic() - started < 2
        assert info.value.waited_s >= 0.15 and info.value.tally.batches == 0


def test_close_leaves_no_socket_behind_on_a_shared_context() -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    sub = KVEventSubscriber("inproc://kv", replay_endpoint="inproc://kv-replay", bind=True, context=ctx)
    sub.close()
    sub.close()  # idempotent
    assert sub.closed and not ctx.closed  # a context passed in is the caller's
    with pytest.raises(KVEventsClosedError):
        sub.recv(deadline=0.1)
    assert list(sub) == []
    assert terminates_promptly(ctx), "a socket was left open"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1, "1"])
def test_a_wait_refuses_a_deadline_that_is_not_seconds(raw: RawPublisher, bad: object) -> None:
    with KVEventSubscriber(raw.endpoint, replay_endpoint=raw.replay_endpoint) as sub:
        with pytest.raises(KVEventSourceError, match="deadline"):
            sub.wait_for_stored(1, deadline=bad)  # type: ignore[arg-type]
        with pytest.raises(KVEventSourceError, match="quiet"):
            sub.wait_until_quiet(quiet=bad, deadline=1)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="timeout"):
            sub.wait_for_stored(1, timeout=1)  # type: ignore[call-arg]  # timeout= bounds one try elsewhere


def test_own_context_is_terminated(raw: RawPublisher) -> None:
    sub = KVEventSubscriber(raw.endpoint, replay_endpoint=raw.replay_endpoint)
    ctx = sub._ctx
    with sub:
        pass
    assert ctx.closed


def test_constructor_errors_leave_nothing_open(raw: RawPublisher) -> None:
    with pytest.raises(KVEventSourceError, match="either endpoint"):
        KVEventSubscriber()
    with pytest.raises(KVEventSourceError, match="not both"):
        KVEventSubscriber("tcp://127.0.0.1:1", sources={0: {"endpoint": "tcp://127.0.0.1:1"}})
    with pytest.raises(KVEventSourceError, match="replay_timeout"):
        KVEventSubscriber("tcp://127.0.0.1:1", replay_timeout=0)
    with pytest.raises(KVEventSourceError, match="rcvhwm"):
        KVEventSubscriber("tcp://127.0.0.1:1", rcvhwm=0)
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    # Binding what the publisher already bound fails clearly, and the half-built subscriber cleans up.
    with pytest.raises(KVEventSourceError, match="cannot bind"):
        KVEventSubscriber(raw.endpoint, bind=True, context=ctx)
    assert terminates_promptly(ctx), "a socket was left open"


def test_asyncio_context_is_accepted(raw: RawPublisher) -> None:
    import zmq.asyncio

    actx = zmq.asyncio.Context()
    try:
        with KVEventSubscriber(raw.endpoint, topic="kv", context=actx) as sub:
            raw.wait_subscribed()
            raw.publish()
            assert sub.recv(deadline=5).seq == 0
    finally:
        actx.term()


async def test_async_iteration_gap_repair_and_close(raw: RawPublisher) -> None:
    async with AsyncKVEventSubscriber(raw.endpoint, replay_endpoint=raw.replay_endpoint, topic="kv") as sub:
        await asyncio.to_thread(raw.wait_subscribed)
        for i in range(5):
            raw.publish(live=i != 1)
        seqs = []
        async for batch in sub:
            seqs.append((batch.seq, batch.replayed))
            if batch.seq == 4:
                break
        assert [s for s, _ in seqs] == list(range(5)) and seqs[1] == (1, True)
        assert await sub.poll(0.05) is None
        with pytest.raises(KVEventsTimeoutError):
            await sub.recv(deadline=0.1)
    assert sub.closed
    with pytest.raises(StopAsyncIteration):
        await sub.__anext__()


async def test_async_wait_is_cancellable(raw: RawPublisher) -> None:
    async with AsyncKVEventSubscriber(raw.endpoint, topic="kv") as sub:
        task = asyncio.create_task(sub.recv())
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        raw.wait_subscribed()
        raw.publish()
        assert (await sub.recv(deadline=5)).seq == 0  # still usable after a cancelled wait


def test_held_batches_are_bounded_while_a_replay_hangs(raw: RawPublisher) -> None:
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    silent = ctx.socket(zmq.ROUTER)  # takes replay requests and never answers
    silent.setsockopt(zmq.LINGER, 0)
    silent.bind("tcp://127.0.0.1:0")
    try:
        with KVEventSubscriber(
            raw.endpoint,
            replay_endpoint=silent.getsockopt_string(zmq.LAST_ENDPOINT),
            topic="kv",
            backlog=False,
            replay_timeout=0.5,
            max_buffered=3,
        ) as sub:
            raw.wait_subscribed()
            for i in range(30):
                raw.publish(live=i != 1)
            assert sub.recv(deadline=5).seq == 0
            assert sub.poll(0.2) is None  # 2.. wait behind the gap while the replay is outstanding
            assert sub._stream.held_count() <= 3  # the rest stays in ZMQ's queue, not in ours
            after = sub.recv(deadline=5)  # the replay times out: the gap is reported, the stream goes on
            assert after.seq == 2
            assert [(x.first_seq, x.last_seq, x.reason) for x in after.losses] == [(1, 1, "replay_timeout")]
            assert [sub.recv(deadline=5).seq for _ in range(27)] == list(range(3, 30))
            assert sub.stats.replay_timeouts == 1
    finally:
        silent.close(linger=0)
        ctx.term()


def test_poll_zero_and_count_stored_read_what_has_arrived(raw: RawPublisher) -> None:
    with KVEventSubscriber(raw.endpoint, topic="kv", probe_interval=None) as sub:
        raw.wait_subscribed()
        raw.publish(medium="CPU")
        raw.publish(medium="CPU")
        time.sleep(0.3)  # both batches sit in the socket; a zero-timeout poll must still read them
        assert sub.count_stored("CPU") == 2
        assert sub.poll(0.0) is None


def test_both_subscribers_have_the_same_documented_surface() -> None:
    """The sync subscriber is generated from the async one (scripts/unasync.py): same public names, each
    with a docstring, and no async word left in its own."""

    def public(cls: type) -> dict[str, object]:
        return {n: getattr(cls, n) for n in dir(cls) if not n.startswith("_")}

    sync, aio = public(KVEventSubscriber), public(AsyncKVEventSubscriber)
    assert sync.keys() == aio.keys()
    for cls, members in ((KVEventSubscriber, sync), (AsyncKVEventSubscriber, aio)):
        missing = [n for n, m in members.items() if not m.__doc__]
        assert not missing, f"{cls.__name__}: no docstring on {missing}"
    doc = " ".join((KVEventSubscriber.__doc__ or "").split())
    assert "zmq.Poller in the blocking driver" in doc and "async with" not in doc and "await" not in doc
