"""DevClient and AsyncDevClient: thin I/O drivers over the shared endpoints and operations."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

import httpx

from . import endpoints
from . import operations as ops
from ._version import __version__
from .endpoints import Endpoint, PauseMode
from .errors import InvalidParameterError
from .models import (
    AbortRequestsResult,
    BarrierResult,
    Completion,
    KVEventSource,
    MessageResult,
    ModelList,
    ResetPrefixCacheResult,
    ServerInfo,
    SleepResult,
    StatusResult,
    VersionInfo,
    WakeUpResult,
    WeightInfo,
    WeightVersionResult,
)
from .operations import Backoff, ModelCache, Operation, RetryPolicy, Sleep, Transmit

if TYPE_CHECKING:
    from .metrics import MetricsSnapshot

__all__ = ["NOT_GIVEN", "AsyncDevClient", "DevClient"]

T = TypeVar("T")
H = TypeVar("H", httpx.Client, httpx.AsyncClient)
_C = TypeVar("_C", bound="_BaseClient[Any]")

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_STALE_SIGNS = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


class _NotGiven:
    def __repr__(self) -> str:
        return "NOT_GIVEN"

    def __bool__(self) -> bool:
        return False


NOT_GIVEN = _NotGiven()
TimeoutArg = float | httpx.Timeout | None | _NotGiven


class _BaseClient(Generic[H]):
    """Configuration and request building, shared by both clients."""

    _http: H

    _http_class: type[H]

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        http_client: H | None = None,
        model: str | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidParameterError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise InvalidParameterError(f"max_retries must be an int >= 0, got {max_retries!r}")
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key if api_key is not None else os.environ.get("VLLM_API_KEY") or None
        self.timeout = timeout
        self.max_retries = max_retries
        self._retry = RetryPolicy(max_retries=max_retries)
        self._owns_http = http_client is None
        self._models = ModelCache(model)
        self._default_headers = self._headers()
        self._http: H = (
            http_client
            if http_client is not None
            else self._http_class(timeout=timeout, headers=self._default_headers)
        )
        self._request_headers = _missing_headers(self._http, self._default_headers)
        # Set after a 5xx: the server may have closed the connection it answered on (uvicorn does).
        self._pool_suspect = False

    def with_options(self: _C, *, timeout: TimeoutArg = NOT_GIVEN, max_retries: int | None = None) -> _C:
        """A client sharing this one's connection pool, with other defaults."""
        return type(self)(self.base_url, **self._options(timeout, max_retries))

    def __repr__(self) -> str:
        key = ", api_key=<set>" if self._api_key else ""
        return f"{type(self).__name__}(base_url={self.base_url!r}{key})"

    @property
    def has_api_key(self) -> bool:
        return self._api_key is not None

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": f"vllm-devclient/{__version__}", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _timeout(self, timeout: TimeoutArg) -> float | httpx.Timeout | None:
        return self.timeout if isinstance(timeout, _NotGiven) else timeout

    def _build(self, effect: Transmit) -> httpx.Request:
        ep = effect.endpoint
        return self._http.build_request(
            ep.method,
            self.base_url + ep.path,
            params=ep.params or None,
            json=ep.body if ep.has_body else None,
            headers=self._request_headers,
            timeout=effect.timeout if effect.timeout is not None else httpx.Timeout(None),
        )

    def _received(self, response: httpx.Response) -> httpx.Response:
        self._pool_suspect = response.status_code >= 500
        return response

    def _failed(self, exc: httpx.HTTPError) -> BaseException:
        if self._pool_suspect and isinstance(exc, _STALE_SIGNS):
            self._pool_suspect = False
            return ops.StaleConnection(exc)
        return exc

    def _call(self, ep: Endpoint[T], timeout: TimeoutArg) -> Operation[T]:
        return ops.call(ep, timeout=self._timeout(timeout), retry=self._retry)

    def _options(self, timeout: TimeoutArg, max_retries: int | None) -> dict[str, Any]:
        return {
            "api_key": self._api_key,
            "timeout": self._timeout(timeout),
            "max_retries": self.max_retries if max_retries is None else max_retries,
            "http_client": self._http,
            "model": self._models.model,
        }


def _advance(op: Operation[T], outcome: Any, error: BaseException | None) -> tuple[ops.Effect | None, Any]:
    """Feed an effect's outcome into the operation; (next effect, None) or (None, final result)."""
    try:
        return (op.throw(error) if error is not None else op.send(outcome)), None
    except StopIteration as stop:
        return None, stop.value


