"""Which sockets a subscriber opens, from rank 0's endpoint or from a server's /kv_event_sources."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vllm_devclient import DevClientError, InvalidParameterError
from vllm_devclient.kv_events import KVEventEndpoint, KVEventSourceError, offset_endpoint
from vllm_devclient.kv_events._endpoints import endpoints_from_sources, host_of_url, resolve_endpoints
from vllm_devclient.models import KVEventSource


@pytest.mark.parametrize(
    ("endpoint", "rank", "expected"),
    [
        ("tcp://*:5557", 0, "tcp://*:5557"),
        ("tcp://*:5557", 3, "tcp://*:5560"),
        ("tcp://10.0.0.1:5557", 1, "tcp://10.0.0.1:5558"),
        ("tcp://[::1]:5557", 1, "tcp://[::1]:5558"),
        ("inproc://kv", 2, "inproc://kv_dp2"),
        ("ipc:///tmp/kv", 0, "ipc:///tmp/kv"),
    ],
)
def test_offset_follows_vllm(endpoint: str, rank: int, expected: str) -> None:
    assert offset_endpoint(endpoint, rank) == expected


@pytest.mark.parametrize(
    ("endpoint", "rank", "message"),
    [
        ("ipc:///tmp/kv", 1, "ipc:// serves rank 0 only"),
        ("tcp://*:0", 1, "lets the OS pick"),
        ("http://host:5557", 0, "not a ZMQ endpoint"),
        ("tcp://host", 0, "has no port"),
    ],
)
def test_offset_errors_say_what_to_do(endpoint: str, rank: int, message: str) -> None:
    with pytest.raises(KVEventSourceError, match=message):
        offset_endpoint(endpoint, rank)


def test_errors_are_in_the_package_hierarchy() -> None:
    assert issubclass(KVEventSourceError, DevClientError)
    assert issubclass(KVEventSourceError, InvalidParameterError)
    assert issubclass(KVEventSourceError, ValueError)


def test_resolve_connects_to_the_given_host_for_wildcards() -> None:
    eps = resolve_endpoints(
        "tcp://*:5557", replay_endpoint="tcp://0.0.0.0:5600", topic="kv", data_parallel_size=2, host="node-1"
    )
    assert eps == [
        KVEventEndpoint(0, "tcp://node-1:5557", "tcp://node-1:5600", "kv", False),
        KVEventEndpoint(1, "tcp://node-1:5558", "tcp://node-1:5601", "kv", False),
    ]
    assert resolve_endpoints("tcp://[::]:5557", host="fe80::1")[0].endpoint == "tcp://[fe80::1]:5557"
    assert resolve_endpoints("inproc://kv", data_parallel_size=2)[1].endpoint == "inproc://kv_dp1"


def test_resolve_bind_keeps_the_address_and_still_connects_replay() -> None:
    (ep,) = resolve_endpoints("tcp://*:5557", replay_endpoint="tcp://*:5558", bind=True, host="srv")
    assert (ep.endpoint, ep.replay_endpoint, ep.bind) == ("tcp://*:5557", "tcp://srv:5558", True)


def test_resolve_errors() -> None:
    with pytest.raises(KVEventSourceError, match="pass host="):
        resolve_endpoints("tcp://*:5557")
    with pytest.raises(KVEventSourceError, match="port 0"):
        resolve_endpoints("tcp://127.0.0.1:0")
    with pytest.raises(KVEventSourceError, match="data_parallel_size"):
        resolve_endpoints("tcp://127.0.0.1:5557", data_parallel_size=0)


def test_sources_in_every_shape_a_server_or_client_gives() -> None:
    sources = {
        "0": {"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": "kv", "hwm": 100000},
        1: KVEventSource(endpoint="tcp://*:5558", replay_endpoint=None, topic="kv"),
        2: SimpleNamespace(endpoint="tcp://10.1.1.1:7000", replay_endpoint="tcp://*:7100", topic=None),
    }
    eps = endpoints_from_sources(sources, host="srv")
    assert eps == [
        KVEventEndpoint(0, "tcp://srv:5557", "tcp://srv:5558", "kv", False),
        KVEventEndpoint(1, "tcp://srv:5558", None, "kv", False),
        # A concrete host: vLLM's PUB connects there, or bound it from tcp://*:0. Bind if possible.
        KVEventEndpoint(2, "tcp://10.1.1.1:7000", "tcp://srv:7100", "", None),
    ]
    assert endpoints_from_sources(sources, host="srv", bind=False)[2].bind is False


def test_sources_errors() -> None:
    with pytest.raises(KVEventSourceError, match="--kv-events-config"):
        endpoints_from_sources({})
    with pytest.raises(KVEventSourceError, match="twice"):
        endpoints_from_sources({0: {"endpoint": "inproc://a"}, "0": {"endpoint": "inproc://b"}})
    with pytest.raises(KVEventSourceError, match="not a data-parallel rank"):
        endpoints_from_sources({"x": {"endpoint": "inproc://a"}})
    with pytest.raises(KVEventSourceError, match="no endpoint"):
        endpoints_from_sources({0: {"replay_endpoint": "inproc://a"}})
    with pytest.raises(KVEventSourceError, match="mapping"):
        endpoints_from_sources([{"endpoint": "inproc://a"}])  # type: ignore[arg-type]


def test_host_of_url() -> None:
    assert host_of_url("http://127.0.0.1:8000") == "127.0.0.1"
    assert host_of_url("https://[::1]:8443/v1") == "::1"
    assert host_of_url("http://gpu-node:8000") == "gpu-node"
