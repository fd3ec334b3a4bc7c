"""Acceptance: 100 000 batches with induced drops; every batch delivered once, in order, or reported lost.

vLLM's own publisher thread tops out far below this volume on a 2-core machine, so this test serves the
same protocol from a small raw pyzmq publisher (byte-compatible with vLLM's ZmqEventPublisher: PUB frames
[topic, seq u64 big-endian, payload], ROUTER replay answering [id, "", topic, seq, payload] per buffered
batch and [id, "", "", ff*8, ""] at the end). It uses an XPUB, which speaks the same wire protocol as a
PUB, only so that it can wait for the subscription before it starts. The real-publisher tests are in
test_kv_events_vllm.py.
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque

import msgspec
import pytest
import zmq

from vllm_devclient.kv_events import BlockStored, KVEventSubscriber

N = 100_000
TOPIC = b"kv"
END = (-1).to_bytes(8, "big", signed=True)


class RawPublisher(threading.Thread):
    """Publishes `payloads` (seq = index), skipping `drop_live` on the live socket and `unbuffered` in
    the replay buffer, and answers replay requests until stopped."""

    def __init__(self, ctx: zmq.Context[zmq.Socket[bytes]], payloads: list[bytes], drop_live: set[int],
                 unbuffered: set[int]) -> None:  # fmt: skip
        super().__init__(daemon=True, name="raw-kv-publisher")
        self.payloads = payloads
        self.drop_live = drop_live
        self.unbuffered = unbuffered
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.pub = ctx.socket(zmq.XPUB)
        self.router = ctx.socket(zmq.ROUTER)
        for sock in (self.pub, self.router):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.SNDHWM, 0)  # no drops but the induced ones
        self.pub.bind("tcp://127.0.0.1:0")
        self.router.bind("tcp://127.0.0.1:0")
        self.endpoint = self.pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.replay_endpoint = self.router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.buffer: deque[tuple[int, bytes]] = deque()

    def _serve_replay(self) -> None:
        while self.router.poll(0):
            ident, _, start_b = self.router.recv_multipart()
            start = int.from_bytes(start_b, "big")
            for seq, payload in self.buffer:
                if seq >= start:
                    self.router.send_multipart([ident, b"", TOPIC, seq.to_bytes(8, "big"), payload])
            self.router.send_multipart([ident, b"", b"", END, b""])

    def run(self) -> None:
        try:
            # XPUB hands us the subscription: the subscriber is connected, nothing will be lost to joining.
            while not self.pub.poll(100):
                if self.stop.is_set():
                    return
            self.pub.recv()
            send = self.pub.send_multipart
            for seq, payload in enumerate(self.payloads):
                if seq not in self.unbuffered:
                    self.buffer.append((seq, payload))
                if seq not in self.drop_live:
                    send([TOPIC, seq.to_bytes(8, "big"), payload])
                if seq % 512 == 0:
                    self._serve_replay()
            while not self.stop.is_set():
                if self.router.poll(50):
                    self._serve_replay()
        except BaseException as exc:  # surfaced by the test
            self.error = exc
        finally:
            self.pub.close(linger=0)
            self.router.close(linger=0)


def _payloads(n: int) -> list[bytes]:
    enc = msgspec.msgpack.Encoder()
    event = {"type": "BlockStored", "block_hashes": [0], "parent_block_hash": None, "token_ids": [1, 2, 3, 4],
             "block_size": 16, "lora_id": None, "medium": "GPU", "lora_name": None}  # fmt: skip
    out = []
    for seq in range(n):
        event["block_hashes"] = [seq]
        out.append(enc.encode([1_750_000_000.0 + seq, [event], 0]))
    return out


def _drops(n: int, rng: random.Random) -> tuple[set[int], set[int]]:
    """Live drops in bursts of 1..20 (about 3% of all), and a few bursts the replay buffer lacks too."""
    drop_live: set[int] = set()
    unbuffered: set[int] = set()
    seq = 10
    while seq < n - 100:
        length = rng.randint(1, 20)
        burst = set(range(seq, seq + length))
        drop_live |= burst
        if rng.random() < 0.05:
            unbuffered |= burst
        seq += length + rng.randint(50, 1000)
    return drop_live, unbuffered


@pytest.mark.timeout(120)
def test_100k_batches_with_drops_are_delivered_once_in_order_or_reported_lost() -> None:
    rng = random.Random(42)
    payloads = _payloads(N)
    drop_live, unbuffered = _drops(N, rng)
    assert len(drop_live) > 1000 and unbuffered
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    publisher = RawPublisher(ctx, payloads, drop_live, unbuffered)
    started = time.monotonic()
    try:
        with KVEventSubscriber(
            publisher.endpoint, replay_endpoint=publisher.replay_endpoint, topic="kv"
        ) as sub:
            publisher.start()
            delivered: list[int] = []
            lost: list[tuple[int, int]] = []
            while not delivered or delivered[-1] < N - 1:
                batch = sub.recv(deadline=20)
                event = batch.events[0]
                assert isinstance(event, BlockStored) and event.block_hashes == [batch.seq]
                lost.extend((x.first_seq, x.last_seq) for x in batch.losses)
                delivered.append(batch.seq)
            stats = sub.stats
            assert sub.poll(0.2) is None  # nothing after the last batch: no duplicates trailing in
    finally:
        publisher.stop.set()
        publisher.join(10)
        ctx.term()
    elapsed = time.monotonic() - started
    assert publisher.error is None
    lost_seqs = [s for first, last in lost for s in range(first, last + 1)]
    # Once each, in order, and delivered + lost is exactly 0..N-1.
    assert delivered == sorted(set(delivered))
    assert not set(delivered) & set(lost_seqs)
    assert sorted(delivered + lost_seqs) == list(range(N))
    # Exactly what the publisher could not replay is reported lost; every other drop was repaired.
    assert set(lost_seqs) == unbuffered
    assert stats.replayed_batches >= len(drop_live) - len(unbuffered)
    print(f"\n100k batches: {elapsed:.1f} s, {stats}")
