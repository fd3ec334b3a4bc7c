"""The subscriber against vLLM's own ZmqEventPublisher (from the installed vllm), over loopback TCP."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import msgspec
import pytest

from vllm_devclient import WaitTimeoutError
from vllm_devclient.kv_events import (
    AllBlocksCleared,
    AsyncKVEventSubscriber,
    BlockRemoved,
    BlockStored,
    KVEventBatch,
    KVEventsTimeoutError,
    KVEventSubscriber,
)
from vllm_devclient.models import KVEventSource
from vllm_devclient.testing import processes
from vllm_devclient.testing.processes import free_port

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def vkv() -> ModuleType:
    """vllm.distributed.kv_events, imported once per module (it pulls torch: several seconds)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed")
    # A broken install (a missing dependency of vllm) fails here instead of skipping silently.
    return importlib.import_module("vllm.distributed.kv_events")


def wait_until_bindable(*ports: int) -> None:
    processes.wait_until_bindable(HOST, *ports)


@pytest.fixture
def publishers(vkv: ModuleType) -> Iterator[Callable[..., Any]]:
    """Factory for real publishers; every one is shut down after the test."""
    made: list[Any] = []

    def make(rank: int = 0, **kw: Any) -> Any:
        pub = vkv.ZmqEventPublisher(rank, **kw)
        made.append(pub)
        return pub

    yield make
    for pub in made:
        if pub._running:  # shut down once: a second shutdown waits a second on its queue
            pub.shutdown()


def stored(vkv: ModuleType, h: int | bytes, medium: str = "GPU", **kw: Any) -> Any:
    return vkv.BlockStored(
        block_hashes=[h],
        parent_block_hash=None,
        token_ids=[1, 2, 3],
        block_size=16,
        lora_id=None,
        medium=medium,
        lora_name=None,
        **kw,
    )


def batch(vkv: ModuleType, *events: Any) -> Any:
    return vkv.KVEventBatch(ts=time.time(), events=list(events))


def collect(sub: KVEventSubscriber, n: int, timeout: float = 10.0) -> list[KVEventBatch]:
    deadline = time.monotonic() + timeout
    out: list[KVEventBatch] = []
    while len(out) < n:
        out.append(sub.recv(deadline=max(0.0, deadline - time.monotonic())))
    return out


def as_builtins(event: msgspec.Struct) -> dict[str, Any]:
    return msgspec.to_builtins(msgspec.structs.asdict(event))  # type: ignore[no-any-return]


def connect_when_ready(
    sub: KVEventSubscriber, pub: Any, vkv: ModuleType, first: int = 0
) -> list[KVEventBatch]:
    """Publish single batches until the subscriber receives one (its SUB may still be joining), then
    everything else on its way; returns what was delivered, in order."""
    got: list[KVEventBatch] = []
    for i in range(50):
        pub.publish(batch(vkv, stored(vkv, first + i)))
        b = sub.poll(0.1)
        if b is not None:
            got.append(b)
            break
    assert got, "the subscriber never received a batch"
    while (b := sub.poll(0.3)) is not None:
        got.append(b)
    return got


