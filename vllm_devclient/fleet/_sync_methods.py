# Generated from vllm_devclient/routes/ and calls.py by scripts/generate.py; do not edit.
"""The methods of Fleet that fan a client method out to every target (its signature, its docstring)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from typing_extensions import Unpack

from .._base_client import RequestOptions
from ..models import (
    AbortRequestsResult,
    BarrierResult,
    Completion,
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
from .results import FleetResult

if TYPE_CHECKING:
    import httpx

    from ..metrics import MetricsSnapshot
    from ..reset_check import VerifiedReset
    from .async_fleet import AsyncFleet

__all__ = ["_FleetMethods"]

T = TypeVar("T")


class _FleetMethods:
    """Every client method on every target of the Fleet (generated from the records)."""

    if TYPE_CHECKING:
        _fleet: AsyncFleet

        def _run(self, coro: Coroutine[Any, Any, T]) -> T: ...

    def health(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /health: True when the engine is alive; EngineDeadError (503) when it is dead.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.health(**options))

    def version(self, **options: Unpack[RequestOptions]) -> FleetResult[VersionInfo]:
        """GET /version: the vLLM version, and (`.frontend`) which frontend serves it.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.version(**options))

    def models(self, **options: Unpack[RequestOptions]) -> FleetResult[ModelList]:
        """GET /v1/models: the served models (needs the api_key when the server has one).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.models(**options))

    def metrics_text(self, **options: Unpack[RequestOptions]) -> FleetResult[str]:
        """GET /metrics: the Prometheus (Python) or OpenMetrics (Rust) text.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.metrics_text(**options))

    def metrics(self, **options: Unpack[RequestOptions]) -> FleetResult[MetricsSnapshot]:
        """GET /metrics as a typed snapshot: prefix-cache and KV-offload counters (the "metrics" extra).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.metrics(**options))

    def load(self, **options: Unpack[RequestOptions]) -> FleetResult[LoadInfo]:
        """GET /load: how many requests are in flight on the server's GPU routes.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.load(**options))

    def tokenizer_info(self, **options: Unpack[RequestOptions]) -> FleetResult[TokenizerInfo]:
        """GET /tokenizer_info: the tokenizer's configuration (Python, --enable-tokenizer-info-endpoint).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.tokenizer_info(**options))

    def server_info(
        self, config_format: Literal["text", "json"] = "json", **options: Unpack[RequestOptions]
    ) -> FleetResult[ServerInfo]:
        """GET /server_info: the server's configuration and environment.

        Args:
            config_format: "json" for a dict, "text" for the config's text form.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.server_info(config_format=config_format, **options))

    def kv_event_sources(self, **options: Unpack[RequestOptions]) -> FleetResult[dict[int, KVEventSource]]:
        """GET /kv_event_sources: where each data-parallel rank publishes KV-cache events.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.kv_event_sources(**options))

    def get_world_size(
        self, *, include_dp: bool = True, **options: Unpack[RequestOptions]
    ) -> FleetResult[int]:
        """GET /get_world_size: the number of workers.

        Args:
            include_dp: count data-parallel ranks too (TP x PP x DP); else TP x PP.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.get_world_size(include_dp=include_dp, **options))

    def reset_prefix_cache(
        self,
        *,
        reset_running_requests: bool = False,
        reset_external: bool = False,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[ResetPrefixCacheResult]:
        """POST /reset_prefix_cache once; `.success` False while blocks are held (see the barrier).

        Args:
            reset_running_requests: preempt running requests first, so their blocks can be freed.
            reset_external: also reset the connector's tier (e.g. the CPU offload cache).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(
            self._fleet.reset_prefix_cache(
                reset_running_requests=reset_running_requests, reset_external=reset_external, **options
            )
        )

    def reset_mm_cache(self, **options: Unpack[RequestOptions]) -> FleetResult[None]:
        """POST /reset_mm_cache: drop the multimodal cache.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.reset_mm_cache(**options))

    def reset_encoder_cache(self, **options: Unpack[RequestOptions]) -> FleetResult[None]:
        """POST /reset_encoder_cache: drop the encoder cache.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.reset_encoder_cache(**options))

    def release_kv_cache_memory(self, **options: Unpack[RequestOptions]) -> FleetResult[KVCacheReleaseResult]:
        """POST /release_kv_cache_memory: free the KV cache's GPU memory (never resent).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.release_kv_cache_memory(**options))

    def sleep(
        self,
        level: int = 1,
        *,
        mode: Literal["abort", "wait", "keep"] = "abort",
        **options: Unpack[RequestOptions],
    ) -> FleetResult[SleepResult]:
        """POST /sleep: put the engine to sleep (level 2 has no HTTP timeout by default).

        Args:
            level: 0 pauses, 1 offloads the weights, 2 discards them.
            mode: what happens to requests in flight: abort (they end now, finish reason abort), wait (the
                call returns once they have finished) or keep (they are frozen, and go on at resume).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.sleep(level=level, mode=mode, **options))

    def wake_up(
        self, tags: Sequence[str] | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[WakeUpResult]:
        """POST /wake_up; `.awake` is False on a partial wake (no HTTP timeout by default).

        Args:
            tags: what to wake (e.g. ["weights"], then ["kv_cache"]); None: everything.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.wake_up(tags=tags, **options))

    def is_sleeping(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /is_sleeping.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.is_sleeping(**options))

    def resume(self, **options: Unpack[RequestOptions]) -> FleetResult[StatusResult]:
        """POST /resume: schedule again after pause().

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.resume(**options))

    def is_paused(self, **options: Unpack[RequestOptions]) -> FleetResult[bool]:
        """GET /is_paused.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.is_paused(**options))

    def abort_requests(
        self, request_ids: Iterable[str] | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[AbortRequestsResult]:
        """POST /abort_requests (aborting all is never resent).

        Args:
            request_ids: the ids to abort; None: every request in flight.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.abort_requests(request_ids=request_ids, **options))

    def collective_rpc(
        self,
        method: str,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        rpc_timeout: float | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[list[Any]]:
        """POST /collective_rpc: a method on every worker, one result each (never resent, no HTTP timeout).

        Args:
            method: the worker method's name.
            args: positional arguments, a JSON list.
            kwargs: keyword arguments, a JSON object.
            rpc_timeout: seconds the workers get for the call (engine side; the HTTP timeout ends the try).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(
            self._fleet.collective_rpc(
                method=method, args=args, kwargs=kwargs, rpc_timeout=rpc_timeout, **options
            )
        )

    def start_profile(
        self,
        *,
        profile_prefix: str | None = None,
        delay_iterations: int | None = None,
        max_iterations: int | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[None]:
        """POST /start_profile (a server started with --profiler-config); 409 while one runs.

        Args:
            profile_prefix: a prefix for the trace files.
            delay_iterations: engine steps to skip before recording.
            max_iterations: engine steps to record at most.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(
            self._fleet.start_profile(
                profile_prefix=profile_prefix,
                delay_iterations=delay_iterations,
                max_iterations=max_iterations,
                **options,
            )
        )

    def stop_profile(self, **options: Unpack[RequestOptions]) -> FleetResult[None]:
        """POST /stop_profile: stop and write the trace (no HTTP timeout by default).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.stop_profile(**options))

    def init_weight_transfer_engine(
        self, init_info: Mapping[str, Any], **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /init_weight_transfer_engine (never resent; no HTTP timeout by default).

        Args:
            init_info: the transfer backend's settings (JSON), e.g. NCCL master address and ranks.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.init_weight_transfer_engine(init_info=init_info, **options))

    def start_weight_update(self, **options: Unpack[RequestOptions]) -> FleetResult[MessageResult]:
        """POST /start_weight_update (never resent); see also the weight_update() flow.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.start_weight_update(**options))

    def start_draft_weight_update(self, **options: Unpack[RequestOptions]) -> FleetResult[MessageResult]:
        """POST /start_draft_weight_update: begin updating the draft (speculative) model's weights.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.start_draft_weight_update(**options))

    def update_weights(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /update_weights: receive one batch of weights (never resent; no HTTP timeout by default).

        Args:
            update_info: names, dtypes and shapes of the tensors (JSON), or one such object per worker; CUDA
                IPC handles under ipc_handles travel pickled, as vLLM's HTTP client sends them.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.update_weights(update_info=update_info, **options))

    def finish_weight_update(
        self, *, weight_version: str | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /finish_weight_update (never resent).

        Args:
            weight_version: the version the new weights carry.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.finish_weight_update(weight_version=weight_version, **options))

    def update_weight_version(
        self, new_version: str, **options: Unpack[RequestOptions]
    ) -> FleetResult[WeightVersionResult]:
        """POST /update_weight_version.

        Args:
            new_version: the version string to set.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.update_weight_version(new_version=new_version, **options))

    def weight_info(self, **options: Unpack[RequestOptions]) -> FleetResult[WeightInfo]:
        """GET /weight_info: the weight version the server holds.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.weight_info(**options))

    def weight_checker(
        self,
        action: Literal["checksum", "reset", "compare"],
        *,
        baseline: Mapping[str, str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[WeightCheckResult]:
        """POST /weight_checker: checksum the weights, compare them with a baseline, or reset them.

        Args:
            action: "checksum", "compare" (needs baseline) or "reset" (never resent).
            baseline: the checksums of an earlier "checksum", for "compare".

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.weight_checker(action=action, baseline=baseline, **options))

    def shutdown_weight_transfer_engine(
        self, **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /shutdown_weight_transfer_engine (never resent).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.shutdown_weight_transfer_engine(**options))

    def load_lora_adapter(
        self,
        lora_name: str,
        lora_path: str,
        *,
        load_inplace: bool = False,
        is_3d_lora_weight: bool = False,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[MessageResult]:
        """POST /v1/load_lora_adapter (needs VLLM_ALLOW_RUNTIME_LORA_UPDATING=1 and --enable-lora).

        Args:
            lora_name: the name requests will use.
            lora_path: where the adapter is, on the server.
            load_inplace: replace an adapter of the same name in place.
            is_3d_lora_weight: the adapter's weights are 3-D (MoE experts).

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(
            self._fleet.load_lora_adapter(
                lora_name=lora_name,
                lora_path=lora_path,
                load_inplace=load_inplace,
                is_3d_lora_weight=is_3d_lora_weight,
                **options,
            )
        )

    def unload_lora_adapter(
        self, lora_name: str, *, lora_int_id: int | None = None, **options: Unpack[RequestOptions]
    ) -> FleetResult[MessageResult]:
        """POST /v1/unload_lora_adapter.

        Args:
            lora_name: the adapter's name.
            lora_int_id: its numeric id, when the name is ambiguous.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(
            self._fleet.unload_lora_adapter(lora_name=lora_name, lora_int_id=lora_int_id, **options)
        )

    def reset_prefix_cache_until_success(
        self,
        *,
        deadline: float = 60.0,
        request_timeout: float = 10.0,
        reset_external: bool = False,
        reset_running_requests: bool = False,
        step_engine: bool = True,
        interval: float = 0.02,
        max_interval: float = 1.0,
        on_attempt: Callable[[int, object], None] | None = None,
    ) -> FleetResult[BarrierResult]:
        """The offload barrier: reset the prefix cache until it succeeds, stepping the engine between tries.

        Args:
            deadline: seconds for the whole barrier.
            request_timeout: seconds for each try.
            reset_external: also reset the connector's tier (default False: keep the CPU tier).
            reset_running_requests: preempt running requests so their blocks can be freed.
            step_engine: send a 1-token completion between tries, so finished blocks are released.
            interval: first pause between tries (doubling up to max_interval).
            max_interval: longest pause between tries.
            on_attempt: called after each try with (attempt number, its answer or error).

        On every target at once: a FleetResult holds each target's answer or error.
        The deadline is one moment for all targets.
        """
        return self._run(
            self._fleet.reset_prefix_cache_until_success(
                deadline=deadline,
                request_timeout=request_timeout,
                reset_external=reset_external,
                reset_running_requests=reset_running_requests,
                step_engine=step_engine,
                interval=interval,
                max_interval=max_interval,
                on_attempt=on_attempt,
            )
        )

    def reset_prefix_cache_verified(
        self,
        probe: str | Sequence[int],
        *,
        reset_external: bool = False,
        reset_running_requests: bool = False,
        deadline: float = 5.0,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[VerifiedReset]:
        """Reset the prefix cache, then check that every tier asked to clear serves nothing (opt-in).

        Args:
            probe: a prompt the cache held before the reset (text or token ids).
            reset_external: also reset, and check, the connector's tier.
            reset_running_requests: preempt running requests so their blocks can be freed.
            deadline: seconds to wait for /metrics to count the probe.

        On every target at once: a FleetResult holds each target's answer or error.
        The deadline is one moment for all targets.
        """
        return self._run(
            self._fleet.reset_prefix_cache_verified(
                probe=probe,
                reset_external=reset_external,
                reset_running_requests=reset_running_requests,
                deadline=deadline,
                **options,
            )
        )

    def wait_until_ready(
        self, *, deadline: float = 120.0, request_timeout: float = 1.0, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /health until it answers 200; EngineDeadError at once when the engine is dead.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try.
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult holds each target's answer or error.
        The deadline is one moment for all targets.
        """
        return self._run(
            self._fleet.wait_until_ready(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_sleeping(
        self, *, deadline: float = 60.0, request_timeout: float = 5.0, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_sleeping until true (a 200 from /sleep does not prove the engine sleeps).

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try.
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult holds each target's answer or error.
        The deadline is one moment for all targets.
        """
        return self._run(
            self._fleet.wait_until_sleeping(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_awake(
        self, *, deadline: float = 60.0, request_timeout: float = 5.0, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_sleeping until false.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try.
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult holds each target's answer or error.
        The deadline is one moment for all targets.
        """
        return self._run(
            self._fleet.wait_until_awake(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_paused(
        self, *, deadline: float = 60.0, request_timeout: float = 5.0, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_paused until true.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try.
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult holds each target's answer or error.
        The deadline is one moment for all targets.
        """
        return self._run(
            self._fleet.wait_until_paused(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def wait_until_resumed(
        self, *, deadline: float = 60.0, request_timeout: float = 5.0, interval: float = 0.05
    ) -> FleetResult[None]:
        """Poll /is_paused until false.

        Args:
            deadline: seconds the whole wait may take.
            request_timeout: seconds for each try.
            interval: seconds between the first tries (doubling up to 1 s).

        On every target at once: a FleetResult holds each target's answer or error.
        The deadline is one moment for all targets.
        """
        return self._run(
            self._fleet.wait_until_resumed(
                deadline=deadline, request_timeout=request_timeout, interval=interval
            )
        )

    def completion(
        self,
        prompt: str | Sequence[int],
        *,
        model: str | None = None,
        max_tokens: int = 16,
        temperature: float = 0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[Completion]:
        """POST /v1/completions, greedy by default (never resent: it would run twice).

        Args:
            prompt: the prompt text, or its token ids.
            model: the model name; default the client's, else the first on /v1/models.
            max_tokens: tokens to generate.
            temperature: sampling temperature (0: greedy).
            seed: sampling seed.
            stop: stop strings.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(
            self._fleet.completion(
                prompt=prompt,
                model=model,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=stop,
                **options,
            )
        )

    def step_engine(self, **options: Unpack[RequestOptions]) -> FleetResult[str]:
        """Send a 1-token greedy completion (prompt "0") so the engine runs a step; returns its text.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.step_engine(**options))

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        json: Any = None,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[httpx.Response]:
        """Any request, with this client's auth, timeouts and typed errors (a non-2xx raises).

        Args:
            method: the HTTP method.
            path: the path, starting with "/" (no query: pass params).
            params: query parameters; booleans go out as true/false.
            json: a JSON body.

        On every target at once: a FleetResult holds each target's answer or error.
        """
        return self._run(self._fleet.request(method=method, path=path, params=params, json=json, **options))
