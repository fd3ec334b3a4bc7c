"""The fault suite, KV events (issue 11, class 8): a publisher restart never makes batches vanish silently,
against vLLM's own ZmqEventPublisher."""

from __future__ import annotations

import importlib
import importlib.util
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from vllm_devclient.testing import processes

HOST = "127.0.0.1"


@pytest.fixture(scope="module")
def vkv() -> ModuleType:
    """vllm.distributed.kv_events (imports torch: several seconds, once per module)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.fail("vllm is not installed: run `make setup`")
    return importlib.import_module("vllm.distributed.kv_events")


@pytest.fixture
def publishers(vkv: ModuleType) -> Iterator[Callable[..., Any]]:
    made: list[Any] = []

    def make(**kw: Any) -> Any:
        pub = vkv.ZmqEventPublisher(0, **kw)
        made.append(pub)
        return pub

    yield make
    for pub in made:
        if pub._running:
            pub.shutdown()


def _free_port() -> int:
    return processes.free_port(HOST)


def _wait_until_bindable(*ports: int) -> None:
    processes.wait_until_bindable(HOST, *ports)


def _batch(vkv: ModuleType, block_hash: int) -> Any:
    stored = vkv.BlockStored(
        block_hashes=[block_hash],
        parent_block_hash=None,
        token_ids=[1, 2, 3],
        block_size=16,
        lora_id=None,
        medium="GPU",
        lora_name=None,
    )
    return vkv.KVEventBatch(ts=time.time(), events=[stored])


def _connect(sub: Any, pub: Any, vkv: ModuleType) -> list[Any]:
    """Publish until the subscriber receives a batch (its SUB may still be joining), then drain."""
    got = []
    for i in range(50):
        pub.publish(_batch(vkv, i))
        b = sub.poll(0.1)
        if b is not None:
            got.append(b)
            break
    assert got, "the subscriber never received a batch"
    return got + _drain(sub, 0.3)


def _drain(sub: Any, quiet: float = 1.0) -> list[Any]:
    out = []
    while (b := sub.poll(quiet)) is not None:
        out.append(b)
    return out


NEW = 1000  # block hashes of the new publisher's batches: NEW + its sequence number


def _unaccounted(got: list[Any], published: int) -> tuple[list[int], list[int]]:
    """The new publisher's sequence numbers neither delivered nor reported lost; and those delivered
    twice. A delivered batch must carry its own sequence number (hash NEW + seq)."""
    delivered: list[int] = []
    lost: set[int] = set()
    for b in got:
        for loss in b.losses:
            lost.update(range(loss.first_seq, loss.last_seq + 1))
        for event in b.events:
            h = event.block_hashes[0]
            if h >= NEW:
                assert b.seq == h - NEW, f"batch {h - NEW} of the new publisher delivered as seq {b.seq}"
                delivered.append(b.seq)
    missing = sorted(set(range(published)) - set(delivered) - lost)
    twice = sorted({s for s in delivered if delivered.count(s) > 1})
    return missing, twice


def _endpoints() -> tuple[dict[str, str], dict[str, str]]:
    port, replay = _free_port(), _free_port()
    pub_kw = {"endpoint": f"tcp://*:{port}", "replay_endpoint": f"tcp://*:{replay}"}
    sub_kw = {"endpoint": f"tcp://{HOST}:{port}", "replay_endpoint": f"tcp://{HOST}:{replay}"}
    return pub_kw, sub_kw


def _restart(pub: Any, publishers: Callable[..., Any], pub_kw: dict[str, str]) -> Any:
    pub.shutdown()
    ports = [int(pub_kw[k].rsplit(":", 1)[1]) for k in ("endpoint", "replay_endpoint")]
    _wait_until_bindable(*ports)
    return publishers(**pub_kw)


def test_a_restart_whose_first_batches_were_missed_is_reported(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    """The old publisher got to seq 15; the new one sends 30 batches before the subscriber reconnects,
    then 5 it sees: a live seq above the old one's, so no lower number betrays the restart."""
    from vllm_devclient.kv_events import KVEventSubscriber

    pub_kw, sub_kw = _endpoints()
    pub = publishers(**pub_kw)
    with KVEventSubscriber(sub_kw["endpoint"], replay_endpoint=sub_kw["replay_endpoint"]) as sub:
        before = _connect(sub, pub, vkv)
        for i in range(15 - len(before)):
            pub.publish(_batch(vkv, 100 + i))
        before += _drain(sub, 0.3)
        pub2 = _restart(pub, publishers, pub_kw)
        for i in range(30):
            pub2.publish(_batch(vkv, NEW + i))
        time.sleep(0.5)
        for i in range(30, 35):
            pub2.publish(_batch(vkv, NEW + i))
        got = _drain(sub)
        missing, twice = _unaccounted(got, 35)
        assert not missing, f"{len(missing)} batches of the new publisher vanished silently: {missing}"
        assert not twice, f"delivered twice: {twice}"
        assert sub.restarts, "the restart was not reported"


