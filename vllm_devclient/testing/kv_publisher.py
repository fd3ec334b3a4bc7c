"""A scripted engine that publishes KV-cache events, for either frontend, in one line::

    with RustFrontend(engine=PublishingEngine()) as fe:      # or PythonFrontend: the same engine
        fe.engine.store(64, medium="CPU")                    # 64 BlockStored batches, published for real

:class:`PublishingEngine` announces a complete ``kv_events_config`` (every field the frontends read, on free
loopback ports, from :func:`kv_events_config`) and runs vLLM's own ``ZmqEventPublisher`` (the installed
vllm's, in this process) on those ports, so ``/kv_event_sources`` names a publisher that really publishes and
a :class:`~vllm_devclient.kv_events.KVEventSubscriber` made ``from_client`` receives what the test stores.
"""

from __future__ import annotations

import importlib
import time
import warnings
from collections.abc import Mapping
from typing import Any

from .engine import ScriptedEngine
from .processes import free_port

__all__ = ["PublishingEngine", "kv_events_config"]


def kv_events_config(
    *,
    port: int | None = None,
    replay_port: int | None = None,
    topic: str = "",
    buffer_steps: int = 10_000,
    hwm: int = 100_000,
    max_queue_size: int = 100_000,
) -> dict[str, Any]:
    """A complete ``kv_events_config`` for a ZMQ publisher, bound on every interface (free ports by default).

    Complete because ``vllm-rs`` reads every field (``missing field `buffer_steps``` otherwise), as vLLM's
    engine always sends them all.
    """
    return {
        "enable_kv_cache_events": True,
        "publisher": "zmq",
        "endpoint": f"tcp://*:{port if port is not None else free_port()}",
        "replay_endpoint": f"tcp://*:{replay_port if replay_port is not None else free_port()}",
        "buffer_steps": buffer_steps,
        "hwm": hwm,
        "max_queue_size": max_queue_size,
        "topic": topic,
    }


class PublishingEngine(ScriptedEngine):
    """A :class:`ScriptedEngine` whose KV-events publisher exists: vLLM's own ``ZmqEventPublisher``.

    ``config`` (default :func:`kv_events_config`) is announced to the frontend and used by the publisher;
    other keyword arguments are :class:`ScriptedEngine`'s. The publisher is shut down with the engine
    (when its frontend stops). Needs vLLM installed (its ``vllm.distributed.kv_events``).
    """

    def __init__(self, *, config: Mapping[str, Any] | None = None, **engine_kw: Any) -> None:
        self.kv_events_config = dict(config if config is not None else kv_events_config())
        super().__init__(kv_events_config=self.kv_events_config, **engine_kw)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch's, at import time
            self._vkv = importlib.import_module("vllm.distributed.kv_events")
        c = self.kv_events_config
        self.publisher = self._vkv.ZmqEventPublisher(
            self.rank,
            endpoint=c["endpoint"],
            replay_endpoint=c["replay_endpoint"],
            buffer_steps=c["buffer_steps"],
            hwm=c["hwm"],
            max_queue_size=c["max_queue_size"],
            topic=c["topic"],
        )
        self._publisher_open = True

    def publish(self, *events: Any) -> None:
        """One batch of vLLM events (``vllm.distributed.kv_events.BlockStored`` ...), as the engine sends."""
        self.publisher.publish(self._vkv.KVEventBatch(ts=time.time(), events=list(events)))

    def store(self, count: int, *, medium: str | None = "GPU", first_hash: int = 0) -> None:
        """``count`` batches of one ``BlockStored`` each (hashes ``first_hash`` on), stored in ``medium``."""
        block = int(self.ready_response["block_size"])
        for i in range(first_hash, first_hash + count):
            self.publish(
                self._vkv.BlockStored(
                    block_hashes=[i],
                    parent_block_hash=None,
                    token_ids=list(range(block)),
                    block_size=block,
                    lora_id=None,
                    medium=medium,
                    lora_name=None,
                )
            )

    def close(self, grace: float = 5.0) -> None:
        publisher, self._publisher_open = self._publisher_open, False
        try:
            if publisher:
                self.publisher.shutdown()
        finally:
            super().close(grace)
