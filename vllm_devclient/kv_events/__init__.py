"""Subscriber for vLLM's KV-cache events (ZMQ PUB + replay ROUTER, msgpack payloads), sync and asyncio.

    from vllm_devclient import DevClient
    from vllm_devclient.kv_events import KVEventSubscriber

    with DevClient("http://127.0.0.1:8000") as client, KVEventSubscriber.from_client(client) as sub:
        ...  # run a workload
        sub.wait_for_stored(64, medium="CPU", deadline=60)   # 64 block hashes offloaded to the CPU tier
        for batch in sub:                                  # KVEventBatch: rank, seq, ts, events, losses
            ...

Needs the `zmq` extra (pyzmq, msgspec). The wire format and its history are described in `_events`, the
delivery guarantees in `_stream`, the buffering policy in `_subscriber`; the drivers are
`vllm_devclient/_async/kv_events.py` and, generated from it, `_sync/kv_events.py`.
"""

from typing import TYPE_CHECKING, Any

try:
    import msgspec  # noqa: F401
    import zmq  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"vllm_devclient.kv_events needs pyzmq and msgspec ({exc.name} is missing): "
        "pip install 'vllm-devclient[zmq]'"
    ) from exc

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

if TYPE_CHECKING:
    from .._async.kv_events import AsyncKVEventSubscriber
    from .._sync.kv_events import KVEventSubscriber

# The drivers live in `_async/` (and `_sync/`, generated) and import this package: loaded on first use,
# so that importing either first works.
_DRIVERS = {
    "AsyncKVEventSubscriber": "vllm_devclient._async.kv_events",
    "KVEventSubscriber": "vllm_devclient._sync.kv_events",
}


def __getattr__(name: str) -> Any:
    module = _DRIVERS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once
    return value


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