def test_every_event_type_and_field_survives(vkv: ModuleType, publishers: Callable[..., Any]) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", topic="kv")
    full = vkv.BlockStored(
        block_hashes=[2**64 - 1, 0, 12345],
        parent_block_hash=987654321,
        token_ids=list(range(48)),
        block_size=16,
        lora_id=7,
        medium="GPU",
        lora_name="adapter-a",
        extra_keys=[("adapter-a", "mm-hash", 0), None, ("salt",)],
        group_idx=1,
        kv_cache_spec_kind="sliding_window",
        kv_cache_spec_sliding_window=4096,
        locality="LOCAL",
        ownership="tier-2",
        session_id="session-1",
        lookahead_token_ids=[[1, 2], [3], []],
    )
    placeholder = vkv.BlockStored(  # what the OffloadingConnector sends for a CPU chunk by default
        block_hashes=[42], parent_block_hash=None, token_ids=[], block_size=0, lora_id=None,
        medium="CPU", lora_name=None, group_idx=0,
    )  # fmt: skip
    removed = vkv.BlockRemoved(
        block_hashes=[1, 2], medium="CPU", group_idx=3, locality="REMOTE", ownership="tier-2"
    )
    bytes_stored = vkv.BlockStored(
        block_hashes=[b"\x01" * 32, b"\xff" * 32], parent_block_hash=b"\x00" * 32, token_ids=[5],
        block_size=16, lora_id=None, medium="GPU", lora_name=None,
    )  # fmt: skip
    bytes_removed = vkv.BlockRemoved(block_hashes=[b"\x02" * 32], medium=None)
    originals = [full, placeholder, removed, vkv.AllBlocksCleared(), bytes_stored, bytes_removed]
    with KVEventSubscriber(
        f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", topic="kv", host=HOST
    ) as sub:
        connect_when_ready(sub, pub, vkv)
        pub.publish(vkv.KVEventBatch(ts=1234.5, events=originals))
        got = sub.recv(deadline=10)
    assert got.ts == 1234.5 and got.data_parallel_rank == 0 and got.rank == 0
    assert [type(e) for e in got.events] == [
        BlockStored, BlockStored, BlockRemoved, AllBlocksCleared, BlockStored, BlockRemoved,
    ]  # fmt: skip
    for ours, theirs in zip(got.events, originals, strict=True):
        assert isinstance(ours, msgspec.Struct)
        # Same field names, same values: nothing vLLM sends is dropped or altered.
        assert as_builtins(ours) == as_builtins(theirs)
    assert got.events[0].block_hashes[0] == 2**64 - 1  # type: ignore[union-attr]
    assert got.events[4].block_hashes == [b"\x01" * 32, b"\xff" * 32]  # type: ignore[union-attr]
    assert got.events[4].parent_block_hash == b"\x00" * 32  # type: ignore[union-attr]


def test_late_subscriber_recovers_backlog_by_replay(vkv: ModuleType, publishers: Callable[..., Any]) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}")
    for i in range(30):
        pub.publish(batch(vkv, stored(vkv, i)))
    time.sleep(0.3)  # all 30 are out before anyone subscribes
    with KVEventSubscriber(f"tcp://{HOST}:{port}", replay_endpoint=f"tcp://{HOST}:{replay}") as sub:
        got = collect(sub, 30)
        assert [b.seq for b in got] == list(range(30))
        assert all(b.replayed for b in got)
        assert [b.events[0].block_hashes for b in got] == [[i] for i in range(30)]  # type: ignore[union-attr]
        # ...and the live stream continues from there.
        pub.publish(batch(vkv, stored(vkv, 30)))
        nxt = sub.recv(deadline=10)
        assert (nxt.seq, nxt.replayed) == (30, False)
        assert not sub.losses


def _big(vkv: ModuleType, i: int) -> Any:
    return batch(vkv, vkv.BlockStored([i], None, list(range(2000)), 16, None, "GPU", None))


def test_gaps_from_a_slow_consumer_are_replayed(vkv: ModuleType, publishers: Callable[..., Any]) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", hwm=10)
    with KVEventSubscriber(
        f"tcp://{HOST}:{port}", replay_endpoint=f"tcp://{HOST}:{replay}", rcvhwm=10, backlog=False
    ) as sub:
        first = connect_when_ready(sub, pub, vkv)[-1].seq
        n = 1500  # ~6 MB: far more than the high-water marks and socket buffers hold; the PUB drops
        for i in range(n):
            pub.publish(_big(vkv, i))
        time.sleep(0.5)
        got = collect(sub, n, timeout=30)
        last_seq = first + n
        assert [b.seq for b in got] == list(range(first + 1, last_seq + 1))
        assert [b.events[0].block_hashes[0] for b in got] == list(range(n))  # type: ignore[union-attr]
        assert sub.stats.replay_requests >= 1 and any(
            b.replayed for b in got
        )  # drops happened, were repaired
        assert not sub.losses