def _poll(interval: float, max_interval: float) -> Backoff:
    return Backoff(initial=interval, maximum=max(interval, max_interval))


def _missing_headers(http: httpx.Client | httpx.AsyncClient, wanted: dict[str, str]) -> dict[str, str] | None:
    """The headers `http` does not already send by default (None: it sends them all).

    Per-request headers make httpx copy and merge its Headers on every call, about half of the SDK's own
    cost per call; so they go on the httpx client we create, and only what a caller's client lacks is
    added per request (their client is never mutated).
    """
    missing = {k: v for k, v in wanted.items() if http.headers.get(k) != v}
    return missing or None


class DevClient(_BaseClient[httpx.Client]):
    """Synchronous client for a vLLM server's development-mode surface (either frontend)."""

    _http_class = httpx.Client

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> DevClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, op: Operation[T]) -> T:
        effect, result = _advance(op, None, None)
        while effect is not None:
            outcome, error = None, None
            try:
                if isinstance(effect, Sleep):
                    time.sleep(effect.seconds)
                else:
                    outcome = self._received(self._http.send(self._build(effect)))
            except httpx.HTTPError as exc:
                error = self._failed(exc)
            effect, result = _advance(op, outcome, error)
        return cast(T, result)

    # ---- routes ------------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        json: Any = None,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> httpx.Response:
        """Any request, with this client's auth, timeouts and typed errors (a non-2xx raises)."""
        body = json if json is not None else endpoints.NO_BODY
        return self._run(self._call(endpoints.raw(method, path, params, body), timeout))

    def health(self, *, timeout: TimeoutArg = NOT_GIVEN) -> bool:
        return self._run(self._call(endpoints.health(), timeout))

    def version(self, *, timeout: TimeoutArg = NOT_GIVEN) -> VersionInfo:
        return self._run(self._call(endpoints.version(), timeout))

    def models(self, *, timeout: TimeoutArg = NOT_GIVEN) -> ModelList:
        return self._run(self._call(endpoints.models(), timeout))

    def metrics(self, *, timeout: TimeoutArg = NOT_GIVEN) -> MetricsSnapshot:
        """GET /metrics as a typed snapshot (either frontend's format); needs the ``metrics`` extra."""
        return self._run(self._call(endpoints.metrics(), timeout))

    def completion(
        self,
        prompt: str,
        *,
        model: str | None = None,
        max_tokens: int = 16,
        temperature: float = 0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> Completion:
        """POST /v1/completions (greedy by default); ``model`` None: the served model from /v1/models."""
        return self._run(
            ops.completion(
                self._models,
                prompt,
                model=model,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=stop,
                timeout=self._timeout(timeout),
                retry=self._retry,
            )
        )

    def metrics_text(self, *, timeout: TimeoutArg = NOT_GIVEN) -> str:
        return self._run(self._call(endpoints.metrics_text(), timeout)).text

    def reset_prefix_cache(
        self,
        reset_running_requests: bool = False,
        reset_external: bool = False,
        *,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> ResetPrefixCacheResult:
        return self._run(
            self._call(endpoints.reset_prefix_cache(reset_running_requests, reset_external), timeout)
        )

    def reset_mm_cache(self, *, timeout: TimeoutArg = NOT_GIVEN) -> None:
        self._run(self._call(endpoints.reset_mm_cache(), timeout))

    def reset_encoder_cache(self, *, timeout: TimeoutArg = NOT_GIVEN) -> None:
        self._run(self._call(endpoints.reset_encoder_cache(), timeout))

    def sleep(
        self, level: int = 1, mode: PauseMode = "abort", *, timeout: TimeoutArg = NOT_GIVEN
    ) -> SleepResult:
        return self._run(self._call(endpoints.sleep(level, mode), timeout))

    def wake_up(self, tags: Sequence[str] | None = None, *, timeout: TimeoutArg = NOT_GIVEN) -> WakeUpResult:
        return self._run(self._call(endpoints.wake_up(tags), timeout))

    def is_sleeping(self, *, timeout: TimeoutArg = NOT_GIVEN) -> bool:
        return self._run(self._call(endpoints.is_sleeping(), timeout))

    def release_kv_cache_memory(self, *, timeout: TimeoutArg = NOT_GIVEN) -> StatusResult:
        return self._run(self._call(endpoints.release_kv_cache_memory(), timeout))

    def pause(
        self, mode: PauseMode = "abort", clear_cache: bool | None = None, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> StatusResult:
        return self._run(self._call(endpoints.pause(mode, clear_cache), timeout))

    def resume(self, *, timeout: TimeoutArg = NOT_GIVEN) -> StatusResult:
        return self._run(self._call(endpoints.resume(), timeout))

    def is_paused(self, *, timeout: TimeoutArg = NOT_GIVEN) -> bool:
        return self._run(self._call(endpoints.is_paused(), timeout))

    def abort_requests(
        self, request_ids: Iterable[str] | None = None, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> AbortRequestsResult:
        return self._run(self._call(endpoints.abort_requests(request_ids), timeout))

    def collective_rpc(
        self,
        method: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        rpc_timeout: float | None = None,
        *,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> list[Any]:
        """Per-worker results. `rpc_timeout` is the engine-side timeout; `timeout` the HTTP one."""
        return self._run(self._call(endpoints.collective_rpc(method, args, kwargs, rpc_timeout), timeout))

    def server_info(
        self, config_format: Literal["text", "json"] = "json", *, timeout: TimeoutArg = NOT_GIVEN
    ) -> ServerInfo:
        return self._run(self._call(endpoints.server_info(config_format), timeout))

    def kv_event_sources(self, *, timeout: TimeoutArg = NOT_GIVEN) -> dict[int, KVEventSource]:
        return self._run(self._call(endpoints.kv_event_sources(), timeout))

    def get_world_size(self, include_dp: bool = True, *, timeout: TimeoutArg = NOT_GIVEN) -> int:
        return self._run(self._call(endpoints.get_world_size(include_dp), timeout))

    def init_weight_transfer_engine(
        self, init_info: Mapping[str, Any], *, timeout: TimeoutArg = NOT_GIVEN
    ) -> MessageResult:
        return self._run(self._call(endpoints.init_weight_transfer_engine(init_info), timeout))

    def start_weight_update(self, *, timeout: TimeoutArg = NOT_GIVEN) -> MessageResult:
        return self._run(self._call(endpoints.start_weight_update(), timeout))

    def update_weights(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, timeout: TimeoutArg = NOT_GIVEN
    ) -> MessageResult:
        return self._run(self._call(endpoints.update_weights(update_info), timeout))

    def finish_weight_update(
        self, weight_version: str | None = None, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> MessageResult:
        return self._run(self._call(endpoints.finish_weight_update(weight_version), timeout))

    def update_weight_version(
        self, new_version: str, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> WeightVersionResult:
        return self._run(self._call(endpoints.update_weight_version(new_version), timeout))

    def weight_info(self, *, timeout: TimeoutArg = NOT_GIVEN) -> WeightInfo:
        return self._run(self._call(endpoints.weight_info(), timeout))

    # ---- engine stepping, barrier, waits -------------------------------------------------------------

    def step_engine(self, *, timeout: TimeoutArg = NOT_GIVEN) -> str:
        """Send a 1-token greedy completion (prompt "0") so the engine runs a step; returns its text."""
        return self._run(ops.step_engine(self._models, timeout=self._timeout(timeout), retry=self._retry))

    def reset_prefix_cache_until_success(
        self,
        timeout: float = 60.0,
        reset_external: bool = False,
        step_engine: bool = True,
        interval: float = 0.02,
        max_interval: float = 1.0,
        *,
        reset_running_requests: bool = False,
        request_timeout: float = 10.0,
    ) -> BarrierResult:
        """The offload barrier: see the README. Raises BarrierTimeoutError at the deadline."""
        return self._run(
            ops.reset_prefix_cache_until_success(
                self._models,
                timeout=timeout,
                reset_external=reset_external,
                reset_running_requests=reset_running_requests,
                step=step_engine,
                poll=_poll(interval, max_interval),
                request_timeout=request_timeout,
                retry=self._retry,
            )
        )

    def wait_until_ready(
        self, timeout: float = 120.0, *, interval: float = 0.05, request_timeout: float = 1.0
    ) -> None:
        self._run(
            ops.wait_until_ready(timeout=timeout, poll=_poll(interval, 1.0), request_timeout=request_timeout)
        )

    def wait_until_sleeping(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        self._run(_wait_flag(endpoints.is_sleeping(), True, "is_sleeping == true", timeout, interval))

    def wait_until_awake(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        self._run(_wait_flag(endpoints.is_sleeping(), False, "is_sleeping == false", timeout, interval))

    def wait_until_paused(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        self._run(_wait_flag(endpoints.is_paused(), True, "is_paused == true", timeout, interval))

    def wait_until_resumed(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        self._run(_wait_flag(endpoints.is_paused(), False, "is_paused == false", timeout, interval))


def _wait_flag(
    probe: Endpoint[bool], wanted: bool, what: str, timeout: float, interval: float
) -> Operation[None]:
    return ops.wait_for_flag(
        probe, wanted, what=what, timeout=timeout, poll=_poll(interval, 1.0), request_timeout=5.0
    )


class AsyncDevClient(_BaseClient[httpx.AsyncClient]):
    """Asynchronous client; the same methods as DevClient, awaited."""

    _http_class = httpx.AsyncClient

    async def close(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncDevClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(self, op: Operation[T]) -> T:
        effect, result = _advance(op, None, None)
        while effect is not None:
            outcome, error = None, None
            try:
                if isinstance(effect, Sleep):
                    import asyncio  # here, not at the top: sync users never pay for importing it

                    await asyncio.sleep(effect.seconds)
                else:
                    outcome = self._received(await self._http.send(self._build(effect)))
            except httpx.HTTPError as exc:
                error = self._failed(exc)
            effect, result = _advance(op, outcome, error)
        return cast(T, result)

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
        json: Any = None,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> httpx.Response:
        body = json if json is not None else endpoints.NO_BODY
        return await self._run(self._call(endpoints.raw(method, path, params, body), timeout))

    async def health(self, *, timeout: TimeoutArg = NOT_GIVEN) -> bool:
        return await self._run(self._call(endpoints.health(), timeout))

    async def version(self, *, timeout: TimeoutArg = NOT_GIVEN) -> VersionInfo:
        return await self._run(self._call(endpoints.version(), timeout))

    async def models(self, *, timeout: TimeoutArg = NOT_GIVEN) -> ModelList:
        return await self._run(self._call(endpoints.models(), timeout))

    async def metrics(self, *, timeout: TimeoutArg = NOT_GIVEN) -> MetricsSnapshot:
        """GET /metrics as a typed snapshot (either frontend's format); needs the ``metrics`` extra."""
        return await self._run(self._call(endpoints.metrics(), timeout))

    async def completion(
        self,
        prompt: str,
        *,
        model: str | None = None,
        max_tokens: int = 16,
        temperature: float = 0,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> Completion:
        """POST /v1/completions (greedy by default); ``model`` None: the served model from /v1/models."""
        return await self._run(
            ops.completion(
                self._models,
                prompt,
                model=model,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                stop=stop,
                timeout=self._timeout(timeout),
                retry=self._retry,
            )
        )

    async def metrics_text(self, *, timeout: TimeoutArg = NOT_GIVEN) -> str:
        return (await self._run(self._call(endpoints.metrics_text(), timeout))).text

    async def reset_prefix_cache(
        self,
        reset_running_requests: bool = False,
        reset_external: bool = False,
        *,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> ResetPrefixCacheResult:
        return await self._run(
            self._call(endpoints.reset_prefix_cache(reset_running_requests, reset_external), timeout)
        )

    async def reset_mm_cache(self, *, timeout: TimeoutArg = NOT_GIVEN) -> None:
        await self._run(self._call(endpoints.reset_mm_cache(), timeout))

    async def reset_encoder_cache(self, *, timeout: TimeoutArg = NOT_GIVEN) -> None:
        await self._run(self._call(endpoints.reset_encoder_cache(), timeout))

    async def sleep(
        self, level: int = 1, mode: PauseMode = "abort", *, timeout: TimeoutArg = NOT_GIVEN
    ) -> SleepResult:
        return await self._run(self._call(endpoints.sleep(level, mode), timeout))

    async def wake_up(
        self, tags: Sequence[str] | None = None, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> WakeUpResult:
        return await self._run(self._call(endpoints.wake_up(tags), timeout))

    async def is_sleeping(self, *, timeout: TimeoutArg = NOT_GIVEN) -> bool:
        return await self._run(self._call(endpoints.is_sleeping(), timeout))

    async def release_kv_cache_memory(self, *, timeout: TimeoutArg = NOT_GIVEN) -> StatusResult:
        return await self._run(self._call(endpoints.release_kv_cache_memory(), timeout))

    async def pause(
        self, mode: PauseMode = "abort", clear_cache: bool | None = None, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> StatusResult:
        return await self._run(self._call(endpoints.pause(mode, clear_cache), timeout))

    async def resume(self, *, timeout: TimeoutArg = NOT_GIVEN) -> StatusResult:
        return await self._run(self._call(endpoints.resume(), timeout))

    async def is_paused(self, *, timeout: TimeoutArg = NOT_GIVEN) -> bool:
        return await self._run(self._call(endpoints.is_paused(), timeout))

    async def abort_requests(
        self, request_ids: Iterable[str] | None = None, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> AbortRequestsResult:
        return await self._run(self._call(endpoints.abort_requests(request_ids), timeout))

    async def collective_rpc(
        self,
        method: str,
        args: Sequence[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        rpc_timeout: float | None = None,
        *,
        timeout: TimeoutArg = NOT_GIVEN,
    ) -> list[Any]:
        return await self._run(
            self._call(endpoints.collective_rpc(method, args, kwargs, rpc_timeout), timeout)
        )

    async def server_info(
        self, config_format: Literal["text", "json"] = "json", *, timeout: TimeoutArg = NOT_GIVEN
    ) -> ServerInfo:
        return await self._run(self._call(endpoints.server_info(config_format), timeout))

    async def kv_event_sources(self, *, timeout: TimeoutArg = NOT_GIVEN) -> dict[int, KVEventSource]:
        return await self._run(self._call(endpoints.kv_event_sources(), timeout))

    async def get_world_size(self, include_dp: bool = True, *, timeout: TimeoutArg = NOT_GIVEN) -> int:
        return await self._run(self._call(endpoints.get_world_size(include_dp), timeout))

    async def init_weight_transfer_engine(
        self, init_info: Mapping[str, Any], *, timeout: TimeoutArg = NOT_GIVEN
    ) -> MessageResult:
        return await self._run(self._call(endpoints.init_weight_transfer_engine(init_info), timeout))

    async def start_weight_update(self, *, timeout: TimeoutArg = NOT_GIVEN) -> MessageResult:
        return await self._run(self._call(endpoints.start_weight_update(), timeout))

    async def update_weights(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, timeout: TimeoutArg = NOT_GIVEN
    ) -> MessageResult:
        return await self._run(self._call(endpoints.update_weights(update_info), timeout))

    async def finish_weight_update(
        self, weight_version: str | None = None, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> MessageResult:
        return await self._run(self._call(endpoints.finish_weight_update(weight_version), timeout))

    async def update_weight_version(
        self, new_version: str, *, timeout: TimeoutArg = NOT_GIVEN
    ) -> WeightVersionResult:
        return await self._run(self._call(endpoints.update_weight_version(new_version), timeout))

    async def weight_info(self, *, timeout: TimeoutArg = NOT_GIVEN) -> WeightInfo:
        return await self._run(self._call(endpoints.weight_info(), timeout))

    async def step_engine(self, *, timeout: TimeoutArg = NOT_GIVEN) -> str:
        return await self._run(
            ops.step_engine(self._models, timeout=self._timeout(timeout), retry=self._retry)
        )

    async def reset_prefix_cache_until_success(
        self,
        timeout: float = 60.0,
        reset_external: bool = False,
        step_engine: bool = True,
        interval: float = 0.02,
        max_interval: float = 1.0,
        *,
        reset_running_requests: bool = False,
        request_timeout: float = 10.0,
    ) -> BarrierResult:
        return await self._run(
            ops.reset_prefix_cache_until_success(
                self._models,
                timeout=timeout,
                reset_external=reset_external,
                reset_running_requests=reset_running_requests,
                step=step_engine,
                poll=_poll(interval, max_interval),
                request_timeout=request_timeout,
                retry=self._retry,
            )
        )

    async def wait_until_ready(
        self, timeout: float = 120.0, *, interval: float = 0.05, request_timeout: float = 1.0
    ) -> None:
        await self._run(
            ops.wait_until_ready(timeout=timeout, poll=_poll(interval, 1.0), request_timeout=request_timeout)
        )

    async def wait_until_sleeping(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        await self._run(_wait_flag(endpoints.is_sleeping(), True, "is_sleeping == true", timeout, interval))

    async def wait_until_awake(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        await self._run(_wait_flag(endpoints.is_sleeping(), False, "is_sleeping == false", timeout, interval))

    async def wait_until_paused(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        await self._run(_wait_flag(endpoints.is_paused(), True, "is_paused == true", timeout, interval))

    async def wait_until_resumed(self, timeout: float = 60.0, *, interval: float = 0.05) -> None:
        await self._run(_wait_flag(endpoints.is_paused(), False, "is_paused == false", timeout, interval))
