"""What KVEventSubscriber and AsyncKVEventSubscriber share: configuration, sockets, one EventStream.

The two subscribers are thin I/O drivers over this base: `_async_driver.py` is written by hand,
`_sync_driver.py` generated from it (scripts/unasync.py). Both open the same sockets (plain pyzmq
sockets from one context) and differ only in how they wait: `zmq.Poller.poll` for the sync subscriber,
`zmq.asyncio.Poller.poll` for the async one (`_waiting.py`). Reading,
sequence tracking, replay and decoding are shared.

Reconnections: each SUB socket has a monitor (a PAIR socket reporting its CONNECTED and ACCEPTED
events). ZMQ writes a connection's event before any of its messages can be read, so the driver reads a
chunk of live messages, then the monitor, and reports a reconnection to the stream before feeding the
chunk: a message of a new connection is never taken for the old publisher's (see `_stream`).

Slow consumers (the buffering policy): the subscriber reads its sockets only when the consumer asks for
the next batch and nothing decoded is waiting, so it never drops anything itself. Unread messages wait
in ZMQ's queues: `rcvhwm` batches per rank on this side (default 100 000), then the publisher's own
`hwm` (vLLM's default 100 000). When those are full the publisher drops; each drop shows up as a
sequence gap, is replayed from the publisher's buffer (its last `buffer_steps` batches, default 10 000)
and, where that buffer no longer holds it, is reported as `EventsLost` with its range, on the next batch
of that rank and in `losses`. While a gap is being replayed, later live batches of that rank are held
in order; once `max_buffered` of them are held, the live sockets are not read until the replay answers
or times out (ZMQ queues the rest). So this subscriber itself holds at most `max_buffered` held batches,
one read chunk (1024) of ready ones and one replay answer (at most the publisher's `buffer_steps`).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Mapping
from typing import Any, Protocol, TypedDict, cast

import zmq
import zmq.asyncio

from .. import arguments as check
from ._endpoints import KVEventEndpoint, endpoints_from_sources, resolve_endpoints
from ._errors import KVEventsClosedError, KVEventSourceError, KVEventsTimeoutError, source_arguments
from ._events import EventsLost, KVEventTally, PublisherRestarted
from ._stream import EventStream, SubscriberStats

__all__ = ["SubscriberOptions", "SupportsAsyncKVEventSources", "SupportsKVEventSources"]

_DRAIN_CHUNK = 1024  # messages read from one socket per wake-up: amortises polling, bounds latency
MAX_AVAILABLE = 1_000_000  # count_stored() stops consuming after this many batches
SETTLE_STEP = 0.01  # s: polling step while waiting for a tail probe's answer
_CONNECT_EVENTS = zmq.EVENT_CONNECTED | zmq.EVENT_ACCEPTED  # a SUB connects, or a PUB connected to it


class SubscriberOptions(TypedDict, total=False):
    """Keyword options shared by the constructors and from_client()."""

    bind: bool | None
    backlog: bool
    probe_interval: float | None
    replay_timeout: float
    rcvhwm: int
    max_buffered: int
    raise_on_loss: bool
    context: zmq.Context[Any] | None


class SupportsKVEventSources(Protocol):
    """What from_client() needs of a DevClient."""

    @property
    def base_url(self) -> str: ...

    def kv_event_sources(self) -> Mapping[int, Any]: ...


class SupportsAsyncKVEventSources(Protocol):
    """What AsyncKVEventSubscriber.from_client() needs of an AsyncDevClient."""

    @property
    def base_url(self) -> str: ...

    async def kv_event_sources(self) -> Mapping[int, Any]: ...


class _Sockets:
    """One SUB per rank (bound or connected) with its monitor, and one DEALER per rank with replay; all
    linger 0."""

    def __init__(self, ctx: zmq.Context[Any], endpoints: list[KVEventEndpoint], rcvhwm: int) -> None:
        self._ctx = ctx
        self.live: dict[zmq.Socket[bytes], int] = {}
        self.monitor: dict[zmq.Socket[bytes], int] = {}
        self._monitor_of: dict[int, zmq.Socket[bytes]] = {}
        self._connections: dict[int, int] = {}  # connection events seen per rank; the first is no reconnect
        self.replay: dict[int, zmq.Socket[bytes]] = {}
        self.replay_rank: dict[zmq.Socket[bytes], int] = {}
        self._replay_endpoints: dict[int, str] = {}
        self.bound: set[int] = set()  # ranks whose live endpoint this subscriber bound
        try:
            for ep in endpoints:
                self._open_live(ep, rcvhwm)
                if ep.replay_endpoint:
                    self._replay_endpoints[ep.rank] = ep.replay_endpoint
                    self._open_replay(ep.rank)
        except BaseException:
            self.close()
            raise

    def _socket(self, kind: int, endpoint: str) -> zmq.Socket[bytes]:
        sock: zmq.Socket[bytes] = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        if endpoint.startswith("tcp://[") or "::" in endpoint:
            sock.setsockopt(zmq.IPV6, 1)
        return sock

    def _open_live(self, ep: KVEventEndpoint, rcvhwm: int) -> None:
        sock = self._socket(zmq.SUB, ep.endpoint)
        self.live[sock] = ep.rank
        # Before bind or connect, so that the first connection is seen as the first.
        monitor: zmq.Socket[bytes] = sock.get_monitor_socket(_CONNECT_EVENTS)
        monitor.setsockopt(zmq.LINGER, 0)
        self.monitor[monitor] = ep.rank
        self._monitor_of[ep.rank] = monitor
        sock.setsockopt(zmq.RCVHWM, rcvhwm)
        sock.setsockopt(zmq.SUBSCRIBE, ep.topic.encode("utf-8"))
        try:
            if ep.bind is None:
                try:
                    sock.bind(ep.endpoint)
                    self.bound.add(ep.rank)
                except zmq.ZMQError as exc:
                    if exc.errno not in (zmq.EADDRINUSE, zmq.EADDRNOTAVAIL):
                        raise
                    sock.connect(ep.endpoint)  # the publisher bound it (here or on another host)
            elif ep.bind:
                sock.bind(ep.endpoint)
                self.bound.add(ep.rank)
            else:
                sock.connect(ep.endpoint)
        except zmq.ZMQError as exc:
            verb = "connect to" if ep.bind is False else "bind"
            raise KVEventSourceError(f"cannot {verb} {ep.endpoint!r} for DP rank {ep.rank}: {exc}") from exc

    def _open_replay(self, rank: int) -> zmq.Socket[bytes]:
        endpoint = self._replay_endpoints[rank]
        sock = self._socket(zmq.DEALER, endpoint)
        # A replay answers with up to buffer_steps messages at once; vLLM's ROUTER drops what does not fit.
        sock.setsockopt(zmq.RCVHWM, 0)
        self.replay[rank] = sock
        self.replay_rank[sock] = rank
        try:
            sock.connect(endpoint)
        except zmq.ZMQError as exc:
            raise KVEventSourceError(f"cannot connect to replay endpoint {endpoint!r}: {exc}") from exc
        return sock

    def reset_replay(self, rank: int) -> tuple[zmq.Socket[bytes], zmq.Socket[bytes]]:
        """Replace a rank's DEALER so that answers to an abandoned request are never read."""
        old = self.replay.pop(rank)
        del self.replay_rank[old]
        old.close(linger=0)
        return old, self._open_replay(rank)

    def drain(self, sock: zmq.Socket[bytes], stream: EventStream, live_room: int) -> None:
        """Feed what `sock` has (at most a chunk; at most `live_room` messages from a live socket)."""
        recv = sock.recv_multipart
        rank = self.live.get(sock)
        if rank is not None:
            chunk = []
            for _ in range(min(_DRAIN_CHUNK, live_room)):
                try:
                    chunk.append(recv(zmq.NOBLOCK))
                except zmq.Again:
                    break
            # After the read: a connection whose messages were just read has its event queued by now.
            self.read_monitor(rank, stream)
            feed = stream.live_feeder(rank)
            for frames in chunk:
                feed(frames)
            return
        rank = self.monitor.get(sock)
        if rank is not None:
            self.read_monitor(rank, stream)
            return
        rank = self.replay_rank.get(sock)
        if rank is None:
            return  # a DEALER replaced during this round
        resets = stream.resets
        for _ in range(_DRAIN_CHUNK):
            if rank in resets:
                return  # the rest of this socket's answer is abandoned; it is replaced before the next read
            try:
                frames = recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            stream.on_replay(rank, frames)

    def read_monitor(self, rank: int, stream: EventStream) -> None:
        """Read the rank's monitor; a connection after its first one is reported as a reconnection."""
        monitor = self._monitor_of[rank]
        if not cast(int, monitor.getsockopt(zmq.EVENTS)) & zmq.POLLIN:  # cheaper than a failing recv
            return
        reconnected = False
        while True:
            try:
                frames = monitor.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                break
            # The first frame: the event (uint16, native byte order), then a uint32 value.
            if not int.from_bytes(frames[0][:2], sys.byteorder) & _CONNECT_EVENTS:
                continue
            seen = self._connections[rank] = self._connections.get(rank, 0) + 1
            reconnected = reconnected or seen > 1
        if reconnected:
            stream.on_reconnect(rank)

    def close(self) -> None:
        for sock in self.live:
            sock.disable_monitor()
        for sock in [*self.monitor, *self.live, *self.replay_rank]:
            sock.close(linger=0)
        self.monitor.clear()
        self._monitor_of.clear()
        self.live.clear()
        self.replay.clear()
        self.replay_rank.clear()