def test_a_restart_while_the_subscriber_is_busy_loses_nothing_silently(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    """The subscriber reads nothing while the old publisher sends 20 more and stops, and the new one
    sends 40: once it reads again, every batch of both is delivered or reported."""
    from vllm_devclient.kv_events import KVEventSubscriber

    pub_kw, sub_kw = _endpoints()
    pub = publishers(**pub_kw)
    with KVEventSubscriber(sub_kw["endpoint"], replay_endpoint=sub_kw["replay_endpoint"]) as sub:
        before = _connect(sub, pub, vkv)
        first_old = before[-1].seq + 1
        for i in range(20):  # busy: nothing is read
            pub.publish(_batch(vkv, 500 + i))
        time.sleep(0.2)
        pub2 = _restart(pub, publishers, pub_kw)
        for i in range(40):
            pub2.publish(_batch(vkv, NEW + i))
            time.sleep(0.01)
        time.sleep(0.3)
        got = _drain(sub)
        old = [b.seq for b in got if b.events and 500 <= b.events[0].block_hashes[0] < NEW]
        old_lost = {s for b in got for x in b.losses for s in range(x.first_seq, x.last_seq + 1)}
        old_missing = sorted(set(range(first_old, first_old + 20)) - set(old) - old_lost)
        assert not old_missing, f"old publisher's batches vanished: {old_missing}"
        missing, twice = _unaccounted(got, 40)
        assert not missing, f"{len(missing)} batches of the new publisher vanished silently: {missing}"
        assert not twice, f"delivered twice: {twice}"
        assert sub.restarts, "the restart was not reported"


def test_a_new_publisher_denied_replay_by_an_old_backoff_reports_replay_unavailable(
    vkv: ModuleType, publishers: Callable[..., Any]
) -> None:
    """The old publisher's replay timed out (it was gone), so replay backs off; the new publisher
    restarts within the backoff. Its missed first batches must be replayed (the backoff belonged to the
    old publisher) or reported as `replay_unavailable`: the new one was never asked, so never timed out."""
    from vllm_devclient.kv_events import KVEventSubscriber

    pub_kw, sub_kw = _endpoints()
    pub = publishers(**pub_kw)
    with KVEventSubscriber(
        sub_kw["endpoint"], replay_endpoint=sub_kw["replay_endpoint"], replay_timeout=1.5, probe_interval=0.2
    ) as sub:
        before = _connect(sub, pub, vkv)
        for i in range(50 - len(before)):
            pub.publish(_batch(vkv, 100 + i))
        _drain(sub, 0.3)
        pub.shutdown()
        start = time.monotonic()
        while sub.stats.replay_timeouts == 0 and time.monotonic() - start < 5:
            sub.poll(0.05)  # the idle probe asks the gone publisher, and times out
        assert sub.stats.replay_timeouts >= 1, "setup: the probe of the gone publisher did not time out"
        pub2 = _restart(pub, publishers, pub_kw)
        for i in range(10):
            pub2.publish(_batch(vkv, NEW + i))
        time.sleep(0.4)
        pub2.publish(_batch(vkv, NEW + 10))
        got = _drain(sub, 0.5)
        missing, twice = _unaccounted(got, 11)
        assert not missing and not twice, f"vanished {missing}, twice {twice}"
        reasons = {loss.reason for b in got for loss in b.losses}
        assert "replay_timeout" not in reasons, (
            f"losses reported as {reasons}: the new publisher never timed out"
        )
