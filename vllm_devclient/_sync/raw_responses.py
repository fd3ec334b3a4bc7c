# Generated from vllm_devclient/_async/raw_responses.py by scripts/generate.py: do not edit (make generate).
"""`client.with_raw_response`: the route methods answering the typed result and the httpx.Response."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from .._base_client import (
    RAW_MODE,
    RawResponse,
)
from .client import DevClient

__all__ = ["RawResponses"]

T = TypeVar("T")
P = ParamSpec("P")


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
    release_kv_cache_memory = _SyncRaw(DevClient.release_kv_cache_memory)
    sleep = _SyncRaw(DevClient.sleep)
    wake_up = _SyncRaw(DevClient.wake_up)
    is_sleeping = _SyncRaw(DevClient.is_sleeping)
    pause = _SyncRaw(DevClient.pause)
    resume = _SyncRaw(DevClient.resume)
    is_paused = _SyncRaw(DevClient.is_paused)
    abort_requests = _SyncRaw(DevClient.abort_requests)
    collective_rpc = _SyncRaw(DevClient.collective_rpc)
    server_info = _SyncRaw(DevClient.server_info)
    kv_event_sources = _SyncRaw(DevClient.kv_event_sources)
    get_world_size = _SyncRaw(DevClient.get_world_size)
    init_weight_transfer_engine = _SyncRaw(DevClient.init_weight_transfer_engine)
    start_weight_update = _SyncRaw(DevClient.start_weight_update)
    start_draft_weight_update = _SyncRaw(DevClient.start_draft_weight_update)
    update_weights = _SyncRaw(DevClient.update_weights)
    finish_weight_update = _SyncRaw(DevClient.finish_weight_update)
    update_weight_version = _SyncRaw(DevClient.update_weight_version)
    weight_info = _SyncRaw(DevClient.weight_info)
    weight_checker = _SyncRaw(DevClient.weight_checker)
    shutdown_weight_transfer_engine = _SyncRaw(DevClient.shutdown_weight_transfer_engine)
    load_lora_adapter = _SyncRaw(DevClient.load_lora_adapter)
    unload_lora_adapter = _SyncRaw(DevClient.unload_lora_adapter)
    start_profile = _SyncRaw(DevClient.start_profile)
    stop_profile = _SyncRaw(DevClient.stop_profile)
    # -- end generated --
