"""KV-event decoding throughput: the subscriber against a bare msgspec decode loop over the same stream.

The stream is recorded once: 20 000 batches (5 000 with quick=True) shaped like a busy vLLM engine's, each
encoded exactly as `ZmqEventPublisher` encodes a `KVEventBatch` (`[ts, events, dp_rank]`, events as
"type"-tagged maps with defaults omitted; tests/test_kv_events_vllm.py checks the bytes against vLLM's
own classes): decode steps finishing one 16-token block for a few requests, prefills storing 8 to 64
blocks, evictions, CPU-tier placeholder stores from the offloading connector, a rare reset.

Two comparisons, each the median (and p95) of interleaved repetitions, the variants in shuffled order:

- decode path: the bare loop is `Decoder(KVEventBatch).decode(payload)` per message with structs that
  mirror vLLM's; the subscriber is its shared state machine fed the same three-frame messages (sequence
  parse, ordering, decode into typed events, the batch object, the running tally), as its drivers feed
  it. This is the subscriber's whole per-message cost except the socket read, and the goal
  (>= 80% of the bare loop's events per second) applies here.
- end to end over ZeroMQ (inproc): one PUB sends the stream to a KVEventSubscriber and to a bare SUB
  socket (recv_multipart + the same bare decode); each then consumes its copy while timed.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from typing import Any

import msgspec
import zmq

from vllm_devclient.kv_events import KVEventSubscriber
from vllm_devclient.kv_events._stream import EventStream

from ._common import Stats, compare, median, percentile, result, value

GOAL = 0.80
BATCHES = 20_000
QUICK_BATCHES = 5_000


# -- vLLM's wire structs, mirrored (vllm/distributed/kv_events.py, 0.33.0) ------------------------------


class _Batch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class _Event(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    pass


class BlockStored(_Event):
    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None
    locality: str | None = None
    ownership: str | None = None
    session_id: str | None = None
    lookahead_token_ids: list[list[int]] | None = None


class BlockRemoved(_Event):
    block_hashes: list[int | bytes]
    medium: str | None
    group_idx: int | None = None
    locality: str | None = None
    ownership: str | None = None


class AllBlocksCleared(_Event):
    pass


class KVEventBatch(_Batch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


# -- the recorded stream ---------------------------------------------------------------------------------


def _hash(rng: random.Random) -> int:
    return rng.getrandbits(64)


def _stored(rng: random.Random, blocks: int, medium: str = "GPU") -> BlockStored:
    if medium == "CPU":  # the offloading connector's default placeholder: one hash per chunk
        return BlockStored([_hash(rng)], None, [], 0, None, "CPU", None, group_idx=0)
    return BlockStored(
        block_hashes=[_hash(rng) for _ in range(blocks)],
        parent_block_hash=_hash(rng) if rng.random() < 0.8 else None,
        token_ids=[rng.randrange(150_000) for _ in range(16 * blocks)],
        block_size=16,
        lora_id=None,
        medium=medium,
        lora_name=None,
        group_idx=0,
    )


def record_stream(n: int, seed: int = 0) -> list[bytes]:
    """`n` encoded batches, as vLLM's publisher encodes them."""
    rng = random.Random(seed)
    enc = msgspec.msgpack.Encoder()
    payloads = []
    ts = 1_750_000_000.0
    for _ in range(n):
        ts += 0.02
        roll = rng.random()
        events: list[BlockStored | BlockRemoved | AllBlocksCleared]
        if roll < 0.60:  # decode steps: a few requests finish a block each
            events = [_stored(rng, 1) for _ in range(rng.randint(1, 4))]
        elif roll < 0.85:  # prefill
            events = [_stored(rng, rng.randint(8, 64)) for _ in range(rng.randint(1, 2))]
        elif roll < 0.95:  # eviction
            events = [BlockRemoved([_hash(rng) for _ in range(rng.randint(1, 32))], "GPU", group_idx=0)]
        elif roll < 0.9995:  # offloading connector, CPU tier
            events = [_stored(rng, 1, "CPU") for _ in range(rng.randint(1, 8))]
        else:
            events = [AllBlocksCleared()]
        payloads.append(enc.encode(KVEventBatch(ts, events, 0)))
    return payloads


def _frames(payloads: list[bytes], first_seq: int = 0) -> list[list[bytes]]:
    return [[b"kv", (first_seq + i).to_bytes(8, "big"), p] for i, p in enumerate(payloads)]


# -- decode path -----------------------------------------------------------------------------------------


