"""One record per route: what `make generate` writes the route methods of both clients, the raw-response
table and both fleets' tables from, and what the command line builds each command, its help and its JSON
`result` schema from (see `records.py`).

Adding a route: its builder in `endpoints.py` (and its reader in `answers.py`, its model in `models.py`
when none fits), its record here, `make generate`, and one scenario in `testing/scenarios/` (a test fails
while a record has none).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from . import endpoints
from .metrics import MetricsSnapshot
from .models import (
    AbortRequestsResult,
    KVEventSource,
    LoadInfo,
    MessageResult,
    ModelList,
    ResetPrefixCacheResult,
    ServerInfo,
    SleepResult,
    StatusResult,
    TokenizerInfo,
    VersionInfo,
    WakeUpResult,
    WeightCheckResult,
    WeightInfo,
    WeightVersionResult,
)
from .records import Cli, Param, Route

__all__ = ["ROUTES"]

_MODE = Literal["abort", "wait", "keep"]
_MODE_HELP = (
    "What happens to requests in flight: abort (they end now, finish reason abort), wait (the call returns "
    "once they have finished) or keep (they are frozen, and go on at resume)."
)


# ---- how some answers read, and which count as failures ------------------------------------------------


def _version(value: VersionInfo) -> str:
    if value.rust_frontend_version:
        return f"vllm {value.version} (rust frontend {value.rust_frontend_version})"
    return f"vllm {value.version} (python frontend)"


def _models(value: ModelList) -> str:
    return ", ".join(m.id for m in value.data) or "(none)"


def _sources(value: dict[int, KVEventSource]) -> str:
    lines = [f"rank {rank}: {src.endpoint} replay={src.replay_endpoint}" for rank, src in value.items()]
    return "\n".join(lines) or "(none: KV events are off)"


def _reset(value: ResetPrefixCacheResult) -> str:
    if value.success is None:
        return "done (this server cannot say whether the cache was reset)"
    return f"success={str(value.success).lower()}"


def _reset_refused(value: ResetPrefixCacheResult, given: Mapping[str, Any]) -> str | None:
    if value.success is False:
        return (
            "success=false: the engine still holds blocks (running requests or in-flight offload stores); "
            "retry with `barrier`"
        )
    return None


def _still_asleep(value: WakeUpResult, given: Mapping[str, Any]) -> str | None:
    # A partial wake (some tags) leaves the engine asleep on purpose.
    if not given.get("tags") and value.awake is False:
        return f"still sleeping after wake_up (status {value.status!r})"
    return None


def _version_refused(value: WeightVersionResult, given: Mapping[str, Any]) -> str | None:
    return "success=false" if value.success is False else None


def _pretty(value: ServerInfo) -> str:
    return json.dumps(value.model_dump(mode="json"), indent=2)


# ---- the routes ----------------------------------------------------------------------------------------

ROUTES: tuple[Route, ...] = (
    Route(
        name="health",
        doc="GET /health: True when the engine is alive; EngineDeadError (503) when it is dead.",
        answer=bool,
        endpoint=endpoints.health,
        cli=Cli(topic="server", render=lambda value: "ok"),
    ),
    Route(
        name="version",
        doc="GET /version: the vLLM version, and (`.frontend`) which frontend serves it.",
        answer=VersionInfo,
        endpoint=endpoints.version,
        cli=Cli(topic="server", render=_version),
    ),
    Route(
        name="models",
        doc="GET /v1/models: the served models (needs the api_key when the server has one).",
        answer=ModelList,
        endpoint=endpoints.models,
        cli=Cli(topic="server", render=_models),
    ),
    Route(
        name="metrics_text",
        doc="GET /metrics: the Prometheus (Python) or OpenMetrics (Rust) text.",
        answer=str,
        endpoint=endpoints.metrics_text,
        cli=Cli(topic="server", render=lambda value: value.rstrip("\n")),
    ),
    Route(
        name="metrics",
        doc='GET /metrics as a typed snapshot: prefix-cache and KV-offload counters (the "metrics" extra).',
        answer=MetricsSnapshot,
        endpoint=endpoints.metrics,
        cli=Cli(topic="server"),
    ),
    Route(
        name="load",
        doc="GET /load: how many requests are in flight on the server's GPU routes.",
        answer=LoadInfo,
        endpoint=endpoints.load,
        cli=Cli(topic="server"),
    ),
    Route(
        name="tokenizer_info",
        doc="GET /tokenizer_info: the tokenizer's configuration (Python, --enable-tokenizer-info-endpoint).",
        answer=TokenizerInfo,
        endpoint=endpoints.tokenizer_info,
        cli=Cli(topic="server"),
    ),
    Route(
        name="reset_prefix_cache",
        doc="POST /reset_prefix_cache once; `.success` False while blocks are held (see the barrier).",
        answer=ResetPrefixCacheResult,
        params=(
            Param(
                name="reset_running_requests",
                type=bool,
                default=False,
                help="Preempt running requests first, so their blocks can be freed.",
            ),
            Param(
                name="reset_external",
                type=bool,
                default=False,
                help="Also reset the connector's tier (e.g. the CPU offload cache).",
            ),
        ),
        endpoint=endpoints.reset_prefix_cache,
        cli=Cli(topic="cache", render=_reset, verdict=_reset_refused),
    ),
    Route(
        name="reset_mm_cache",
        doc="POST /reset_mm_cache: drop the multimodal cache.",
        answer=None,
        endpoint=endpoints.reset_mm_cache,
        cli=Cli(topic="cache"),
    ),
    Route(
        name="reset_encoder_cache",
        doc="POST /reset_encoder_cache: drop the encoder cache.",
        answer=None,
        endpoint=endpoints.reset_encoder_cache,
        cli=Cli(topic="cache"),
    ),
    Route(
        name="release_kv_cache_memory",
        doc="POST /release_kv_cache_memory: free the KV cache's GPU memory (never resent).",
        answer=StatusResult,
        endpoint=endpoints.release_kv_cache_memory,
        cli=Cli(topic="cache"),
    ),
    Route(
        name="sleep",
        doc="POST /sleep: put the engine to sleep (level 2 has no HTTP timeout by default).",
        answer=SleepResult,
        params=(
            Param(
                name="level",
                type=int,
                default=1,
                positional=True,
                choices=(0, 1, 2),
                help="0 pauses, 1 offloads the weights, 2 discards them.",
            ),
            Param(name="mode", type=_MODE, default="abort", help=_MODE_HELP),
        ),
        endpoint=endpoints.sleep,
        cli=Cli(topic="sleep"),
    ),
    Route(
        name="wake_up",
        doc="POST /wake_up; `.awake` is False on a partial wake (no HTTP timeout by default).",
        answer=WakeUpResult,
        params=(
            Param(
                name="tags",
                type=Sequence[str] | None,
                default=None,
                positional=True,
                option="--tag",
                help='What to wake (e.g. ["weights"], then ["kv_cache"]); None: everything.',
            ),
        ),
        endpoint=endpoints.wake_up,
        cli=Cli(topic="sleep", verdict=_still_asleep),
    ),
    Route(
        name="is_sleeping",
        doc="GET /is_sleeping.",
        answer=bool,
        endpoint=endpoints.is_sleeping,
        cli=Cli(topic="sleep"),
    ),
    Route(
        name="pause",
        doc="POST /pause: stop scheduling (for a weight update); see also the paused() flow.",
        answer=StatusResult,
        params=(
            Param(name="mode", type=_MODE, default="abort", positional=True, help=_MODE_HELP),
            Param(
                name="clear_cache",
                type=bool | None,
                default=None,
                help="Also clear the caches (server default when None).",
            ),
        ),
        endpoint=endpoints.pause,
        cli=Cli(
            topic="pause",
            fleet_params=(
                Param(
                    name="rollback",
                    type=bool,
                    default=False,
                    help="If some targets fail, resume the ones that were paused.",
                ),
            ),
        ),
    ),
    Route(
        name="resume",
        doc="POST /resume: schedule again after pause().",
        answer=StatusResult,
        endpoint=endpoints.resume,
        cli=Cli(topic="pause"),
    ),
    Route(
        name="is_paused",
        doc="GET /is_paused.",
        answer=bool,
        endpoint=endpoints.is_paused,
        cli=Cli(topic="pause"),
    ),
    Route(
        name="abort_requests",
        doc="POST /abort_requests (aborting all is never resent).",
        answer=AbortRequestsResult,
        params=(
            Param(
                name="request_ids",
                type=Iterable[str] | None,
                default=None,
                positional=True,
                argument=True,
                none_flag=("--all", "Abort every request in flight (instead of REQUEST_IDS)."),
                help="The ids to abort; None: every request in flight.",
            ),
        ),
        endpoint=endpoints.abort_requests,
        cli=Cli(topic="pause"),
    ),
    Route(
        name="collective_rpc",
        doc=(
            "POST /collective_rpc: a method on every worker, one result each (never resent, no HTTP timeout)."
        ),
        answer=list[Any],
        params=(
            Param(name="method", type=str, positional=True, help="The worker method's name."),
            Param(name="args", type=Sequence[Any], default=(), help="Positional arguments, a JSON list."),
            Param(
                name="kwargs",
                type=Mapping[str, Any] | None,
                default=None,
                help="Keyword arguments, a JSON object.",
            ),
            Param(
                name="rpc_timeout",
                type=float | None,
                default=None,
                help="Seconds the workers get for the call (engine side; the HTTP timeout ends the try).",
            ),
        ),
        endpoint=endpoints.collective_rpc,
        cli=Cli(topic="engine"),
    ),
    Route(
        name="server_info",
        doc="GET /server_info: the server's configuration and environment.",
        answer=ServerInfo,
        params=(
            Param(
                name="config_format",
                type=Literal["text", "json"],
                default="json",
                positional=True,
                help='"json" for a dict, "text" for the config\'s text form.',
            ),
        ),
        endpoint=endpoints.server_info,
        cli=Cli(topic="server", render=_pretty),
    ),
    Route(
        name="kv_event_sources",
        doc="GET /kv_event_sources: where each data-parallel rank publishes KV-cache events.",
        answer=dict[int, KVEventSource],
        endpoint=endpoints.kv_event_sources,
        cli=Cli(topic="server", render=_sources),
    ),
    Route(
        name="get_world_size",
        doc="GET /get_world_size: the number of workers.",
        answer=int,
        params=(
            Param(
                name="include_dp",
                type=bool,
                default=True,
                help="Count data-parallel ranks too (TP x PP x DP); else TP x PP.",
            ),
        ),
        endpoint=endpoints.get_world_size,
        cli=Cli(topic="server"),
    ),
    Route(
        name="init_weight_transfer_engine",
        doc="POST /init_weight_transfer_engine (never resent; no HTTP timeout by default).",
        answer=MessageResult,
        params=(
            Param(
                name="init_info",
                type=Mapping[str, Any],
                positional=True,
                help="The transfer backend's settings (JSON), e.g. NCCL master address and ranks.",
            ),
        ),
        endpoint=endpoints.init_weight_transfer_engine,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="start_weight_update",
        doc="POST /start_weight_update (never resent); see also the weight_update() flow.",
        answer=MessageResult,
        endpoint=endpoints.start_weight_update,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="start_draft_weight_update",
        doc="POST /start_draft_weight_update: begin updating the draft (speculative) model's weights.",
        answer=MessageResult,
        endpoint=endpoints.start_draft_weight_update,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="update_weights",
        doc="POST /update_weights: receive one batch of weights (never resent; no HTTP timeout by default).",
        answer=MessageResult,
        params=(
            Param(
                name="update_info",
                type=Mapping[str, Any] | Sequence[Mapping[str, Any]],
                positional=True,
                help="Names, dtypes and shapes of the tensors (JSON), or one such object per worker; CUDA "
                "IPC handles under ipc_handles travel pickled, as vLLM's HTTP client sends them.",
            ),
        ),
        endpoint=endpoints.update_weights,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="finish_weight_update",
        doc="POST /finish_weight_update (never resent).",
        answer=MessageResult,
        params=(
            Param(
                name="weight_version",
                type=str | None,
                default=None,
                help="The version the new weights carry.",
            ),
        ),
        endpoint=endpoints.finish_weight_update,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="update_weight_version",
        doc="POST /update_weight_version.",
        answer=WeightVersionResult,
        params=(Param(name="new_version", type=str, positional=True, help="The version string to set."),),
        endpoint=endpoints.update_weight_version,
        cli=Cli(topic="weights", verdict=_version_refused),
    ),
    Route(
        name="weight_info",
        doc="GET /weight_info: the weight version the server holds.",
        answer=WeightInfo,
        endpoint=endpoints.weight_info,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="weight_checker",
        doc="POST /weight_checker: checksum the weights, compare them with a baseline, or reset them.",
        answer=WeightCheckResult,
        params=(
            Param(
                name="action",
                type=Literal["checksum", "reset", "compare"],
                positional=True,
                help='"checksum", "compare" (needs baseline) or "reset" (never resent).',
            ),
            Param(
                name="baseline",
                type=Mapping[str, str] | None,
                default=None,
                help='The checksums of an earlier "checksum", for "compare".',
            ),
        ),
        endpoint=endpoints.weight_checker,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="shutdown_weight_transfer_engine",
        doc="POST /shutdown_weight_transfer_engine (never resent).",
        answer=MessageResult,
        endpoint=endpoints.shutdown_weight_transfer_engine,
        cli=Cli(topic="weights"),
    ),
    Route(
        name="load_lora_adapter",
        doc="POST /v1/load_lora_adapter (needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 and --enable-lora).",
        answer=MessageResult,
        params=(
            Param(name="lora_name", type=str, positional=True, help="The name requests will use."),
            Param(name="lora_path", type=str, positional=True, help="Where the adapter is, on the server."),
            Param(
                name="load_inplace",
                type=bool,
                default=False,
                help="Replace an adapter of the same name in place.",
            ),
            Param(
                name="is_3d_lora_weight",
                type=bool,
                default=False,
                help="The adapter's weights are 3-D (MoE experts).",
            ),
        ),
        endpoint=endpoints.load_lora_adapter,
        cli=Cli(topic="lora"),
    ),
    Route(
        name="unload_lora_adapter",
        doc="POST /v1/unload_lora_adapter.",
        answer=MessageResult,
        params=(
            Param(name="lora_name", type=str, positional=True, help="The adapter's name."),
            Param(
                name="lora_int_id",
                type=int | None,
                default=None,
                help="Its numeric id, when the name is ambiguous.",
            ),
        ),
        endpoint=endpoints.unload_lora_adapter,
        cli=Cli(topic="lora"),
    ),
    Route(
        name="start_profile",
        doc="POST /start_profile (a server started with --profiler-config); 409 while one runs.",
        answer=None,
        params=(
            Param(name="profile_prefix", type=str | None, default=None, help="A prefix for the trace files."),
            Param(
                name="delay_iterations",
                type=int | None,
                default=None,
                help="Engine steps to skip before recording.",
            ),
            Param(
                name="max_iterations", type=int | None, default=None, help="Engine steps to record at most."
            ),
        ),
        endpoint=endpoints.start_profile,
        cli=Cli(topic="engine"),
    ),
    Route(
        name="stop_profile",
        doc="POST /stop_profile: stop and write the trace (no HTTP timeout by default).",
        answer=None,
        endpoint=endpoints.stop_profile,
        cli=Cli(topic="engine"),
    ),
)
