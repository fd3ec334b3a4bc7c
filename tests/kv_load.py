"""KV-event streams from vLLM's own ZmqEventPublisher while busy-loop processes hold the CPU.

Used by tests/test_kv_events_load.py (small streams, several runs) and by hand for the big ones:

    PYTHONPATH=$PWD .venv/bin/python -m tests.kv_load --batches 100000 --runs 3
    PYTHONPATH=$PWD .venv/bin/python -m tests.kv_load --batches 20000 --asyncio --runs 3

The publisher's high-water mark and the subscriber's are small, so the PUB drops whenever the consumer
falls behind; drops are repaired from the replay buffer or reported lost. A run counts what a consumer
must never see: a batch delivered twice, a batch delivered after a higher one, a batch both delivered and
reported lost, and a restart that did not happen.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from vllm_devclient.kv_events import AsyncKVEventSubscriber, KVEventBatch, KVEventSubscriber
from vllm_devclient.testing.processes import free_port

HOST = "127.0.0.1"
_BURN = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def cpu_burner(processes: int, seconds: float) -> Iterator[None]:
    """`processes` busy loops, each ending by itself after `seconds` and killed on the way out."""
    procs = [
        subprocess.Popen([sys.executable, "-c", _BURN.format(seconds=seconds)]) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(10)


@dataclass(frozen=True)
class Shape:
    """A stream and its consumer."""

    batches: int
    hwm: int = 100  # the publisher's
    rcvhwm: int = 100  # the subscriber's
    buffer_steps: int = 10_000  # the publisher's replay buffer
    work: float = 0.0  # seconds a batch costs the consumer (a router updating its index)
    stall_every: int = 0  # the consumer stalls after its first batch and every this many (0: never)...
    stall: float = 0.0  # ...for this many seconds, as a descheduled process does
    lead: bool = False  # after its first batch the consumer stalls until the whole stream is published
    probe_interval: float = 1.0
    replay_timeout: float = 5.0
    deadline: float = 120.0  # for the whole stream
    trailing: float = 0.5  # quiet time after the last batch, to catch a trailing duplicate

    def consume(self, index: int) -> None:
        if self.work and index % 16 == 15:
            # Sleeps rather than spins: the publisher thread shares this process's GIL, where an engine
            # publishes from a process of its own.
            time.sleep(16 * self.work)
        if self.stall_every and index % self.stall_every == 0:
            time.sleep(self.stall)

    def options(self, feed: Feed) -> dict[str, Any]:
        return {
            "replay_endpoint": feed.replay_endpoint, "topic": "kv", "rcvhwm": self.rcvhwm,
            "probe_interval": self.probe_interval, "replay_timeout": self.replay_timeout,
        }  # fmt: skip


@dataclass
class Outcome:
    """What a consumer saw of one stream."""

    shape: Shape
    delivered: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    restarts: int = 0
    replayed: int = 0  # batches delivered from a replay
    replay_requests: int = 0
    seconds: float = 0.0
    stats: str = ""

    @property
    def batches(self) -> int:
        return self.shape.batches

    def record(self, batch: KVEventBatch) -> None:
        self.shape.consume(len(self.delivered))
        for loss in batch.losses:
            self.lost.extend(range(loss.first_seq, loss.last_seq + 1))
        if batch.restart is not None:
            self.restarts += 1
        self.replayed += batch.replayed
        self.delivered.append(batch.seq)

    def done(self) -> bool:
        return max(self.delivered[-1:] + self.lost[-1:], default=-1) >= self.batches - 1

    @property
    def duplicates(self) -> int:
        return len(self.delivered) - len(set(self.delivered))

    @property
    def out_of_order(self) -> int:
        top, count = -1, 0
        for seq in self.delivered:
            count += seq <= top
            top = max(top, seq)
        return count

    @property
    def delivered_and_lost(self) -> int:
        return len(set(self.delivered) & set(self.lost))

    @property
    def unaccounted(self) -> int:
        """Sequence numbers neither delivered nor reported lost."""
        return self.batches - len(set(self.delivered) | set(self.lost))

    def faults(self) -> dict[str, int]:
        return {
            "duplicates": self.duplicates,
            "out_of_order": self.out_of_order,
            "delivered_and_lost": self.delivered_and_lost,
            "restarts": self.restarts,
            "unaccounted": self.unaccounted,
        }

    def line(self) -> str:
        return (
            f"{self.batches} batches in {self.seconds:.1f} s: delivered {len(self.delivered)} "
            f"(distinct {len(set(self.delivered))}, replayed {self.replayed}), "
            f"lost {len(set(self.lost))}, {self.faults()}"
        )


def vllm_kv_events() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch's, at import time
        return importlib.import_module("vllm.distributed.kv_events")


class Feed:
    """A real vLLM publisher and a thread feeding it batches as an engine would."""

    def __init__(self, vkv: Any, shape: Shape) -> None:
        self.vkv = vkv
        self.batches = shape.batches
        port, replay = free_port(HOST), free_port(HOST)
        self.pub = vkv.ZmqEventPublisher(
            0, endpoint=f"tcp://*:{port}", replay_endpoint=f"tcp://*:{replay}", hwm=shape.hwm,
            buffer_steps=shape.buffer_steps, max_queue_size=shape.batches + 1, topic="kv",
        )  # fmt: skip
        self.endpoint, self.replay_endpoint = f"tcp://{HOST}:{port}", f"tcp://{HOST}:{replay}"
        self._thread = threading.Thread(target=self._publish, daemon=True, name="kv-load-feed")

    def _batch(self, i: int) -> Any:
        vkv = self.vkv
        stored = vkv.BlockStored([i], None, [1, 2, 3, 4], 16, None, "GPU", None)
        return vkv.KVEventBatch(ts=time.time(), events=[stored])

    def _publish(self) -> None:
        for i in range(self.batches):
            self.pub.publish(self._batch(i))

    def start(self) -> None:
        self._thread.start()

    def wait_published(self) -> None:
        """Until the publisher has sent every batch (it marks each one done once sent)."""
        self._thread.join(60)
        self.pub._event_queue.join()

    def close(self) -> None:
        if self._thread.is_alive() or self._thread.ident is not None:
            self._thread.join(30)
        self.pub.shutdown()


def run_sync(feed: Feed, shape: Shape) -> Outcome:
    out = Outcome(shape)
    started = time.monotonic()
    with KVEventSubscriber(feed.endpoint, **shape.options(feed)) as sub:
        time.sleep(0.1)  # the SUB joins; the backlog replay covers what it misses
        feed.start()
        end = started + shape.deadline
        while not out.done() and time.monotonic() < end:
            if (batch := sub.poll(min(2.0, max(0.0, end - time.monotonic())))) is not None:
                out.record(batch)
                if shape.lead and len(out.delivered) == 1:
                    feed.wait_published()
        while (batch := sub.poll(shape.trailing)) is not None:  # anything trailing (a duplicate would)
            out.record(batch)
        out.stats, out.replay_requests = str(sub.stats), sub.stats.replay_requests
    out.seconds = time.monotonic() - started
    return out


async def run_async(feed: Feed, shape: Shape) -> Outcome:
    out = Outcome(shape)
    started = time.monotonic()
    async with AsyncKVEventSubscriber(feed.endpoint, **shape.options(feed)) as sub:
        await asyncio.sleep(0.1)
        feed.start()
        end = started + shape.deadline
        while not out.done() and time.monotonic() < end:
            if (batch := await sub.poll(min(2.0, max(0.0, end - time.monotonic())))) is not None:
                out.record(batch)
                if shape.lead and len(out.delivered) == 1:
                    feed.wait_published()  # blocks the event loop: a stalled consumer
        while (batch := await sub.poll(shape.trailing)) is not None:
            out.record(batch)
        out.stats, out.replay_requests = str(sub.stats), sub.stats.replay_requests
    out.seconds = time.monotonic() - started
    return out


def run_once(vkv: Any, shape: Shape, *, use_asyncio: bool) -> Outcome:
    """One stream from a fresh publisher to a fresh subscriber."""
    feed = Feed(vkv, shape)
    try:
        if use_asyncio:
            return asyncio.run(run_async(feed, shape))
        return run_sync(feed, shape)
    finally:
        feed.close()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--asyncio", action="store_true", help="the asyncio subscriber")
    parser.add_argument("--burners", type=int, default=3, help="busy-loop processes (0: a quiet machine)")
    parser.add_argument("--hwm", type=int, default=5000)
    parser.add_argument("--rcvhwm", type=int, default=5000)
    parser.add_argument("--buffer-steps", type=int, default=10_000)
    parser.add_argument("--work", type=float, default=50.0, help="consumer CPU per batch, microseconds")
    parser.add_argument("--stall-every", type=int, default=0)
    parser.add_argument("--stall", type=float, default=0.0)
    parser.add_argument("--lead", action="store_true", help="the publisher runs the whole stream ahead")
    parser.add_argument("--probe-interval", type=float, default=1.0)
    parser.add_argument("--replay-timeout", type=float, default=5.0)
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds per run at most")
    args = parser.parse_args()
    shape = Shape(
        args.batches, hwm=args.hwm, rcvhwm=args.rcvhwm, buffer_steps=args.buffer_steps,
        work=args.work * 1e-6, stall_every=args.stall_every, stall=args.stall, lead=args.lead,
        probe_interval=args.probe_interval, replay_timeout=args.replay_timeout, deadline=args.deadline,
    )  # fmt: skip
    vkv = vllm_kv_events()
    for run in range(args.runs):
        with cpu_burner(args.burners, args.deadline + 30):
            out = run_once(vkv, shape, use_asyncio=args.asyncio)
        print(f"run {run + 1}: {out.line()}\n  {out.stats}", flush=True)


if __name__ == "__main__":
    main()
