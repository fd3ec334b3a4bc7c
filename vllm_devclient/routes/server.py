"""The server's routes: health, version, models, metrics, load, configuration, world size."""

from __future__ import annotations

import json
from typing import Literal

from .. import arguments as check
from ..answers import field_reader, healthy, model_reader, read_kv_event_sources, read_metrics, text_answer
from ..errors import InvalidParameterError
from ..metrics import MetricsSnapshot
from ..models import KVEventSource, LoadInfo, ModelList, ServerInfo, TokenizerInfo, VersionInfo
from ..records import Cli, Param, Route

__all__ = ["ROUTES"]


def _version(value: VersionInfo) -> str:
    if value.rust_frontend_version:
        return f"vllm {value.version} (rust frontend {value.rust_frontend_version})"
    return f"vllm {value.version} (python frontend)"


def _models(value: ModelList) -> str:
    return ", ".join(m.id for m in value.data) or "(none)"


def _sources(value: dict[int, KVEventSource]) -> str:
    lines = [f"rank {rank}: {src.endpoint} replay={src.replay_endpoint}" for rank, src in value.items()]
    return "\n".join(lines) or "(none: KV events are off)"


def _pretty(value: ServerInfo) -> str:
    return json.dumps(value.model_dump(mode="json"), indent=2)


def _config_format(value: object, name: str) -> str:
    if value not in ("text", "json"):
        raise InvalidParameterError(f"{name} must be 'text' or 'json', got {value!r}")
    return str(value)


ROUTES: tuple[Route, ...] = (
    Route(
        name="health",
        method="GET",
        path="/health",
        reader=healthy,
        idempotent=True,
        dev_route=False,
        # 503 here means the engine is dead: not something a retry fixes.
        retry_statuses=frozenset({502, 504}),
        doc="GET /health: True when the engine is alive; EngineDeadError (503) when it is dead.",
        answer=bool,
        cli=Cli(topic="server", render=lambda value: "ok"),
    ),
    Route(
        name="version",
        method="GET",
        path="/version",
        reader=model_reader(VersionInfo),
        idempotent=True,
        dev_route=False,
        doc="GET /version: the vLLM version, and (`.frontend`) which frontend serves it.",
        answer=VersionInfo,
        cli=Cli(topic="server", render=_version),
    ),
    Route(
        name="models",
        method="GET",
        path="/v1/models",
        reader=model_reader(ModelList),
        idempotent=True,
        dev_route=False,
        doc="GET /v1/models: the served models (needs the api_key when the server has one).",
        answer=ModelList,
        cli=Cli(topic="server", render=_models),
    ),
    Route(
        name="metrics_text",
        method="GET",
        path="/metrics",
        reader=text_answer,
        idempotent=True,
        dev_route=False,
        doc="GET /metrics: the Prometheus (Python) or OpenMetrics (Rust) text.",
        answer=str,
        cli=Cli(topic="server", render=lambda value: value.rstrip("\n")),
    ),
    Route(
        name="metrics",
        method="GET",
        path="/metrics",
        reader=read_metrics,
        idempotent=True,
        dev_route=False,
        doc='GET /metrics as a typed snapshot: prefix-cache and KV-offload counters (the "metrics" extra).',
        answer=MetricsSnapshot,
        cli=Cli(topic="server"),
    ),
    Route(
        name="load",
        method="GET",
        path="/load",
        reader=model_reader(LoadInfo),
        idempotent=True,
        dev_route=False,
        doc="GET /load: how many requests are in flight on the server's GPU routes.",
        answer=LoadInfo,
        cli=Cli(topic="server"),
    ),
    Route(
        name="tokenizer_info",
        method="GET",
        path="/tokenizer_info",
        reader=model_reader(TokenizerInfo),
        idempotent=True,
        dev_route=False,
        doc="GET /tokenizer_info: the tokenizer's configuration (Python, --enable-tokenizer-info-endpoint).",
        answer=TokenizerInfo,
        cli=Cli(topic="server"),
    ),
    Route(
        name="server_info",
        method="GET",
        path="/server_info",
        reader=model_reader(ServerInfo),
        idempotent=True,
        doc="GET /server_info: the server's configuration and environment.",
        answer=ServerInfo,
        params=(
            Param(
                name="config_format",
                send="query",
                check=_config_format,
                type=Literal["text", "json"],
                default="json",
                positional=True,
                help='"json" for a dict, "text" for the config\'s text form.',
            ),
        ),
        cli=Cli(topic="server", render=_pretty),
    ),
    Route(
        name="kv_event_sources",
        method="GET",
        path="/kv_event_sources",
        reader=read_kv_event_sources,
        idempotent=True,
        dev_route=False,
        doc="GET /kv_event_sources: where each data-parallel rank publishes KV-cache events.",
        answer=dict[int, KVEventSource],
        cli=Cli(topic="server", render=_sources),
    ),
    Route(
        name="get_world_size",
        method="GET",
        path="/get_world_size",
        reader=field_reader("world_size", int),
        idempotent=True,
        doc="GET /get_world_size: the number of workers.",
        answer=int,
        params=(
            Param(
                name="include_dp",
                send="query",
                check=check.flag,
                type=bool,
                default=True,
                help="Count data-parallel ranks too (TP x PP x DP); else TP x PP.",
            ),
        ),
        cli=Cli(topic="server"),
    ),
)