def _endpoints(
    endpoint: str | None,
    sources: Mapping[Any, Any] | None,
    *,
    replay_endpoint: str | None,
    topic: str,
    data_parallel_size: int,
    host: str | None,
    bind: bool | None,
) -> list[KVEventEndpoint]:
    """Every rank's endpoints: from rank 0's `endpoint` (ranks 1.. derived as vLLM does), or `sources`."""
    if endpoint is not None:
        return resolve_endpoints(
            endpoint, replay_endpoint=replay_endpoint, topic=topic, data_parallel_size=data_parallel_size,
            bind=bool(bind), host=host,
        )  # fmt: skip
    assert sources is not None
    return endpoints_from_sources(sources, host=host, bind=bind)


def _plain_context(context: zmq.Context[Any] | None) -> tuple[zmq.Context[Any], bool]:
    """The ZeroMQ context to make sockets in, and whether it is the subscriber's own (to terminate)."""
    if context is None:
        return zmq.Context(), True
    # Work on plain sockets even when handed an asyncio context (its sockets return futures).
    if isinstance(context, zmq.asyncio.Context):
        return zmq.Context.shadow(context.underlying), False
    return context, False


class SubscriberBase:
    """Configuration, sockets and the shared stream; the drivers add only their waiting."""

    @staticmethod
    def _new_poller() -> zmq.Poller:
        """A poller of the driver's kind (set by each driver from `_waiting.py`)."""
        raise NotImplementedError

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        replay_endpoint: str | None = None,
        topic: str = "",
        data_parallel_size: int = 1,
        sources: Mapping[Any, Any] | None = None,
        host: str | None = None,
        bind: bool | None = None,
        backlog: bool = True,
        probe_interval: float | None = 1.0,
        replay_timeout: float = 5.0,
        rcvhwm: int = 100_000,
        max_buffered: int = 100_000,
        raise_on_loss: bool = False,
        context: zmq.Context[Any] | None = None,
    ) -> None:
        self._closed = True  # until the sockets exist, so close() in a failed __init__ is harmless
        if (endpoint is None) == (sources is None):
            raise KVEventSourceError(
                "pass either endpoint= (rank 0's endpoint; ranks 1.. derived as vLLM does) or sources= "
                "(rank -> source, e.g. DevClient.kv_event_sources()), not both or neither"
            )
        with source_arguments():
            check.seconds(replay_timeout, "replay_timeout")
            check.optional_seconds(probe_interval, "probe_interval")
            check.positive_int(rcvhwm, "rcvhwm")
            check.positive_int(max_buffered, "max_buffered")
        self.endpoints = _endpoints(
            endpoint, sources, replay_endpoint=replay_endpoint, topic=topic,
            data_parallel_size=data_parallel_size, host=host, bind=bind,
        )  # fmt: skip
        self._max_buffered = max_buffered
        self._probe_interval = probe_interval
        self._last_activity = self._last_probe = time.monotonic()
        self._stream = EventStream(
            [(ep.rank, ep.replay_endpoint is not None) for ep in self.endpoints],
            backlog=backlog,
            replay_timeout=float(replay_timeout),
            raise_on_loss=raise_on_loss,
            started_at=time.time(),  # on the publishers' clock: batch timestamps are time.time()
        )
        self._ctx, self._own_ctx = _plain_context(context)
        self._open_sockets(rcvhwm)
        self._flush()

    def _open_sockets(self, rcvhwm: int) -> None:
        """Every rank's sockets, and the pollers that wait on them (`_replay_poller`: the replay sockets
        alone, for when the live ones may not be read)."""
        try:
            self._sockets = _Sockets(self._ctx, self.endpoints, rcvhwm)
        except BaseException:
            if self._own_ctx:
                self._ctx.term()
            raise
        self._closed = False
        self._poller = self._new_poller()
        self._replay_poller = self._new_poller()
        for sock in [*self._sockets.live, *self._sockets.monitor]:
            self._poller.register(sock, zmq.POLLIN)
        for sock in self._sockets.replay_rank:
            self._poller.register(sock, zmq.POLLIN)
            self._replay_poller.register(sock, zmq.POLLIN)

    # -- state ---------------------------------------------------------------------------------------

    @property
    def tally(self) -> KVEventTally:
        """Counts over every batch delivered so far (a live view; `.copy()` it to keep a snapshot)."""
        return self._stream.tally

    @property
    def tally_since_start(self) -> KVEventTally:
        """Counts over the batches delivered that were published since the subscriber started: the
        initial backlog's earlier batches are left out (a new object; see `wait_for_stored`)."""
        return self._stream.tally_since_start()

    @property
    def losses(self) -> list[EventsLost]:
        """Every loss reported so far, in delivery order."""
        return list(self._stream.losses)

    @property
    def restarts(self) -> list[PublisherRestarted]:
        """Every publisher restart reported so far, in delivery order."""
        return list(self._stream.restarts)

    @property
    def stats(self) -> SubscriberStats:
        """Counters for diagnosis (replay requests and timeouts, duplicates, reconnections...)."""
        return self._stream.stats

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    def close(self) -> None:
        """Close every socket (linger 0) and, unless a context was passed in, terminate the context."""
        if self._closed:
            return
        self._closed = True
        self._sockets.close()
        if self._own_ctx:
            self._ctx.term()

    def __repr__(self) -> str:
        bound = self._sockets.bound if hasattr(self, "_sockets") else set()
        eps = ", ".join(f"{e.rank}:{'bind ' if e.rank in bound else ''}{e.endpoint}" for e in self.endpoints)
        return f"{type(self).__name__}([{eps}], closed={self._closed})"

    # -- shared driver steps -------------------------------------------------------------------------

    def _flush(self) -> None:
        """Replace abandoned DEALERs, then send the replay requests the stream asked for."""
        stream = self._stream
        while stream.resets:
            rank = stream.resets.pop()
            if rank in self._sockets.replay:
                old, new = self._sockets.reset_replay(rank)
                for poller in (self._poller, self._replay_poller):
                    poller.unregister(old)
                    poller.register(new, zmq.POLLIN)
        while stream.requests:
            rank, start = stream.requests.pop(0)
            try:
                self._sockets.replay[rank].send_multipart([b"", start.to_bytes(8, "big")], zmq.NOBLOCK)
            except zmq.Again:
                stream.abandon_replay(rank)

    def _plan(self, deadline: float | None, first: bool = False) -> tuple[zmq.Poller, int] | None:
        """What to poll and for how long (ms, -1 forever); None once the deadline has passed.

        The first pass of a fill always polls (for 0 ms at worst), so poll(0.0) reads what has arrived.
        """
        if self._closed:
            raise KVEventsClosedError("the subscriber is closed")
        now = time.monotonic()
        wait = None if deadline is None else deadline - now
        if wait is not None and wait <= 0:
            if not first:
                return None
            wait = 0.0
        replay_deadline = self._stream.next_deadline()
        if replay_deadline is not None:
            to_replay = max(0.0, replay_deadline - now)
            wait = to_replay if wait is None else min(wait, to_replay)
        if self._probe_interval is not None:
            probe_at = max(self._last_activity, self._last_probe) + self._probe_interval
            if now >= probe_at:
                self._last_probe = now
                if self._stream.probe():
                    self._flush()
                    return self._plan(deadline, first)
            else:
                wait = probe_at - now if wait is None else min(wait, probe_at - now)
        poller = self._replay_poller if self._stream.held_count() >= self._max_buffered else self._poller
        return poller, (-1 if wait is None else math.ceil(wait * 1000))

    def _handle(self, events: list[tuple[Any, int]]) -> None:
        if events:
            self._last_activity = time.monotonic()
        for sock, _ in events:
            self._sockets.drain(sock, self._stream, self._max_buffered - self._stream.held_count())
        self._stream.check_timeouts()
        self._flush()

    def _timeout(self, what: str, started: float, tally: KVEventTally | None = None) -> KVEventsTimeoutError:
        waited = time.monotonic() - started
        tally = self._stream.tally.copy() if tally is None else tally
        return KVEventsTimeoutError(
            f"{what} after {waited:.1f} s ({tally.batches} batches delivered, stored blocks per medium "
            f"{tally.stored_blocks}, {tally.lost_batches} lost); is the server publishing KV events to "
            f"{[e.endpoint for e in self.endpoints]}?",
            waited_s=waited,
            tally=tally,
        )

    @staticmethod
    def _check_wait_args(blocks: int, deadline: float, quiet: float = 1.0) -> None:
        with source_arguments():
            check.non_negative_int(blocks, "blocks")
            check.seconds(deadline, "deadline", allow_zero=True)
            check.seconds(quiet, "quiet")
