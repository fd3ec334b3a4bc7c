# Generated from vllm_devclient/kv_events/_async_driver.py by scripts/unasync.py; do not edit.
"""KVEventSubscriber: the driver of the KV-event subscriber, which waits and loops.

Configuration, sockets and the state machine are shared (`_subscriber.py`, `_stream.py`): this module only
waits (`_waiting.py`) and loops. The blocking driver (`_sync_driver.py`) is generated from the asyncio one
(`_async_driver.py`) by `make generate`.
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import TYPE_CHECKING

from ._endpoints import host_of_url
from ._events import MEDIUM_CPU, KVEventBatch, KVEventTally
from ._subscriber import (
    MAX_AVAILABLE,
    SETTLE_STEP,
    SubscriberBase,
    SubscriberOptions,
    SupportsKVEventSources,
)
from ._waiting import new_poller, wait_for

if TYPE_CHECKING:
    from typing_extensions import Self, Unpack

__all__ = ["KVEventSubscriber"]


class KVEventSubscriber(SubscriberBase):
    """Subscribe to vLLM's KV-cache events, one live and one replay socket per data-parallel rank.

    Give either `endpoint` (rank 0's; ranks up to `data_parallel_size - 1` derived as vLLM does: port + r,
    `inproc` suffix `_dp{r}`) with `replay_endpoint` and `topic`, or `sources` (what
    `DevClient.kv_event_sources()` returns; or use `from_client`). `host` replaces a wildcard bind
    host (`tcp://*:5557`) when connecting. `bind=True` binds the live endpoint(s) for publishers that
    connect (a vLLM endpoint with a concrete host); with `sources` the default follows vLLM's rule.

    `backlog=True` first asks each rank's replay socket for everything the publisher still buffers.
    After `probe_interval` seconds without any message, the replay sockets are asked for anything after
    the last delivered batch, which recovers batches dropped at the tail of a stream (None: never).
    Delivery: every batch after the first delivered one of a rank is delivered once, in order per rank,
    or reported in `EventsLost` (on the next batch of that rank and in `.losses`); a publisher restart is
    reported as `PublisherRestarted` on the new publisher's first batch, not as a gap, also when its first
    batches were missed or read behind the old publisher's last ones. With `raise_on_loss=True` a batch
    carrying losses raises KVEventsLostError instead. Waits on zmq (a zmq.Poller in the blocking
    driver, zmq.asyncio in the asyncio one); use it from one thread or event loop (it is not thread-safe)
    and close it with its context manager or `close()`.
    """

    _new_poller = staticmethod(new_poller)

    @classmethod
    def from_client(
        cls,
        client: SupportsKVEventSources,
        *,
        host: str | None = None,
        **options: Unpack[SubscriberOptions],
    ) -> Self:
        """Subscribe to the publishers a server reports (GET /kv_event_sources); wildcard hosts become the
        client's host unless `host` is given."""
        sources = client.kv_event_sources()
        return cls(sources=sources, host=host or host_of_url(client.base_url), **options)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> KVEventBatch:
        """The next batch, waiting as long as it takes; iteration stops once the subscriber is closed."""
        if self._closed:
            raise StopIteration
        return self.recv()

    def _fill(self, deadline: float | None) -> bool:
        """Read until a batch is ready (True) or the deadline passes (False)."""
        first = True
        while not self._stream.ready:
            plan = self._plan(deadline, first)
            first = False
            if plan is None:
                return False
            poller, ms = plan
            self._handle(wait_for(poller, ms))
        return True

    def poll(self, deadline: float = 0.0) -> KVEventBatch | None:
        """The next batch, or None if none arrives within `deadline` seconds."""
        batch = self._stream.pop()
        if batch is not None:
            return batch
        self._fill(time.monotonic() + deadline)
        return self._stream.pop()

    def recv(self, deadline: float | None = None) -> KVEventBatch:
        """The next batch; KVEventsTimeoutError if none arrives within `deadline` seconds (None: wait)."""
        batch = self._stream.pop()
        if batch is not None:
            return batch
        started = time.monotonic()
        if not self._fill(None if deadline is None else started + deadline):
            raise self._timeout("no KV event batch", started)
        batch = self._stream.pop()
        assert batch is not None
        return batch

    def count_stored(self, medium: str | None = MEDIUM_CPU) -> int:
        """Consume what has arrived and return the block hashes announced stored in `medium` by every
        batch delivered so far, the initial backlog included (`wait_for_stored` counts since the start)."""
        for _ in range(MAX_AVAILABLE):
            if self.poll(0.0) is None:
                break
        return self._stream.tally.stored(medium)

    def wait_for_stored(
        self, blocks: int, *, medium: str | None = MEDIUM_CPU, deadline: float
    ) -> KVEventTally:
        """Consume batches until `blocks` hashes were announced stored in `medium` since the subscriber
        started, and return the tally since the start (`tally_since_start`) then: batches of the initial
        backlog published before the start are left out. KVEventsTimeoutError at the deadline (its
        `.tally` the tally since the start too)."""
        self._check_wait_args(blocks, deadline)
        stream = self._stream
        started = time.monotonic()
        end = started + deadline
        while stream.stored_since_start(medium) < blocks:
            if stream.pop() is None and not self._fill(end):
                have = stream.stored_since_start(medium)
                what = f"{have} of {blocks} blocks stored in medium {medium!r} since the start"
                raise self._timeout(what, started, stream.tally_since_start())
        return stream.tally_since_start()

    def wait_until_quiet(self, quiet: float = 1.0, *, deadline: float) -> KVEventTally:
        """Consume batches until none arrives for `quiet` seconds and a replay probe finds nothing after
        the last one (so batches dropped at the tail are not missed); return the tally.
        KVEventsTimeoutError if the stream is not quiet before the deadline."""
        self._check_wait_args(0, deadline, quiet)
        stream = self._stream
        started = time.monotonic()
        end = started + deadline
        while True:
            window_end = time.monotonic() + quiet
            if window_end > end:
                raise self._timeout(f"the stream was not quiet for {quiet:g} s", started)
            if stream.pop() is not None or self._fill(window_end) or stream.replaying():
                continue
            # Nothing for a whole window: ask the publishers for anything dropped at the tail.
            if stream.probe():
                self._flush()
                while stream.replaying() and not stream.ready and time.monotonic() < end:
                    self._fill(min(end, time.monotonic() + SETTLE_STEP))
            if not stream.ready and not stream.replaying():
                return stream.tally.copy()