def _bare_decode(payloads: list[bytes]) -> int:
    decode = msgspec.msgpack.Decoder(KVEventBatch).decode
    events = 0
    for p in payloads:
        events += len(decode(p).events)
    return events


def _subscriber_decode(frames: list[list[bytes]], chunk: int = 1024) -> int:
    """What a driver does per wake-up: feed up to `chunk` messages, then hand out the decoded batches."""
    stream = EventStream([(0, False)], backlog=False, replay_timeout=5.0)
    feed, pop = stream.live_feeder(0), stream.pop
    events = 0
    for start in range(0, len(frames), chunk):
        for f in frames[start : start + chunk]:
            feed(f)
        while (batch := pop()) is not None:
            events += len(batch.events)
    assert stream.tally.batches == len(frames)
    return events


def _decode_path(payloads: list[bytes], rounds: int, slice_size: int = 1000) -> dict[str, Any]:
    """Each round times both variants over the whole stream, alternating (in random order) slice by
    slice, so that a noisy neighbour slows both alike; a round's time is the sum over its slices."""
    slices = [payloads[i : i + slice_size] for i in range(0, len(payloads), slice_size)]
    frame_slices = [_frames(sl, i * slice_size) for i, sl in enumerate(slices)]
    n_events = _bare_decode(payloads)
    assert sum(_subscriber_decode(fr) for fr in frame_slices) == n_events
    variants: dict[str, Callable[[int], int]] = {
        "bare": lambda k: _bare_decode(slices[k]),
        "subscriber": lambda k: _subscriber_decode(frame_slices[k]),
    }
    samples: dict[str, list[float]] = {"bare": [], "subscriber": []}
    rng = random.Random(0)
    clock = time.perf_counter
    for rep in range(rounds + 1):
        totals = dict.fromkeys(samples, 0.0)
        for k in range(len(slices)):
            order = list(variants)
            rng.shuffle(order)
            gc.collect(0)
            for name in order:
                start = clock()
                variants[name](k)
                totals[name] += clock() - start
        if rep:  # the first round warms up
            for name in samples:
                samples[name].append(totals[name])
    return _rows("decode", samples, n_events)


# -- end to end over inproc ZeroMQ -----------------------------------------------------------------------


ENDPOINT = "inproc://bench-kv-events"


def _pub_and_bare_sub(ctx: zmq.Context[Any]) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
    """The PUB the stream is sent on (bound to ENDPOINT), and the bare SUB reading it; neither drops."""
    pub: zmq.Socket[bytes] = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 0)
    pub.bind(ENDPOINT)
    bare: zmq.Socket[bytes] = ctx.socket(zmq.SUB)
    bare.setsockopt(zmq.LINGER, 0)
    bare.setsockopt(zmq.RCVHWM, 0)
    bare.setsockopt(zmq.SUBSCRIBE, b"")
    bare.connect(ENDPOINT)
    return pub, bare


def _subscribed(
    pub: zmq.Socket[bytes], bare: zmq.Socket[bytes], sub: KVEventSubscriber, payload: bytes
) -> int:
    """Send `payload` until both SUB sockets have one (both subscribed), drop what they got; the next seq."""
    seq = 0
    while True:
        pub.send_multipart([b"kv", seq.to_bytes(8, "big"), payload])
        seq += 1
        if bare.poll(10) and sub.poll(0.01) is not None:
            break
    while bare.poll(0):
        bare.recv_multipart()
    while sub.poll(0.0) is not None:
        pass
    return seq


def _end_to_end(payloads: list[bytes], rounds: int, slice_size: int = 1000) -> dict[str, Any]:
    """Per slice of the stream: the PUB sends it (both SUBs queue it), then each side consumes its copy
    while timed, in random order; a round's time is the sum over its slices."""
    ctx: zmq.Context[Any] = zmq.Context()
    pub, bare = _pub_and_bare_sub(ctx)
    sub = KVEventSubscriber(ENDPOINT, context=ctx, backlog=False, probe_interval=None, rcvhwm=2 * slice_size)
    decode = msgspec.msgpack.Decoder(KVEventBatch).decode
    slices = [payloads[i : i + slice_size] for i in range(0, len(payloads), slice_size)]
    samples: dict[str, list[float]] = {"bare": [], "subscriber": []}
    n_events = sum(len(decode(p).events) for p in payloads)
    rng = random.Random(1)
    clock = time.perf_counter
    recv_bare, recv_sub = bare.recv_multipart, sub.recv
    consume: dict[str, Callable[[int], int]] = {
        "bare": lambda n: sum(len(decode(recv_bare()[2]).events) for _ in range(n)),
        "subscriber": lambda n: sum(len(recv_sub(5.0).events) for _ in range(n)),
    }
    try:
        seq = _subscribed(pub, bare, sub, payloads[0])  # both SUB sockets subscribed before the stream
        for rep in range(rounds + 1):
            totals = dict.fromkeys(samples, 0.0)
            events = dict.fromkeys(samples, 0)
            for sl in slices:
                for f in _frames(sl, seq):
                    pub.send_multipart(f)
                seq += len(sl)
                order = list(consume)
                rng.shuffle(order)
                gc.collect(0)
                for name in order:
                    started = clock()
                    events[name] += consume[name](len(sl))
                    totals[name] += clock() - started
            assert events == {"bare": n_events, "subscriber": n_events}, events
            if rep:  # the first round warms up
                for name in samples:
                    samples[name].append(totals[name])
        assert not sub.losses and not sub.restarts
    finally:
        sub.close()
        bare.close(linger=0)
        pub.close(linger=0)
        ctx.term()
    return _rows("end_to_end_inproc", samples, n_events)


