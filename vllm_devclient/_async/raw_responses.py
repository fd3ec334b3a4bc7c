"""`client.with_raw_response`: the route methods answering the typed result and the httpx.Response."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from .._base_client import (
    RAW_MODE,
    RawResponse,
)
from .client import AsyncDevClient

__all__ = ["AsyncRawResponses"]

T = TypeVar("T")
P = ParamSpec("P")


class _AsyncRaw(Generic[P, T]):
    """`with_raw_response.name(...)`: the client method `name`, answering a RawResponse."""

    def __init__(self, method: Callable[Concatenate[AsyncDevClient, P], Awaitable[T]]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _AsyncRaw[P, T]: ...
    @overload
    def __get__(self, obj: AsyncRawResponses, owner: type[Any]) -> Callable[P, Awaitable[RawResponse[T]]]: ...
    def __get__(self, obj: AsyncRawResponses | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        method, client = self._method, obj._client

        async def raw(*args: P.args, **kwargs: P.kwargs) -> RawResponse[T]:
            token = RAW_MODE.set(True)
            try:
                return cast(RawResponse[T], await method(client, *args, **kwargs))
            finally:
                RAW_MODE.reset(token)

        raw.__name__ = raw.__qualname__ = method.__name__
        raw.__doc__ = method.__doc__
        return raw


class AsyncRawResponses:
    """Every route method of the client, answering `RawResponse` (typed answer + `httpx.Response`)."""

    def __init__(self, client: AsyncDevClient) -> None:
        self._client = client

    # -- generated: raw-response methods (make generate) --
    health = _AsyncRaw(AsyncDevClient.health)
    version = _AsyncRaw(AsyncDevClient.version)
    models = _AsyncRaw(AsyncDevClient.models)
    metrics_text = _AsyncRaw(AsyncDevClient.metrics_text)
    metrics = _AsyncRaw(AsyncDevClient.metrics)
    load = _AsyncRaw(AsyncDevClient.load)
    tokenizer_info = _AsyncRaw(AsyncDevClient.tokenizer_info)
    reset_prefix_cache = _AsyncRaw(AsyncDevClient.reset_prefix_cache)
    reset_mm_cache = _AsyncRaw(AsyncDevClient.reset_mm_cache)
    reset_encoder_cache = _AsyncRaw(AsyncDevClient.reset_encoder_cache)
    release_kv_cache_memory = _AsyncRaw(AsyncDevClient.release_kv_cache_memory)
    sleep = _AsyncRaw(AsyncDevClient.sleep)
    wake_up = _AsyncRaw(AsyncDevClient.wake_up)
    is_sleeping = _AsyncRaw(AsyncDevClient.is_sleeping)
    pause = _AsyncRaw(AsyncDevClient.pause)
    resume = _AsyncRaw(AsyncDevClient.resume)
    is_paused = _AsyncRaw(AsyncDevClient.is_paused)
    abort_requests = _AsyncRaw(AsyncDevClient.abort_requests)
    collective_rpc = _AsyncRaw(AsyncDevClient.collective_rpc)
    server_info = _AsyncRaw(AsyncDevClient.server_info)
    kv_event_sources = _AsyncRaw(AsyncDevClient.kv_event_sources)
    get_world_size = _AsyncRaw(AsyncDevClient.get_world_size)
    init_weight_transfer_engine = _AsyncRaw(AsyncDevClient.init_weight_transfer_engine)
    start_weight_update = _AsyncRaw(AsyncDevClient.start_weight_update)
    start_draft_weight_update = _AsyncRaw(AsyncDevClient.start_draft_weight_update)
    update_weights = _AsyncRaw(AsyncDevClient.update_weights)
    finish_weight_update = _AsyncRaw(AsyncDevClient.finish_weight_update)
    update_weight_version = _AsyncRaw(AsyncDevClient.update_weight_version)
    weight_info = _AsyncRaw(AsyncDevClient.weight_info)
    weight_checker = _AsyncRaw(AsyncDevClient.weight_checker)
    shutdown_weight_transfer_engine = _AsyncRaw(AsyncDevClient.shutdown_weight_transfer_engine)
    load_lora_adapter = _AsyncRaw(AsyncDevClient.load_lora_adapter)
    unload_lora_adapter = _AsyncRaw(AsyncDevClient.unload_lora_adapter)
    start_profile = _AsyncRaw(AsyncDevClient.start_profile)
    stop_profile = _AsyncRaw(AsyncDevClient.stop_profile)
    # -- end generated --
