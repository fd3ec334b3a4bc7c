"""Which sockets a subscriber opens: one live SUB and (when there is replay) one DEALER per DP rank.

vLLM's publisher binds when its endpoint contains `*` or `::` or is `ipc://`/`inproc://`, and connects
otherwise (so a central subscriber can bind). Rank r publishes on port P + r, or on `inproc://X_dp{r}`.
The replay ROUTER always binds, so replay is always connected to. A server reports its publishers'
endpoints as configured, so `tcp://*:5557` must become `tcp://<server host>:5557` before connecting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from .. import arguments as check
from ._errors import KVEventSourceError, source_arguments

__all__ = ["KVEventEndpoint", "endpoints_from_sources", "host_of_url", "offset_endpoint", "resolve_endpoints"]

_WILDCARD_HOSTS = frozenset({"*", "0.0.0.0", "::", "[::]", ""})


@dataclass(frozen=True, slots=True)
class KVEventEndpoint:
    """The sockets for one rank; replay is always connected. `bind`: True binds `endpoint`, False
    connects to it, None binds it unless that address is taken or not local, then connects (a server's
    report cannot tell `tcp://HOST:P` that its PUB connects to from `tcp://*:0` it bound at HOST:P)."""

    rank: int
    endpoint: str
    replay_endpoint: str | None = None
    topic: str = ""
    bind: bool | None = False


def _split_tcp(endpoint: str) -> tuple[str, int]:
    rest = endpoint[len("tcp://") :]
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        raise KVEventSourceError(f"endpoint {endpoint!r} has no port; expected tcp://HOST:PORT")
    return host, int(port)


def _check_scheme(endpoint: str) -> None:
    if not endpoint.startswith(("tcp://", "ipc://", "inproc://")):
        raise KVEventSourceError(
            f"endpoint {endpoint!r} is not a ZMQ endpoint vLLM publishes on; expected tcp://HOST:PORT, "
            "ipc://PATH or inproc://NAME"
        )
    if endpoint.startswith("tcp://"):
        _split_tcp(endpoint)


def publisher_binds(endpoint: str) -> bool:
    """vLLM's own rule for whether its PUB socket binds (True) or connects (False)."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def offset_endpoint(endpoint: str, rank: int) -> str:
    """The endpoint DP rank `rank` publishes on, given rank 0's (vLLM's offset rule)."""
    _check_scheme(endpoint)
    if rank == 0:
        return endpoint
    if endpoint.startswith("inproc://"):
        return f"{endpoint}_dp{rank}"
    if endpoint.startswith("ipc://"):
        raise KVEventSourceError(
            f"vLLM cannot publish DP rank {rank} on {endpoint!r}: ipc:// serves rank 0 only"
        )
    host, port = _split_tcp(endpoint)
    if port == 0:
        raise KVEventSourceError(
            f"{endpoint!r} lets the OS pick each rank's port; pass the bound endpoints per rank "
            "(sources=, e.g. from DevClient.kv_event_sources())"
        )
    return f"tcp://{host}:{port + rank}"


