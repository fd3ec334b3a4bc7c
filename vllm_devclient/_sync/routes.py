# Generated from vllm_devclient/_async/routes.py by scripts/unasync.py; do not edit.
# (That file is generated from vllm_devclient/routes/.)
"""The route methods of a client: one HTTP exchange each, built from its record."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import Unpack

from .._base_client import RequestOptions
from ..endpoints import Endpoint
from ..models import (
    AbortRequestsResult,
    CheckpointStatus,
    FaultToleranceAccepted,
    KVCacheReleaseResult,
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
from ..routes import endpoint
from .core import _SyncCore

if TYPE_CHECKING:
    from ..metrics import MetricsSnapshot

__all__ = ["_SyncRoutes"]


class _SyncRoutes(_SyncCore):
    """Every route, one method each (generated from `vllm_devclient/routes/`)."""

    def health(self, **options: Unpack[RequestOptions]) -> bool:
        """GET /health: True when the engine is alive; EngineDeadError (503) when it is dead."""
        ep: Endpoint[bool] = endpoint("health")
        return self._send(ep, options)

    def version(self, **options: Unpack[RequestOptions]) -> VersionInfo:
        """GET /version: the vLLM version, and (`.frontend`) which frontend serves it."""
        ep: Endpoint[VersionInfo] = endpoint("version")
        return self._send(ep, options)

    def models(self, **options: Unpack[RequestOptions]) -> ModelList:
        """GET /v1/models: the served models (needs the api_key when the server has one)."""
        ep: Endpoint[ModelList] = endpoint("models")
        return self._send(ep, options)

    def metrics_text(self, **options: Unpack[RequestOptions]) -> str:
        """GET /metrics: the Prometheus (Python) or OpenMetrics (Rust) text."""
        ep: Endpoint[str] = endpoint("metrics_text")
        return self._send(ep, options)

    def metrics(self, **options: Unpack[RequestOptions]) -> MetricsSnapshot:
        """GET /metrics as a typed snapshot: prefix-cache and KV-offload counters (the "metrics" extra)."""
        ep: Endpoint[MetricsSnapshot] = endpoint("metrics")
        return self._send(ep, options)

    def load(self, **options: Unpack[RequestOptions]) -> LoadInfo:
        """GET /load: how many requests are in flight on the server's GPU routes."""
        ep: Endpoint[LoadInfo] = endpoint("load")
        return self._send(ep, options)

    def tokenizer_info(self, **options: Unpack[RequestOptions]) -> TokenizerInfo:
        """GET /tokenizer_info: the tokenizer's configuration (Python, --enable-tokenizer-info-endpoint)."""
        ep: Endpoint[TokenizerInfo] = endpoint("tokenizer_info")
        return self._send(ep, options)

    def server_info(
        self, config_format: Literal["text", "json"] = "json", **options: Unpack[RequestOptions]
    ) -> ServerInfo:
        """GET /server_info: the server's configuration and environment.

        Args:
            config_format: "json" for a dict, "text" for the config's text form.
        """
        ep: Endpoint[ServerInfo] = endpoint("server_info", config_format=config_format)
        return self._send(ep, options)

    def kv_event_sources(self, **options: Unpack[RequestOptions]) -> dict[int, KVEventSource]:
        """GET /kv_event_sources: where each data-parallel rank publishes KV-cache events."""
        ep: Endpoint[dict[int, KVEventSource]] = endpoint("kv_event_sources")
        return self._send(ep, options)

    def get_world_size(self, *, include_dp: bool = True, **options: Unpack[RequestOptions]) -> int:
        """GET /get_world_size: the number of workers.

        Args:
            include_dp: count data-parallel ranks too (TP x PP x DP); else TP x PP.
        """
        ep: Endpoint[int] = endpoint("get_world_size", include_dp=include_dp)
        return self._send(ep, options)

    def reset_prefix_cache(
        self,
        *,
        reset_running_requests: bool = False,
        reset_external: bool = False,
        **options: Unpack[RequestOptions],
    ) -> ResetPrefixCacheResult:
        """POST /reset_prefix_cache once; `.success` False while blocks are held (see the barrier).

        Args:
            reset_running_requests: preempt running requests first, so their blocks can be freed.
            reset_external: also reset the connector's tier (e.g. the CPU offload cache).
        """
        ep: Endpoint[ResetPrefixCacheResult] = endpoint(
            "reset_prefix_cache", reset_running_requests=reset_running_requests, reset_external=reset_external
        )
        return self._send(ep, options)

    def reset_mm_cache(self, **options: Unpack[RequestOptions]) -> None:
        """POST /reset_mm_cache: drop the multimodal cache."""
        ep: Endpoint[None] = endpoint("reset_mm_cache")
        return self._send(ep, options)

    def reset_encoder_cache(self, **options: Unpack[RequestOptions]) -> None:
        """POST /reset_encoder_cache: drop the encoder cache."""
        ep: Endpoint[None] = endpoint("reset_encoder_cache")
        return self._send(ep, options)

    def release_kv_cache_memory(
        self, *, reset_connector: bool | None = None, **options: Unpack[RequestOptions]
    ) -> KVCacheReleaseResult:
        """POST /release_kv_cache_memory: free the KV cache's GPU memory (never resent).

        Args:
            reset_connector: false keeps the KV connector's tier (CPU offload); None: the server's default
                (reset).
        """
        ep: Endpoint[KVCacheReleaseResult] = endpoint(
            "release_kv_cache_memory", reset_connector=reset_connector
        )
        return self._send(ep, options)

    def sleep(
        self,
        level: int = 1,
        *,
        mode: Literal["abort", "wait", "keep"] = "abort",
        reset_connector: bool | None = None,
        **options: Unpack[RequestOptions],
    ) -> SleepResult:
        """POST /sleep: put the engine to sleep (level 2 has no HTTP timeout by default).

        Args:
            level: 0 pauses, 1 offloads the weights, 2 discards them.
            mode: what happens to requests in flight: abort (they end now, finish reason abort), wait (the
                call returns once they have finished) or keep (they are frozen, and go on at resume).
            reset_connector: false keeps the KV connector's tier (CPU offload); None: the server's default
                (reset).
        """
        ep: Endpoint[SleepResult] = endpoint("sleep", level=level, mode=mode, reset_connector=reset_connector)
        return self._send(ep, options)

    def wake_up(self, tags: Sequence[str] | None = None, **options: Unpack[RequestOptions]) -> WakeUpResult:
        """POST /wake_up; `.awake` is False on a partial wake (no HTTP timeout by default).

        Args:
            tags: what to wake (e.g. ["weights"], then ["kv_cache"]); None: everything.
        """
        ep: Endpoint[WakeUpResult] = endpoint("wake_up", tags=tags)
        return self._send(ep, options)

    def is_sleeping(self, **options: Unpack[RequestOptions]) -> bool:
        """GET /is_sleeping."""
        ep: Endpoint[bool] = endpoint("is_sleeping")
        return self._send(ep, options)

    def checkpoint_prepare(
        self, mode: Literal["abort", "wait", "keep"] = "wait", **options: Unpack[RequestOptions]
    ) -> CheckpointStatus:
        """POST /checkpoint/prepare: drain, then release the KV cache (poll checkpoint_status).

        Args:
            mode: how the drain treats requests in flight: wait (they finish first), abort or keep.
        """
        ep: Endpoint[CheckpointStatus] = endpoint("checkpoint_prepare", mode=mode)
        return self._send(ep, options)

    def checkpoint_status(self, **options: Unpack[RequestOptions]) -> CheckpointStatus:
        """GET /checkpoint/status: `.prepared` once safe to capture (its 503 means not yet)."""
        ep: Endpoint[CheckpointStatus] = endpoint("checkpoint_status")
        return self._send(ep, options)

    def checkpoint_restore(self, **options: Unpack[RequestOptions]) -> CheckpointStatus:
        """POST /checkpoint/restore: bring back what preparing released, and serve (no HTTP timeout)."""
        ep: Endpoint[CheckpointStatus] = endpoint("checkpoint_restore")
        return self._send(ep, options)

    def pause(
        self,
        mode: Literal["abort", "wait", "keep"] = "abort",
        *,
        clear_cache: bool | None = None,
        **options: Unpack[RequestOptions],
    ) -> StatusResult:
        """POST /pause: stop scheduling (for a weight update); see also the paused() flow.

        Args:
            mode: what happens to requests in flight: abort (they end now, finish reason abort), wait (the
                call returns once they have finished) or keep (they are frozen, and go on at resume).
            clear_cache: also clear the caches (server default when None).
        """
        ep: Endpoint[StatusResult] = endpoint("pause", mode=mode, clear_cache=clear_cache)
        return self._send(ep, options)

    def resume(self, **options: Unpack[RequestOptions]) -> StatusResult:
        """POST /resume: schedule again after pause()."""
        ep: Endpoint[StatusResult] = endpoint("resume")
        return self._send(ep, options)

    def is_paused(self, **options: Unpack[RequestOptions]) -> bool:
        """GET /is_paused."""
        ep: Endpoint[bool] = endpoint("is_paused")
        return self._send(ep, options)

    def abort_requests(
        self, request_ids: Iterable[str] | None = None, **options: Unpack[RequestOptions]
    ) -> AbortRequestsResult:
        """POST /abort_requests (aborting all is never resent).

        Args:
            request_ids: the ids to abort; None: every request in flight.
        """
        ep: Endpoint[AbortRequestsResult] = endpoint("abort_requests", request_ids=request_ids)
        return self._send(ep, options)

    def collective_rpc(
        self,
        method: str,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        rpc_timeout: float | None = None,
        **options: Unpack[RequestOptions],
    ) -> list[Any]:
        """POST /collective_rpc: a method on every worker, one result each (never resent, no HTTP timeout).

        Args:
            method: the worker method's name.
            args: positional arguments, a JSON list.
            kwargs: keyword arguments, a JSON object.
            rpc_timeout: seconds the workers get for the call (engine side; the HTTP timeout ends the try).
        """
        ep: Endpoint[list[Any]] = endpoint(
            "collective_rpc", method=method, args=args, kwargs=kwargs, rpc_timeout=rpc_timeout
        )
        return self._send(ep, options)

    def start_profile(
        self,
        *,
        profile_prefix: str | None = None,
        delay_iterations: int | None = None,
        max_iterations: int | None = None,
        **options: Unpack[RequestOptions],
    ) -> None:
        """POST /start_profile (a server started with --profiler-config); 409 while one runs.

        Args:
            profile_prefix: a prefix for the trace files.
            delay_iterations: engine steps to skip before recording.
            max_iterations: engine steps to record at most.
        """
        ep: Endpoint[None] = endpoint(
            "start_profile",
            profile_prefix=profile_prefix,
            delay_iterations=delay_iterations,
            max_iterations=max_iterations,
        )
        return self._send(ep, options)

    def stop_profile(self, **options: Unpack[RequestOptions]) -> None:
        """POST /stop_profile: stop and write the trace (no HTTP timeout by default)."""
        ep: Endpoint[None] = endpoint("stop_profile")
        return self._send(ep, options)

    def apply_fault_tolerance(
        self,
        instruction: str,
        *,
        request_id: str,
        params: Mapping[str, Any] | None = None,
        **options: Unpack[RequestOptions],
    ) -> FaultToleranceAccepted:
        """POST /v1/fault_tolerance/apply: start a recovery round (--enable-fault-tolerance).

        Args:
            instruction: retry or scale_down.
            request_id: the round's id: the same on every engine of one recovery round.
            params: the instruction's parameters.
        """
        ep: Endpoint[FaultToleranceAccepted] = endpoint(
            "apply_fault_tolerance", instruction=instruction, request_id=request_id, params=params
        )
        return self._send(ep, options)

    def init_weight_transfer_engine(
        self, init_info: Mapping[str, Any], **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """POST /init_weight_transfer_engine (never resent; no HTTP timeout by default).

        Args:
            init_info: the transfer backend's settings (JSON), e.g. NCCL master address and ranks.
        """
        ep: Endpoint[MessageResult] = endpoint("init_weight_transfer_engine", init_info=init_info)
        return self._send(ep, options)

    def start_weight_update(self, **options: Unpack[RequestOptions]) -> MessageResult:
        """POST /start_weight_update (never resent); see also the weight_update() flow."""
        ep: Endpoint[MessageResult] = endpoint("start_weight_update")
        return self._send(ep, options)

    def start_draft_weight_update(self, **options: Unpack[RequestOptions]) -> MessageResult:
        """POST /start_draft_weight_update: begin updating the draft (speculative) model's weights."""
        ep: Endpoint[MessageResult] = endpoint("start_draft_weight_update")
        return self._send(ep, options)

    def update_weights(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """POST /update_weights: receive one batch of weights (never resent; no HTTP timeout by default).

        Args:
            update_info: names, dtypes and shapes of the tensors (JSON), or one such object per worker; CUDA
                IPC handles under ipc_handles travel pickled, as vLLM's HTTP client sends them.
        """
        ep: Endpoint[MessageResult] = endpoint("update_weights", update_info=update_info)
        return self._send(ep, options)

    def finish_weight_update(
        self, *, weight_version: str | None = None, **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """POST /finish_weight_update (never resent).

        Args:
            weight_version: the version the new weights carry.
        """
        ep: Endpoint[MessageResult] = endpoint("finish_weight_update", weight_version=weight_version)
        return self._send(ep, options)

    def update_weight_version(
        self, new_version: str, **options: Unpack[RequestOptions]
    ) -> WeightVersionResult:
        """POST /update_weight_version.

        Args:
            new_version: the version string to set.
        """
        ep: Endpoint[WeightVersionResult] = endpoint("update_weight_version", new_version=new_version)
        return self._send(ep, options)

    def weight_info(self, **options: Unpack[RequestOptions]) -> WeightInfo:
        """GET /weight_info: the weight version the server holds."""
        ep: Endpoint[WeightInfo] = endpoint("weight_info")
        return self._send(ep, options)

    def weight_checker(
        self,
        action: Literal["checksum", "reset", "compare"],
        *,
        baseline: Mapping[str, str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> WeightCheckResult:
        """POST /weight_checker: checksum the weights, compare them with a baseline, or reset them.

        Args:
            action: "checksum", "compare" (needs baseline) or "reset" (never resent).
            baseline: the checksums of an earlier "checksum", for "compare".
        """
        ep: Endpoint[WeightCheckResult] = endpoint("weight_checker", action=action, baseline=baseline)
        return self._send(ep, options)

    def shutdown_weight_transfer_engine(self, **options: Unpack[RequestOptions]) -> MessageResult:
        """POST /shutdown_weight_transfer_engine (never resent)."""
        ep: Endpoint[MessageResult] = endpoint("shutdown_weight_transfer_engine")
        return self._send(ep, options)

    def load_lora_adapter(
        self,
        lora_name: str,
        lora_path: str,
        *,
        load_inplace: bool = False,
        is_3d_lora_weight: bool = False,
        **options: Unpack[RequestOptions],
    ) -> MessageResult:
        """POST /v1/load_lora_adapter (needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 and --enable-lora).

        Args:
            lora_name: the name requests will use.
            lora_path: where the adapter is, on the server.
            load_inplace: replace an adapter of the same name in place.
            is_3d_lora_weight: the adapter's weights are 3-D (MoE experts).
        """
        ep: Endpoint[MessageResult] = endpoint(
            "load_lora_adapter",
            lora_name=lora_name,
            lora_path=lora_path,
            load_inplace=load_inplace,
            is_3d_lora_weight=is_3d_lora_weight,
        )
        return self._send(ep, options)

    def unload_lora_adapter(
        self, lora_name: str, *, lora_int_id: int | None = None, **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """POST /v1/unload_lora_adapter.

        Args:
            lora_name: the adapter's name.
            lora_int_id: its numeric id, when the name is ambiguous.
        """
        ep: Endpoint[MessageResult] = endpoint(
            "unload_lora_adapter", lora_name=lora_name, lora_int_id=lora_int_id
        )
        return self._send(ep, options)
