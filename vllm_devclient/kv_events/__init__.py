"""Subscriber for vLLM's KV-cache events (ZMQ PUB + replay ROUTER, msgpack payloads), sync and asyncio.

    from vllm_devclient import DevClient
    from vllm_devclient.kv_events import KVEventSubscriber

    with DevClient("http://127.0.0.1:8000") as client, KVEventSubscriber.from_client(client) as sub:
        ...  # run a workload
        sub.wait_for_stored(64, medium="CPU", deadline=60)   # 64 block hashes offloaded to the CPU tier
        for batch in sub:                                  # KVEventBatch: rank, seq, ts, events, losses
            ...

Needs the `zmq` extra (pyzmq, msgspec). The wire format and its history are described in `_events`, the
delivery guarantees in `_stream`, the buffering policy in `_subscriber`; the drivers are `_async_driver`
and, generated from it, `_sync_driver`.
"""

try:
    import msgspec  # noqa: F401
    import zmq  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"vllm_devclient.kv_events needs pyzmq and msgspec ({exc.name} is missing): "
        "pip install 'vllm-devclient[zmq]'"
    ) from exc

from ._async_driver import AsyncKVEventSubscriber
from ._endpoints import KVEventEndpoint, offset_endpoint
from ._errors import (
    KVEventsClosedError,
    KVEventsError,
    KVEventsLostError,
    KVEventSourceError,
    KVEventsTimeoutError,
)
from ._events import (
    MEDIUM_CPU,
    MEDIUM_GPU,
    MEDIUM_STORAGE,
    AllBlocksCleared,
    BlockHash,
    BlockRemoved,
    BlockStored,
    DecodedPayload,
    EventsLost,
    KVEvent,
    KVEventBatch,
    KVEventTally,
    LossReason,
    MediumTally,
    PublisherRestarted,
    UnknownEvent,
    decode_payload,
)
from ._stream import SubscriberStats
from ._subscriber import SubscriberOptions, SupportsAsyncKVEventSources, SupportsKVEventSources
from ._sync_driver import KVEventSubscriber

__all__ = [
    "MEDIUM_CPU",
    "MEDIUM_GPU",
    "MEDIUM_STORAGE",
    "AllBlocksCleared",
    "AsyncKVEventSubscriber",
    "BlockHash",
    "BlockRemoved",
    "BlockStored",
    "DecodedPayload",
    "EventsLost",
    "KVEvent",
    "KVEventBatch",
    "KVEventEndpoint",
    "KVEventSourceError",
    "KVEventSubscriber",
    "KVEventTally",
    "KVEventsClosedError",
    "KVEventsError",
    "KVEventsLostError",
    "KVEventsTimeoutError",
    "LossReason",
    "MediumTally",
    "PublisherRestarted",
    "SubscriberOptions",
    "SubscriberStats",
    "SupportsAsyncKVEventSources",
    "SupportsKVEventSources",
    "UnknownEvent",
    "decode_payload",
    "offset_endpoint",
]