def _rows(label: str, samples: dict[str, list[float]], n_events: int) -> dict[str, Any]:
    bare, sub = Stats.of(samples["bare"]), Stats.of(samples["subscriber"])
    # Throughput ratio = bare time / subscriber time; >= GOAL means within 20% of the bare loop's rate.
    paired = sorted(b / s for b, s in zip(samples["bare"], samples["subscriber"], strict=True))
    return {
        "label": label,
        "events": n_events,
        "bare": bare,
        "subscriber": sub,
        "bare_events_per_s": n_events / bare.median,
        "subscriber_events_per_s": n_events / sub.median,
        "throughput_ratio": bare.median / sub.median,
        "throughput_ratio_p95": bare.p95 / sub.p95,
        "paired_ratio_median": median(paired),
        "paired_ratio_worst_5pct": percentile(paired, 5),
    }


def run(quick: bool = False) -> dict[str, Any]:
    n = QUICK_BATCHES if quick else BATCHES
    payloads = record_stream(n)
    rows = []
    numbers = {}
    for m in (_decode_path(payloads, 7 if quick else 11), _end_to_end(payloads, 5 if quick else 7)):
        numbers[m["label"]] = m
        ok = m["throughput_ratio"] >= GOAL if m["label"] == "decode" else None
        rows.append(
            compare(
                f"kv_events.{m['label']}.seconds_per_stream",
                baseline_name="bare msgspec loop",
                baseline=m["bare"].scaled(1e3),
                sdk=m["subscriber"].scaled(1e3),
                unit="ms",
                goal=f"throughput >= {GOAL:.0%} of bare" if m["label"] == "decode" else None,
                ok=ok,
                batches=n,
                events=m["events"],
                throughput_ratio=m["throughput_ratio"],
                throughput_ratio_p95=m["throughput_ratio_p95"],
                paired_ratio_median=m["paired_ratio_median"],
                paired_ratio_worst_5pct=m["paired_ratio_worst_5pct"],
            )
        )
        rows.append(
            value(
                f"kv_events.{m['label']}.subscriber_events_per_s",
                round(m["subscriber_events_per_s"]),
                unit="events/s",
                bare_events_per_s=round(m["bare_events_per_s"]),
            )
        )
    return result(
        "kv_events",
        method=(__doc__ or "").strip(),
        rows=rows,
        throughput_ratio=numbers["decode"]["throughput_ratio"],
        throughput_ratio_end_to_end=numbers["end_to_end_inproc"]["throughput_ratio"],
        batches=n,
    )


def main() -> None:
    import sys

    started = time.perf_counter()
    out = run(quick="--quick" in sys.argv)
    for row in out["rows"]:
        if row["kind"] == "compare":
            b, s = row["baseline"], row["sdk"]
            print(
                f"{row['metric']}: bare median {b['median']:.2f} ms (p95 {b['p95']:.2f}), subscriber median "
                f"{s['median']:.2f} ms (p95 {s['p95']:.2f}); throughput ratio {row['throughput_ratio']:.2f} "
                f"(p95 {row['throughput_ratio_p95']:.2f}; paired per round: median "
                f"{row['paired_ratio_median']:.2f}, worst 5% {row['paired_ratio_worst_5pct']:.2f})"
                + (f", goal {row['goal']}: {row['ok']}" if row["goal"] else "")
            )
        else:
            print(f"{row['metric']}: {row['value']:,} {row['unit']} (bare {row['bare_events_per_s']:,})")
    print(f"{out['batches']} batches; {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
