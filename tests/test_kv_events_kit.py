"""The kit's publishing engine: either real frontend, one line, real KV-cache events; a half config is refused
with the missing fields named (vllm-rs itself would exit at startup)."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator

import pytest

from vllm_devclient import DevClient
from vllm_devclient.kv_events import KVEventSubscriber
from vllm_devclient.testing import (
    Frontend,
    FrontendStartupError,
    KVEventsConfigError,
    PublishingEngine,
    PythonFrontend,
    RustFrontend,
    ScriptedEngine,
    kv_events_config,
)
from vllm_devclient.testing.processes import wait_until_bindable

# What the SDK's error message suggested before: enough for `vllm serve`, half a config for the kit's engine.
HALF = {"enable_kv_cache_events": True, "publisher": "zmq", "replay_endpoint": "tcp://*:5558"}


def test_a_half_config_names_every_missing_field() -> None:
    with pytest.raises(KVEventsConfigError) as info:
        ScriptedEngine(kv_events_config=HALF)
    message = str(info.value)
    for field in ("endpoint", "buffer_steps", "hwm", "max_queue_size", "topic"):
        assert field in message.split("(vllm-rs")[0], message
    assert "missing field endpoint" in message and "kv_events_config()" in message
    with pytest.raises(KVEventsConfigError, match="has bufer_steps, which"):
        ScriptedEngine(kv_events_config={**kv_events_config(), "bufer_steps": 1})


def test_the_kit_config_has_exactly_vllms_fields() -> None:
    vllm_config = importlib.import_module("vllm.config.kv_events").KVEventsConfig
    assert list(kv_events_config()) == [f.name for f in dataclasses.fields(vllm_config)]
    config = kv_events_config(port=7001, replay_port=7002, topic="kv")
    engine = ScriptedEngine(kv_events_config=config)
    assert engine.ready_response["kv_events_config"] == config


def test_vllm_rs_exits_on_the_half_config_the_check_refuses() -> None:
    # The check's claim, on the real binary: ready_overrides slips the half config past it.
    engine = ScriptedEngine(ready_overrides={"kv_events_config": HALF})
    with pytest.raises(FrontendStartupError, match="missing field `endpoint`"):
        with RustFrontend(engine=engine):
            pass


@pytest.fixture(params=["python", "rust"])
def publishing(request: pytest.FixtureRequest) -> Iterator[Frontend]:
    launcher = PythonFrontend if request.param == "python" else RustFrontend
    with launcher(engine=PublishingEngine(config=kv_events_config(topic="kv"))) as fe:
        yield fe


def test_either_frontend_with_a_publishing_engine_delivers_what_the_test_stores(publishing: Frontend) -> None:
    engine = publishing.engine
    assert isinstance(engine, PublishingEngine)
    with DevClient(publishing.base_url) as vllm:
        (source,) = vllm.kv_event_sources().values()
        assert (source.endpoint, source.topic) == (engine.kv_events_config["endpoint"], "kv")
        with KVEventSubscriber.from_client(vllm) as events:
            engine.store(5, medium="CPU", first_hash=100)
            engine.store(3)
            tally = events.wait_for_stored(5, medium="CPU", deadline=30)
            assert tally.media["CPU"].stored_blocks == 5
            assert events.wait_for_stored(3, medium="GPU", deadline=30).media["GPU"].stored_blocks == 3
            assert tally.lost_batches == 0


def test_the_publisher_stops_with_its_frontend() -> None:
    engine = PublishingEngine()
    ports = [int(engine.kv_events_config[k].rsplit(":", 1)[1]) for k in ("endpoint", "replay_endpoint")]
    with RustFrontend(engine=engine):
        with pytest.raises(OSError):
            wait_until_bindable("127.0.0.1", ports[0], deadline=0.2)  # held by the running publisher
    wait_until_bindable("127.0.0.1", *ports)  # raises when the publisher still holds them