def _connectable(endpoint: str, host: str | None, what: str) -> str:
    """Replace a wildcard bind host with `host`; ipc/inproc and concrete hosts are kept."""
    if not endpoint.startswith("tcp://"):
        return endpoint
    ep_host, port = _split_tcp(endpoint)
    if port == 0:
        raise KVEventSourceError(
            f"cannot connect to {what} {endpoint!r}: port 0 means 'any'; use the bound port"
        )
    if ep_host not in _WILDCARD_HOSTS:
        return endpoint
    if not host:
        raise KVEventSourceError(
            f"{what} {endpoint!r} is a wildcard bind address; pass host= (the server's host) to connect to it"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"tcp://{host}:{port}"


def resolve_endpoints(
    endpoint: str,
    *,
    replay_endpoint: str | None = None,
    topic: str = "",
    data_parallel_size: int = 1,
    bind: bool = False,
    host: str | None = None,
) -> list[KVEventEndpoint]:
    """Endpoints for ranks 0..data_parallel_size-1 from rank 0's, as the publishers derive them."""
    with source_arguments():
        check.positive_int(data_parallel_size, "data_parallel_size")
    out: list[KVEventEndpoint] = []
    for rank in range(data_parallel_size):
        live = offset_endpoint(endpoint, rank)
        replay = offset_endpoint(replay_endpoint, rank) if replay_endpoint else None
        out.append(
            KVEventEndpoint(
                rank=rank,
                endpoint=live if bind else _connectable(live, host, "endpoint"),
                replay_endpoint=_connectable(replay, host, "replay endpoint") if replay else None,
                topic=topic,
                bind=bind,
            )
        )
    return out


def _get(source: object, name: str, default: object) -> object:
    if isinstance(source, Mapping):
        return source.get(name, default)
    return getattr(source, name, default)


def endpoints_from_sources(
    sources: Mapping[Any, Any], *, host: str | None = None, bind: bool | None = None
) -> list[KVEventEndpoint]:
    """Endpoints from a server's report (`DevClient.kv_event_sources()` or the raw JSON of
    GET /kv_event_sources): rank -> object or mapping with `endpoint`, `replay_endpoint`, `topic`.

    Each rank's endpoint is already offset. `bind=None` follows the publisher: where it binds (a wildcard
    host, ipc, inproc) the subscriber connects; a concrete tcp host is either where a connecting PUB goes
    (vLLM's rule for a configured `tcp://HOST:P`) or where vLLM bound `tcp://*:0`, so the subscriber binds
    it when it can and connects when the address is taken or not local.
    """
    if not isinstance(sources, Mapping):
        raise KVEventSourceError(
            f"sources must be a mapping of DP rank to source, got {type(sources).__name__}"
        )
    if not sources:
        raise KVEventSourceError(
            "the server reports no KV-event publishers; start vLLM with prefix caching on and "
            '--kv-events-config \'{"enable_kv_cache_events": true, "publisher": "zmq", '
            '"endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558"}\' (vLLM fills in the other '
            "fields). In tests, the kit's engine publishes: RustFrontend(engine=PublishingEngine()) "
            "(vllm_devclient.testing)"
        )
    out: list[KVEventEndpoint] = []
    for key, source in sources.items():
        try:
            rank = int(key)
        except (TypeError, ValueError):
            raise KVEventSourceError(f"source key {key!r} is not a data-parallel rank") from None
        endpoint = _get(source, "endpoint", None)
        replay = _get(source, "replay_endpoint", None)
        topic = _get(source, "topic", "")
        if any(e.rank == rank for e in out):
            raise KVEventSourceError(f"sources name DP rank {rank} twice")
        if not isinstance(endpoint, str):
            raise KVEventSourceError(f"source for rank {rank} has no endpoint string: {source!r}")
        if replay is not None and not isinstance(replay, str):
            raise KVEventSourceError(f"source for rank {rank} has a non-string replay_endpoint: {replay!r}")
        if topic is None:
            topic = ""
        if not isinstance(topic, str):
            raise KVEventSourceError(f"source for rank {rank} has a non-string topic: {topic!r}")
        _check_scheme(endpoint)
        if replay:
            _check_scheme(replay)
        sub_binds: bool | None = bind
        if bind is None and publisher_binds(endpoint):
            sub_binds = False
        out.append(
            KVEventEndpoint(
                rank=rank,
                endpoint=endpoint if sub_binds else _connectable(endpoint, host, "endpoint"),
                replay_endpoint=_connectable(replay, host, "replay endpoint") if replay else None,
                topic=topic,
                bind=sub_binds,
            )
        )
    out.sort(key=lambda e: e.rank)
    return out


def host_of_url(url: str) -> str | None:
    """The host of an http(s) base URL, to connect to publishers that report a wildcard bind address."""
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None
