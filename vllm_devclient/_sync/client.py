# Generated from vllm_devclient/_async/client.py by scripts/unasync.py: do not edit, run `make generate`.
"""DevClient: the sync face of every route, wait, flow and option. Generated from `_async/client.py`.

Each method builds an `Endpoint` (what to send, how to read the answer) or an operation (`operations.py`:
retries, barrier, waits) and runs it with this client's transport. Write behaviour in those modules, not
here; after a change here run `make generate` (scripts/unasync.py) to regenerate the sync client.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, cast, overload

import httpx
from typing_extensions import Self, Unpack

from .. import arguments as check
from .. import endpoints
from .. import operations as ops
from .._base_client import (
    NOT_GIVEN,
    RAW_MODE,
    BaseClient,
    ClientConfig,
    NotGiven,
    RawResponse,
    RequestOptions,
    TimeoutArg,
    to_httpx,
)
from ..constants import (
    DEFAULT_BARRIER_DEADLINE,
    DEFAULT_BARRIER_POLL_INTERVAL,
    DEFAULT_BARRIER_REQUEST_TIMEOUT,
    DEFAULT_MAX_RETRIES,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_POLL_MAX_INTERVAL,
    DEFAULT_READY_DEADLINE,
    DEFAULT_READY_REQUEST_TIMEOUT,
    DEFAULT_TIMEOUT,
    DEFAULT_WAIT_DEADLINE,
    DEFAULT_WAIT_REQUEST_TIMEOUT,
)
from ..endpoints import Endpoint, PauseMode, WeightCheckAction
from ..errors import InvalidParameterError
from ..models import (
    AbortRequestsResult,
    BarrierResult,
    Completion,
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
from ..operations import Operation, Sleep
from ..transports import SyncTransport, TransportError, TransportKind, WireRequest, make_sync_transport
from ._support import Pending, background, result_of, sleep

if TYPE_CHECKING:
    from ..metrics import MetricsSnapshot

__all__ = ["DevClient", "RawResponses", "WeightUpdate"]

T = TypeVar("T")
P = ParamSpec("P")


def _deadline(deadline: float | NotGiven, timeout: object, default: float) -> float:
    """`deadline=`, or the deprecated `timeout=` that meant it on waits and the barrier before 0.2."""
    if timeout is NOT_GIVEN:
        return default if isinstance(deadline, NotGiven) else deadline
    if isinstance(timeout, httpx.Timeout):
        raise InvalidParameterError(
            "waits and the barrier take deadline= (seconds for the whole wait) and request_timeout= (seconds "
            "for each try), not an httpx.Timeout"
        )
    if not isinstance(deadline, NotGiven):
        raise InvalidParameterError("pass deadline= only (timeout= is its deprecated old name)")
    warnings.warn(
        "timeout= on waits and the barrier is deprecated: it is the deadline, pass deadline= (timeout= will "
        "mean the HTTP timeout of one try, as on every other method)",
        DeprecationWarning,
        stacklevel=3,
    )
    return cast(float, timeout)


class DevClient(BaseClient):
    """Synchronous client for a vLLM server's development-mode surface (either frontend).

    Args:
        base_url: the server, e.g. "http://127.0.0.1:8000" (a trailing "/v1" is accepted and dropped).
        api_key: sent as a bearer token; default $VLLM_API_KEY (surrounding whitespace dropped).
        timeout: default HTTP timeout of one try of a call, as a whole: seconds, an httpx.Timeout, or None.
            Long routes (weight transfer, collective_rpc, sleep level 2) default to no bound.
        max_retries: retries of idempotent calls after connection failures and 502/503/504.
        http_client: an httpx.Client to send with (for your own TLS, proxies or respx mocks).
        model: the served model name for completions and stepping (default: the first on /v1/models).
        default_headers: headers sent on every call.
        transport: "auto" (aiohttp, or httpx when a proxy applies) or "httpx"; default
            $VLLM_DEVCLIENT_TRANSPORT or "auto".

    One DevClient may be shared by many threads: its connection pool is locked.
    Clients pickle by their configuration (for Ray actors and worker processes).
    """

    _transport: SyncTransport

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx.Client | None = None,
        model: str | None = None,
        default_headers: Mapping[str, str] | None = None,
        transport: TransportKind | None = None,
    ) -> None:
        config = ClientConfig.of(
            base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            model=model,
            default_headers=default_headers,
            transport=transport,
        )
        if http_client is not None and not isinstance(http_client, httpx.Client):
            raise InvalidParameterError(
                f"http_client must be an httpx.Client, got {type(http_client).__name__}"
            )
        self._setup(config, make_sync_transport(config.transport, _origin(config), http_client), owns=True)
        self._custom_http = http_client is not None

    def _setup(self, config: ClientConfig, transport: SyncTransport, *, owns: bool) -> None:
        BaseClient.__init__(self, config)
        self._transport = transport
        self._owns_transport = owns
        self._custom_http = False

    @classmethod
    def _from_config(cls, config: ClientConfig, transport: SyncTransport | None = None) -> Self:
        client = cls.__new__(cls)
        owns = transport is None
        client._setup(
            config, transport or make_sync_transport(config.transport, _origin(config), None), owns=owns
        )
        return client

    def __reduce__(self) -> tuple[Any, ...]:
        if self._custom_http:
            raise TypeError(
                f"a {type(self).__name__} made with http_client= cannot be pickled (an httpx client does not "
                "travel); pickle one made from configuration only"
            )
        return (type(self)._from_config, (self._config,))

    def with_options(
        self,
        *,
        timeout: TimeoutArg | NotGiven = NOT_GIVEN,
        max_retries: int | NotGiven = NOT_GIVEN,
        api_key: str | NotGiven | None = NOT_GIVEN,
        default_headers: Mapping[str, str] | NotGiven = NOT_GIVEN,
    ) -> Self:
        """A client sharing this one's connection pool, with other defaults.

        Args:
            timeout: default HTTP timeout of one try.
            max_retries: retries of idempotent calls.
            api_key: another key (None: none).
            default_headers: replaces the extra headers sent on every call.
        """
        changes: dict[str, Any] = {}
        if not isinstance(timeout, NotGiven):
            changes.update(timeout=check.timeout(timeout), timeout_arg=timeout)
        if not isinstance(max_retries, NotGiven):
            changes["max_retries"] = check.non_negative_int(max_retries, "max_retries")
        if not isinstance(api_key, NotGiven):
            changes["api_key"] = check.api_key(api_key)
        if not isinstance(default_headers, NotGiven):
            changes["default_headers"] = check.header_map(default_headers, "default_headers")
        self._check_open()
        client = type(self)._from_config(self._replaced(**changes), self._transport)
        client._models = self._models
        return client

    @property
    def with_raw_response(self) -> RawResponses:
        """The same route methods, answering `RawResponse(parsed=..., http_response=httpx.Response)`."""
        return RawResponses(self)

    def close(self) -> None:
        """Close the connections this client opened (not an http_client you passed in). Idempotent."""
        if not self._closed:
            self._closed = True
            if self._owns_transport:
                self._transport.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- running operations ------------------------------------------------------------------------------

    def _run(self, op: Operation[T], options: Mapping[str, Any]) -> T:
        self._check_open()
        sent: tuple[WireRequest, Any] | None = None
        try:
            effect = op.send(None)
            while True:
                if isinstance(effect, Sleep):
                    sleep(effect.seconds)
                    effect = op.send(None)
                    continue
                request = self._wire_request(effect, options)
                try:
                    response = self._transport.send(
                        request, connect_timeout=effect.connect_timeout, deadline=effect.deadline
                    )
                except TransportError as exc:
                    effect = op.throw(exc)
                    continue
                sent = (request, response)
                effect = op.send(response)
        except StopIteration as stop:
            result = cast(T, stop.value)
        self._learn(result)
        if RAW_MODE.get():
            if sent is None:
                raise InvalidParameterError("with_raw_response needs a call that sends a request")
            return cast(T, RawResponse(result, to_httpx(sent[1], sent[0])))
        return result

    def _send(self, ep: Endpoint[T], options: Mapping[str, Any]) -> T:
        opts = self._options(options)
        timeouts = self._timeouts(opts, long_running=ep.long_running)
        return self._run(ops.call(ep, timeouts=timeouts, retry=self._retry, ctx=self._context()), opts)

    # ---- routes ------------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        json: Any = None,
        **options: Unpack[RequestOptions],
    ) -> httpx.Response:
        """Any request, with this client's auth, timeouts and typed errors (a non-2xx raises).

        Args:
            method: the HTTP method.
            path: the path, starting with "/" (no query: pass params).
            params: query parameters; booleans go out as true/false.
            json: a JSON body.
        """
        body = json if json is not None else endpoints.NO_BODY
        opts = self._options(options)
        ep = endpoints.raw(method, path, params, body)
        op = ops.call(
            ep, timeouts=self._timeouts(opts, long_running=False), retry=self._retry, ctx=self._context()
        )
        token = RAW_MODE.set(True)
        try:
            raw = cast(RawResponse[Any], self._run(op, opts))
        finally:
            RAW_MODE.reset(token)
        return raw.http_response

    def health(self, **options: Unpack[RequestOptions]) -> bool:
        """GET /health: True when the engine is alive; EngineDeadError (503) when it is dead."""
        return self._send(endpoints.health(), options)

    def version(self, **options: Unpack[RequestOptions]) -> VersionInfo:
        """GET /version: the vLLM version, and (`.frontend`) which frontend serves it."""
        return self._send(endpoints.version(), options)

    def models(self, **options: Unpack[RequestOptions]) -> ModelList:
        """GET /v1/models: the served models (needs the api_key when the server has one)."""
        return self._send(endpoints.models(), options)

    def metrics_text(self, **options: Unpack[RequestOptions]) -> str:
        """GET /metrics: the Prometheus (Python) or OpenMetrics (Rust) text."""
        return (self._send(endpoints.metrics_text(), options)).text

    def metrics(self, **options: Unpack[RequestOptions]) -> MetricsSnapshot:
        """GET /metrics as a typed snapshot: prefix-cache and KV-offload counters (the "metrics" extra)."""
        return self._send(endpoints.metrics(), options)

    def load(self, **options: Unpack[RequestOptions]) -> LoadInfo:
        """GET /load: how many requests are in flight on the server's GPU routes."""
        return self._send(endpoints.load(), options)

    def tokenizer_info(self, **options: Unpack[RequestOptions]) -> TokenizerInfo:
        """GET /tokenizer_info: the tokenizer's configuration.

        Served by the Python frontend with --enable-tokenizer-info-endpoint; the Rust frontend answers 501.
        """
        return self._send(endpoints.tokenizer_info(), options)

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
        ep = endpoints.reset_prefix_cache(
            reset_running_requests=reset_running_requests, reset_external=reset_external
        )
        return self._send(ep, options)

    def reset_mm_cache(self, **options: Unpack[RequestOptions]) -> None:
        """POST /reset_mm_cache: drop the multimodal cache."""
        self._send(endpoints.reset_mm_cache(), options)

    def reset_encoder_cache(self, **options: Unpack[RequestOptions]) -> None:
        """POST /reset_encoder_cache: drop the encoder cache."""
        self._send(endpoints.reset_encoder_cache(), options)

    def sleep(
        self, level: int = 1, *, mode: PauseMode = "abort", **options: Unpack[RequestOptions]
    ) -> SleepResult:
        """POST /sleep: put the engine to sleep (level 2 has no HTTP timeout by default).

        Args:
            level: 0 pauses, 1 offloads the weights, 2 discards them.
            mode: what happens to requests in flight: abort, wait or keep.
        """
        return self._send(endpoints.sleep(level=level, mode=mode), options)

    def wake_up(self, tags: Sequence[str] | None = None, **options: Unpack[RequestOptions]) -> WakeUpResult:
        """POST /wake_up; `.awake` is False on a partial wake (no HTTP timeout by default).

        Args:
            tags: what to wake (e.g. ["weights"], then ["kv_cache"]); None: everything.
        """
        return self._send(endpoints.wake_up(tags), options)

    def is_sleeping(self, **options: Unpack[RequestOptions]) -> bool:
        """GET /is_sleeping."""
        return self._send(endpoints.is_sleeping(), options)

    def release_kv_cache_memory(self, **options: Unpack[RequestOptions]) -> StatusResult:
        """POST /release_kv_cache_memory: free the KV cache's GPU memory (never resent)."""
        return self._send(endpoints.release_kv_cache_memory(), options)

    def pause(
        self, mode: PauseMode = "abort", *, clear_cache: bool | None = None, **options: Unpack[RequestOptions]
    ) -> StatusResult:
        """POST /pause: stop scheduling (for a weight update); see also the paused() flow.

        Args:
            mode: what happens to requests in flight: abort, wait or keep.
            clear_cache: also clear the caches (server default when None).
        """
        return self._send(endpoints.pause(mode=mode, clear_cache=clear_cache), options)

    def resume(self, **options: Unpack[RequestOptions]) -> StatusResult:
        """POST /resume: schedule again after pause()."""
        return self._send(endpoints.resume(), options)

    def is_paused(self, **options: Unpack[RequestOptions]) -> bool:
        """GET /is_paused."""
        return self._send(endpoints.is_paused(), options)

    def abort_requests(
        self, request_ids: Iterable[str] | None = None, **options: Unpack[RequestOptions]
    ) -> AbortRequestsResult:
        """POST /abort_requests (aborting all is never resent).

        Args:
            request_ids: the ids to abort; None: every request in flight.
        """
        return self._send(endpoints.abort_requests(request_ids), options)

    def collective_rpc(
        self,
        method: str,
        *,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        rpc_timeout: float | None = None,
        **options: Unpack[RequestOptions],
    ) -> list[Any]:
        """POST /collective_rpc: call a worker method on every worker; one result per worker. Never resent;
        no HTTP timeout by default (an NCCL rendezvous can take minutes).

        Args:
            method: the worker method's name.
            args: positional arguments (JSON).
            kwargs: keyword arguments (JSON).
            rpc_timeout: the engine-side timeout in seconds.
        """
        ep = endpoints.collective_rpc(method, args=args, kwargs=kwargs, rpc_timeout=rpc_timeout)
        return self._send(ep, options)

    def server_info(
        self, config_format: Literal["text", "json"] = "json", **options: Unpack[RequestOptions]
    ) -> ServerInfo:
        """GET /server_info: the server's configuration and environment.

        Args:
            config_format: "json" for a dict, "text" for the config's text form.
        """
        return self._send(endpoints.server_info(config_format), options)

    def kv_event_sources(self, **options: Unpack[RequestOptions]) -> dict[int, KVEventSource]:
        """GET /kv_event_sources: where each data-parallel rank publishes KV-cache events."""
        return self._send(endpoints.kv_event_sources(), options)

    def get_world_size(self, *, include_dp: bool = True, **options: Unpack[RequestOptions]) -> int:
        """GET /get_world_size.

        Args:
            include_dp: count data-parallel ranks too (TP x PP x DP); else TP x PP.
        """
        return self._send(endpoints.get_world_size(include_dp=include_dp), options)

    def init_weight_transfer_engine(
        self, init_info: Mapping[str, Any], **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """POST /init_weight_transfer_engine (never resent; no HTTP timeout by default).

        Args:
            init_info: the transfer backend's settings (JSON), e.g. NCCL master address and ranks.
        """
        return self._send(endpoints.init_weight_transfer_engine(init_info), options)

    def shutdown_weight_transfer_engine(self, **options: Unpack[RequestOptions]) -> MessageResult:
        """POST /shutdown_weight_transfer_engine (never resent)."""
        return self._send(endpoints.shutdown_weight_transfer_engine(), options)

    def start_weight_update(self, **options: Unpack[RequestOptions]) -> MessageResult:
        """POST /start_weight_update (never resent); see also the weight_update() flow."""
        return self._send(endpoints.start_weight_update(), options)

    def start_draft_weight_update(self, **options: Unpack[RequestOptions]) -> MessageResult:
        """POST /start_draft_weight_update: begin updating the draft (speculative) model's weights."""
        return self._send(endpoints.start_draft_weight_update(), options)

    def update_weights(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """POST /update_weights: receive one batch of weights (never resent; no HTTP timeout by default).

        Args:
            update_info: names, dtypes and shapes of the tensors (JSON), or one such dict per worker.
        """
        return self._send(endpoints.update_weights(update_info), options)

    def finish_weight_update(
        self, *, weight_version: str | None = None, **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """POST /finish_weight_update (never resent).

        Args:
            weight_version: the version the new weights carry.
        """
        return self._send(endpoints.finish_weight_update(weight_version=weight_version), options)

    def update_weight_version(
        self, new_version: str, **options: Unpack[RequestOptions]
    ) -> WeightVersionResult:
        """POST /update_weight_version.

        Args:
            new_version: the version string to set.
        """
        return self._send(endpoints.update_weight_version(new_version), options)

    def weight_info(self, **options: Unpack[RequestOptions]) -> WeightInfo:
        """GET /weight_info: the weight version the server holds."""
        return self._send(endpoints.weight_info(), options)

    def weight_checker(
        self,
        action: WeightCheckAction,
        *,
        baseline: Mapping[str, str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> WeightCheckResult:
        """POST /weight_checker: checksum the weights, compare them with a baseline, or reset them.

        Args:
            action: "checksum", "compare" (needs baseline) or "reset" (never resent).
            baseline: the checksums of an earlier "checksum", for "compare".
        """
        return self._send(endpoints.weight_checker(action, baseline=baseline), options)

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
        ep = endpoints.load_lora_adapter(
            lora_name, lora_path, load_inplace=load_inplace, is_3d_lora_weight=is_3d_lora_weight
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
        return self._send(endpoints.unload_lora_adapter(lora_name, lora_int_id=lora_int_id), options)

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
        ep = endpoints.start_profile(
            profile_prefix=profile_prefix, delay_iterations=delay_iterations, max_iterations=max_iterations
        )
        self._send(ep, options)

    def stop_profile(self, **options: Unpack[RequestOptions]) -> None:
        """POST /stop_profile: stop and write the trace (no HTTP timeout by default)."""
        self._send(endpoints.stop_profile(), options)

    # ---- completions and engine stepping ---------------------------------------------------------------

    def completion(
        self,
        prompt: str,
        *,
        model: str | None = None,
        max_tokens: int = 16,
        temperature: float = 0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        **options: Unpack[RequestOptions],
    ) -> Completion:
        """POST /v1/completions, greedy by default (never resent: it would run twice).

        Args:
            prompt: the prompt text.
            model: the model name; default the client's, else the first on /v1/models.
            max_tokens: tokens to generate.
            temperature: sampling temperature (0: greedy).
            seed: sampling seed.
            stop: stop strings.
        """
        opts = self._options(options)
        timeouts = self._timeouts(opts, long_running=True)
        op = ops.completion(
            self._models,
            prompt,
            model=model,
            max_tokens=max_tokens,
            temperature=temperature,
            seed=seed,
            stop=stop,
            timeouts=timeouts,
            retry=self._retry,
            ctx=self._context(),
        )
        return self._run(op, opts)

    def step_engine(self, **options: Unpack[RequestOptions]) -> str:
        """Send a 1-token greedy completion (prompt "0") so the engine runs a step; returns its text."""
        opts = self._options(options)
        timeouts = self._timeouts(opts, long_running=False)
        op = ops.step_engine(self._models, timeouts=timeouts, retry=self._retry, ctx=self._context())
        return self._run(op, opts)

    # ---- the barrier and the waits ---------------------------------------------------------------------

    def reset_prefix_cache_until_success(
        self,
        *,
        deadline: float | NotGiven = NOT_GIVEN,
        request_timeout: float = DEFAULT_BARRIER_REQUEST_TIMEOUT,
        reset_external: bool = False,
        reset_running_requests: bool = False,
        step_engine: bool = True,
        interval: float = DEFAULT_BARRIER_POLL_INTERVAL,
        max_interval: float = DEFAULT_POLL_MAX_INTERVAL,
        on_attempt: Callable[[int, object], None] | None = None,
        timeout: float | NotGiven = NOT_GIVEN,
    ) -> BarrierResult:
        """The offload barrier: reset the prefix cache until it succeeds, stepping the engine between tries.

        Returns within `deadline` (plus at most one short try) or raises BarrierTimeoutError; a success=false
        is never reported as success. Each try is one request; `attempts` counts them.

        Args:
            deadline: seconds for the whole barrier (default 60).
            request_timeout: seconds for each try.
            reset_external: also reset the connector's tier (default False: keep the CPU tier).
            reset_running_requests: preempt running requests so their blocks can be freed.
            step_engine: send a 1-token completion between tries, so finished blocks are released.
            interval: first pause between tries (doubling up to max_interval).
            max_interval: longest pause between tries.
            on_attempt: called after each try with (attempt number, its answer or error).
            timeout: deprecated name of deadline.
        """
        op = ops.reset_prefix_cache_until_success(
            self._models,
            deadline=_deadline(deadline, timeout, DEFAULT_BARRIER_DEADLINE),
            reset_external=reset_external,
            reset_running_requests=reset_running_requests,
            step=step_engine,
            poll=ops.Backoff.of(interval, max_interval),
            request_timeout=request_timeout,
            ctx=self._context(),
            on_attempt=on_attempt,
        )
        return self._run(op, {})

    def wait_until_ready(
        self,
        *,
        deadline: float | NotGiven = NOT_GIVEN,
        request_timeout: float = DEFAULT_READY_REQUEST_TIMEOUT,
        interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float | NotGiven = NOT_GIVEN,
    ) -> None:
        """Poll /health until it answers 200; EngineDeadError at once when the engine is dead.

        Args:
            deadline: seconds for the whole wait (default 120).
            request_timeout: seconds for each try (short: a starting Rust frontend accepts and says nothing).
            interval: first pause between tries.
            timeout: deprecated name of deadline.
        """
        op = ops.wait_until_ready(
            deadline=_deadline(deadline, timeout, DEFAULT_READY_DEADLINE),
            poll=ops.Backoff.of(interval, DEFAULT_POLL_MAX_INTERVAL),
            request_timeout=request_timeout,
            ctx=self._context(),
        )
        self._run(op, {})

    def _wait_flag(
        self,
        probe: Endpoint[bool],
        wanted: bool,
        deadline: float | NotGiven,
        request_timeout: float,
        interval: float,
        timeout: float | NotGiven,
    ) -> None:
        op = ops.wait_for_flag(
            probe,
            wanted,
            what=f"{probe.path.lstrip('/')} == {str(wanted).lower()}",
            deadline=_deadline(deadline, timeout, DEFAULT_WAIT_DEADLINE),
            poll=ops.Backoff.of(interval, DEFAULT_POLL_MAX_INTERVAL),
            request_timeout=request_timeout,
            ctx=self._context(),
        )
        self._run(op, {})

    def wait_until_sleeping(
        self,
        *,
        deadline: float | NotGiven = NOT_GIVEN,
        request_timeout: float = DEFAULT_WAIT_REQUEST_TIMEOUT,
        interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float | NotGiven = NOT_GIVEN,
    ) -> None:
        """Poll /is_sleeping until true (a 200 from /sleep does not prove the engine sleeps).

        Args:
            deadline: seconds for the whole wait (default 60).
            request_timeout: seconds for each try.
            interval: first pause between tries.
            timeout: deprecated name of deadline.
        """
        self._wait_flag(endpoints.is_sleeping(), True, deadline, request_timeout, interval, timeout)

    def wait_until_awake(
        self,
        *,
        deadline: float | NotGiven = NOT_GIVEN,
        request_timeout: float = DEFAULT_WAIT_REQUEST_TIMEOUT,
        interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float | NotGiven = NOT_GIVEN,
    ) -> None:
        """Poll /is_sleeping until false.

        Args:
            deadline: seconds for the whole wait (default 60).
            request_timeout: seconds for each try.
            interval: first pause between tries.
            timeout: deprecated name of deadline.
        """
        self._wait_flag(endpoints.is_sleeping(), False, deadline, request_timeout, interval, timeout)

    def wait_until_paused(
        self,
        *,
        deadline: float | NotGiven = NOT_GIVEN,
        request_timeout: float = DEFAULT_WAIT_REQUEST_TIMEOUT,
        interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float | NotGiven = NOT_GIVEN,
    ) -> None:
        """Poll /is_paused until true.

        Args:
            deadline: seconds for the whole wait (default 60).
            request_timeout: seconds for each try.
            interval: first pause between tries.
            timeout: deprecated name of deadline.
        """
        self._wait_flag(endpoints.is_paused(), True, deadline, request_timeout, interval, timeout)

    def wait_until_resumed(
        self,
        *,
        deadline: float | NotGiven = NOT_GIVEN,
        request_timeout: float = DEFAULT_WAIT_REQUEST_TIMEOUT,
        interval: float = DEFAULT_POLL_INTERVAL,
        timeout: float | NotGiven = NOT_GIVEN,
    ) -> None:
        """Poll /is_paused until false.

        Args:
            deadline: seconds for the whole wait (default 60).
            request_timeout: seconds for each try.
            interval: first pause between tries.
            timeout: deprecated name of deadline.
        """
        self._wait_flag(endpoints.is_paused(), False, deadline, request_timeout, interval, timeout)

    # ---- flows ---------------------------------------------------------------------------------------------

    @contextmanager
    def paused(
        self, mode: PauseMode = "keep", *, clear_cache: bool | None = None, wait: bool = True
    ) -> Iterator[Self]:
        """Pause for the block, resume when it ends, however it ends.

        Args:
            mode: what happens to requests in flight: abort, wait or keep.
            clear_cache: also clear the caches when pausing.
            wait: wait until /is_paused says true before entering the block.
        """
        self.pause(mode, clear_cache=clear_cache)
        try:
            if wait:
                self.wait_until_paused()
            yield self
        finally:
            self.resume()

    @contextmanager
    def sleeping(self, level: int = 1, *, mode: PauseMode = "abort", wait: bool = True) -> Iterator[Self]:
        """Sleep for the block, wake up when it ends, however it ends.

        Args:
            level: 0, 1 (offload weights) or 2 (discard them).
            mode: what happens to requests in flight: abort, wait or keep.
            wait: wait until /is_sleeping says true before entering, and false after waking.
        """
        self.sleep(level, mode=mode)
        try:
            if wait:
                self.wait_until_sleeping()
            yield self
        finally:
            self.wake_up()
            if wait:
                self.wait_until_awake()

    @contextmanager
    def weight_update(
        self,
        *,
        weight_version: str | None = None,
        pause_mode: PauseMode = "keep",
        clear_cache: bool | None = None,
        draft: bool = False,
    ) -> Iterator[WeightUpdate]:
        """Pause, start a weight update, yield a handle to send batches with, finish it, resume.

        The finish (with `weight_version`) runs only when the block succeeds; resume always runs. Batches
        sent with `update.start(info)` run beside your own code (e.g. the trainer's NCCL send) and are
        awaited before the finish.

        Args:
            weight_version: the version the new weights carry, set by the finish.
            pause_mode: what happens to requests in flight while paused.
            clear_cache: also clear the caches when pausing.
            draft: update the draft (speculative) model instead.
        """
        with self.paused(pause_mode, clear_cache=clear_cache):
            if draft:
                self.start_draft_weight_update()
            else:
                self.start_weight_update()
            update = WeightUpdate(self)
            yield update
            update.wait()
            self.finish_weight_update(weight_version=weight_version)


class WeightUpdate:
    """The handle of a `weight_update()` block: send weight batches, in the foreground or beside your code."""

    def __init__(self, client: DevClient) -> None:
        self._client = client
        self._pending: list[Pending[MessageResult]] = []

    def update(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> MessageResult:
        """Send one batch and wait for the server to take it."""
        return self._client.update_weights(update_info, **options)

    def start(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], **options: Unpack[RequestOptions]
    ) -> Pending[MessageResult]:
        """Send one batch in the background (the server blocks until the trainer's tensors arrive) and
        return at once; the block's end waits for it."""
        pending = background(self._client.update_weights, update_info, **options)
        self._pending.append(pending)
        return pending

    def wait(self) -> list[MessageResult]:
        """Wait for every batch started in the background; the first failure is raised."""
        pending, self._pending = self._pending, []
        return [result_of(p) for p in pending]


def _origin(config: ClientConfig) -> Any:
    from ..transports import Origin

    url = config.url
    return Origin(url.scheme, url.host, url.port, url.prefix)  # type: ignore[arg-type]


class _SyncRaw(Generic[P, T]):
    """`with_raw_response.name(...)`: the client method `name`, answering a RawResponse."""

    def __init__(self, method: Callable[Concatenate[DevClient, P], T]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _SyncRaw[P, T]: ...
    @overload
    def __get__(self, obj: RawResponses, owner: type[Any]) -> Callable[P, RawResponse[T]]: ...
    def __get__(self, obj: RawResponses | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        method, client = self._method, obj._client

        def raw(*args: P.args, **kwargs: P.kwargs) -> RawResponse[T]:
            token = RAW_MODE.set(True)
            try:
                return cast(RawResponse[T], method(client, *args, **kwargs))
            finally:
                RAW_MODE.reset(token)

        raw.__name__ = raw.__qualname__ = method.__name__
        raw.__doc__ = method.__doc__
        return raw


class RawResponses:
    """Every route method of the client, answering `RawResponse` (typed answer + `httpx.Response`)."""

    def __init__(self, client: DevClient) -> None:
        self._client = client

    # -- generated: raw-response methods (make generate) --
    health = _SyncRaw(DevClient.health)
    version = _SyncRaw(DevClient.version)
    models = _SyncRaw(DevClient.models)
    metrics_text = _SyncRaw(DevClient.metrics_text)
    metrics = _SyncRaw(DevClient.metrics)
    load = _SyncRaw(DevClient.load)
    tokenizer_info = _SyncRaw(DevClient.tokenizer_info)
    reset_prefix_cache = _SyncRaw(DevClient.reset_prefix_cache)
    reset_mm_cache = _SyncRaw(DevClient.reset_mm_cache)
    reset_encoder_cache = _SyncRaw(DevClient.reset_encoder_cache)
    sleep = _SyncRaw(DevClient.sleep)
    wake_up = _SyncRaw(DevClient.wake_up)
    is_sleeping = _SyncRaw(DevClient.is_sleeping)
    release_kv_cache_memory = _SyncRaw(DevClient.release_kv_cache_memory)
    pause = _SyncRaw(DevClient.pause)
    resume = _SyncRaw(DevClient.resume)
    is_paused = _SyncRaw(DevClient.is_paused)
    abort_requests = _SyncRaw(DevClient.abort_requests)
    collective_rpc = _SyncRaw(DevClient.collective_rpc)
    server_info = _SyncRaw(DevClient.server_info)
    kv_event_sources = _SyncRaw(DevClient.kv_event_sources)
    get_world_size = _SyncRaw(DevClient.get_world_size)
    init_weight_transfer_engine = _SyncRaw(DevClient.init_weight_transfer_engine)
    shutdown_weight_transfer_engine = _SyncRaw(DevClient.shutdown_weight_transfer_engine)
    start_weight_update = _SyncRaw(DevClient.start_weight_update)
    start_draft_weight_update = _SyncRaw(DevClient.start_draft_weight_update)
    update_weights = _SyncRaw(DevClient.update_weights)
    finish_weight_update = _SyncRaw(DevClient.finish_weight_update)
    update_weight_version = _SyncRaw(DevClient.update_weight_version)
    weight_info = _SyncRaw(DevClient.weight_info)
    weight_checker = _SyncRaw(DevClient.weight_checker)
    load_lora_adapter = _SyncRaw(DevClient.load_lora_adapter)
    unload_lora_adapter = _SyncRaw(DevClient.unload_lora_adapter)
    start_profile = _SyncRaw(DevClient.start_profile)
    stop_profile = _SyncRaw(DevClient.stop_profile)
    # -- end generated --