def test_what_replay_cannot_recover_is_reported_with_its_range(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", hwm=10, buffer_steps=50)
    with KVEventSubscriber(
        f"tcp://{HOST}:{port}", replay_endpoint=f"tcp://{HOST}:{replay}", rcvhwm=10, backlog=False
    ) as sub:
        first = connect_when_ready(sub, pub, vkv)[-1].seq
        n = 1500
        for i in range(n):
            pub.publish(_big(vkv, i))
        time.sleep(0.5)
        delivered: list[int] = []
        lost: list[int] = []
        while not delivered or delivered[-1] < first + n:
            b = sub.recv(deadline=30)
            for loss in b.losses:
                assert loss.reason == "not_in_replay_buffer" and loss.rank == 0
                lost.extend(range(loss.first_seq, loss.last_seq + 1))
            delivered.append(b.seq)
            # the payload belongs to the seq it is delivered under
            assert b.events[0].block_hashes[0] == b.seq - first - 1  # type: ignore[union-attr]
        assert lost, "expected drops beyond the 50-batch replay buffer"
        # Every sequence number after the first is delivered once, in order, or reported lost: never both.
        assert delivered == sorted(delivered) and not set(delivered) & set(lost)
        assert sorted(delivered + lost) == list(range(first + 1, first + n + 1))
        assert sub.tally.lost_batches == len(lost) == sum(x.count for x in sub.losses)


def test_publisher_restart_is_reported_not_taken_for_a_gap(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    kw = {"endpoint": f"tcp://*:{port}", "replay_endpoint": f"tcp://*:{replay}"}
    pub = publishers(**kw)
    with KVEventSubscriber(f"tcp://{HOST}:{port}", replay_endpoint=f"tcp://{HOST}:{replay}") as sub:
        connect_when_ready(sub, pub, vkv)
        for i in range(10):
            pub.publish(batch(vkv, stored(vkv, 100 + i)))
        while (b := sub.recv(deadline=10)).events[0].block_hashes != [109]:  # type: ignore[union-attr]
            pass
        last = b.seq
        assert last >= 10
        pub.shutdown()
        # The engine restarted: same endpoints, sequence numbers from 0. ZMQ releases the old listening
        # sockets in its I/O thread, so the ports may take a moment to become free again.
        wait_until_bindable(port, replay)
        pub2 = publishers(**kw)
        after = connect_when_ready(sub, pub2, vkv, first=1000)
        restart = after[0].restart
        assert restart is not None
        assert restart.last_seq == last and restart.rank == 0
        # What the new publisher sent before the subscriber reconnected is recovered from its replay buffer.
        assert [b.seq for b in after] == list(range(len(after)))
        assert restart.first_seq < len(after)
        hashes = [b.events[0].block_hashes[0] for b in after]  # type: ignore[union-attr]
        assert hashes == [1000 + i for i in range(len(after))]
        assert sub.restarts == [restart] and not sub.losses
        assert sub.tally.restarts == 1


def test_two_data_parallel_ranks_are_merged_with_their_rank(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    port, replay = free_port(HOST, count=2), free_port(HOST, count=2)
    kw = {"endpoint": f"tcp://*:{port}", "replay_endpoint": f"tcp://*:{replay}", "topic": "kv"}
    pubs = [publishers(0, **kw), publishers(1, **kw)]  # rank 1 publishes on port + 1, as vLLM does
    assert pubs[1].get_publisher_config().endpoint == f"tcp://*:{port + 1}"
    for i in range(20):
        for r, pub in enumerate(pubs):
            pub.publish(batch(vkv, stored(vkv, r * 1000 + i)))
    time.sleep(0.3)
    # Sources as the server reports them: the publishers' own resolved configs.
    sources = {r: pub.get_publisher_config() for r, pub in enumerate(pubs)}
    with KVEventSubscriber(sources=sources, host=HOST) as sub:
        assert [e.endpoint for e in sub.endpoints] == [f"tcp://{HOST}:{port}", f"tcp://{HOST}:{port + 1}"]
        got = collect(sub, 40)
    for r in (0, 1):
        mine = [b for b in got if b.rank == r]
        assert [b.seq for b in mine] == list(range(20))
        assert all(b.data_parallel_rank == r for b in mine)
        assert [b.events[0].block_hashes[0] for b in mine] == [r * 1000 + i for i in range(20)]  # type: ignore[union-attr]


def test_two_ranks_from_rank_zero_endpoint(vkv: ModuleType, publishers: Callable[..., Any]) -> None:
    port, replay = free_port(HOST, count=2), free_port(HOST, count=2)
    kw = {"endpoint": f"tcp://*:{port}", "replay_endpoint": f"tcp://*:{replay}"}
    pubs = [publishers(0, **kw), publishers(1, **kw)]
    with KVEventSubscriber(
        f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", data_parallel_size=2, host=HOST
    ) as sub:
        for i in range(5):
            for pub in pubs:
                pub.publish(batch(vkv, stored(vkv, i)))
        got = collect(sub, 10)
    assert sorted((b.rank, b.seq) for b in got) == [(r, i) for r in (0, 1) for i in range(5)]


def test_subscriber_binds_for_a_publisher_that_connects(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://{HOST}:{port}", replay_endpoint=f"tcp://*:{replay}")  # PUB connects
    sources = {"0": pub.get_publisher_config()}  # JSON keys are strings
    with KVEventSubscriber(sources=sources, host=HOST) as sub:
        assert sub._sockets.bound == {0}
        got = connect_when_ready(sub, pub, vkv)
        assert got[0].rank == 0


def test_port_zero_publisher_reports_its_bound_address(
    vkv: ModuleType, publishers: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM binds tcp://*:0 at the node IP and reports tcp://IP:PORT, the same shape as an address its PUB
    connects to: the subscriber must connect here, since the address is taken."""
    monkeypatch.setenv("VLLM_HOST_IP", HOST)
    pub = publishers(endpoint="tcp://*:0", replay_endpoint="tcp://*:0")
    config = pub.get_publisher_config()
    assert config.endpoint.startswith(f"tcp://{HOST}:") and not config.endpoint.endswith(":0")
    with KVEventSubscriber(sources={0: config}) as sub:
        assert sub._sockets.bound == set()
        assert connect_when_ready(sub, pub, vkv)[0].rank == 0


def test_wait_helpers_count_cpu_stores(vkv: ModuleType, publishers: Callable[..., Any]) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}")
    with KVEventSubscriber(f"tcp://{HOST}:{port}", replay_endpoint=f"tcp://{HOST}:{replay}") as sub:
        for i in range(6):
            pub.publish(batch(vkv, stored(vkv, i, "CPU"), stored(vkv, 100 + i, "GPU")))
        pub.publish(batch(vkv, vkv.BlockRemoved(block_hashes=[0, 1], medium="CPU"), vkv.AllBlocksCleared()))
        tally = sub.wait_for_stored(6, medium="CPU", deadline=10)
        assert tally.stored("CPU") == 6 and tally.stored("GPU") == 6
        quiet = sub.wait_until_quiet(0.3, deadline=10)
        assert quiet.removed("CPU") == 2 and quiet.cleared == 1 and quiet.batches == 7
        assert sub.count_stored("CPU") == 6
        with pytest.raises(KVEventsTimeoutError) as info:
            sub.wait_for_stored(7, medium="CPU", deadline=0.3)
        assert isinstance(info.value, WaitTimeoutError) and isinstance(info.value, TimeoutError)
        assert "6 of 7 blocks stored in medium 'CPU'" in str(info.value)
        assert info.value.tally.stored("CPU") == 6


def test_wait_for_stored_counts_since_the_start(vkv: ModuleType, publishers: Callable[..., Any]) -> None:
    """A block stored before the subscriber existed comes with the backlog replay: delivered, but not
    counted "since the subscriber started"; those stored right after the start count, whether they
    arrive live or (published before the SUB joined) from the backlog."""
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}")
    pub.publish(batch(vkv, *(stored(vkv, 100 + i, "CPU") for i in range(10))))
    time.sleep(0.3)  # published, and its timestamp taken, before the subscriber starts
    with KVEventSubscriber(f"tcp://{HOST}:{port}", replay_endpoint=f"tcp://{HOST}:{replay}") as sub:
        for i in range(3):
            pub.publish(batch(vkv, stored(vkv, i, "CPU")))
        tally = sub.wait_for_stored(3, medium="CPU", deadline=10)
        assert tally.stored("CPU") == 3 and tally.batches == 3
        assert sub.tally_since_start.stored("CPU") == 3
        with pytest.raises(KVEventsTimeoutError, match="3 of 4 blocks"):
            sub.wait_for_stored(4, medium="CPU", deadline=0.5)
        assert sub.tally.stored("CPU") == 13 and sub.tally.batches == 4  # delivered all the same
        assert sub.count_stored("CPU") == 13


def test_from_client_uses_the_server_host_for_wildcard_endpoints(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", topic="kv")

    class Client:  # what DevClient exposes: base_url and kv_event_sources()
        base_url = f"http://{HOST}:8000"

        def kv_event_sources(self) -> dict[int, KVEventSource]:
            return {
                0: KVEventSource(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", topic="kv")
            }

    with KVEventSubscriber.from_client(Client()) as sub:
        assert sub.endpoints[0].endpoint == f"tcp://{HOST}:{port}"
        assert sub.endpoints[0].replay_endpoint == f"tcp://{HOST}:{replay}" and sub.endpoints[0].topic == "kv"
        connect_when_ready(sub, pub, vkv)


async def test_async_subscriber(vkv: ModuleType, publishers: Callable[..., Any]) -> None:
    port, replay = free_port(HOST), free_port(HOST)
    pub = publishers(endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}")
    for i in range(5):
        pub.publish(batch(vkv, stored(vkv, i, "CPU")))
    await asyncio.sleep(0.3)

    class Client:
        base_url = f"http://{HOST}:8000"

        async def kv_event_sources(self) -> dict[int, dict[str, Any]]:
            return {0: {"endpoint": f"tcp://*:{port}", "replay_endpoint": f"tcp://*:{replay}", "topic": ""}}

    async with await AsyncKVEventSubscriber.from_client(Client()) as sub:
        seen = []
        async for b in sub:  # the backlog first
            seen.append(b.seq)
            if len(seen) == 5:
                break
        assert seen == list(range(5))
        for i in range(5, 8):
            pub.publish(batch(vkv, stored(vkv, i, "CPU")))
        # The backlog was published before the subscriber started: only the 3 since count.
        tally = await sub.wait_for_stored(3, medium="CPU", deadline=10)
        assert tally.stored("CPU") == 3 and tally.batches == 3
        assert (await sub.wait_until_quiet(0.2, deadline=5)).batches == 8
        assert await sub.count_stored("CPU") == 8
        with pytest.raises(KVEventsTimeoutError, match="3 of 4 blocks"):
            await sub.wait_for_stored(4, medium="CPU", deadline=0.3)
        with pytest.raises(KVEventsTimeoutError):
            await sub.recv(deadline=0.2)
    assert sub.closed


def test_bench_stream_is_byte_identical_to_vllm_encoding(vkv: ModuleType) -> None:
    """The benchmark records its stream with structs mirroring vLLM's; they must encode the same bytes."""
    from benchmarks import bench_kv_events as bench

    enc = msgspec.msgpack.Encoder()
    mirror = msgspec.msgpack.Decoder(bench.KVEventBatch)
    theirs = msgspec.msgpack.Decoder(vkv.KVEventBatch)
    for payload in bench.record_stream(300, seed=3):
        assert enc.encode(theirs.decode(payload)) == payload
        assert enc.encode(mirror.decode(payload)) == payload
