"""`client.with_raw_response`: the route methods answering the typed result and the HTTP response (the
response object of the stack that answered: httpx's, httpx2's, or the SDK's own `WireResponse`).

The table lists every route record (`vllm_devclient/routes/`, written by `make generate`): one exchange
each, so one raw response each. The call asks for the raw response in its own options, never in ambient
state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from .._base_client import (
    RAW_RESPONSE,
    RawResponse,
)
from .routes import _AsyncRoutes

__all__ = ["AsyncRawResponses"]

T = TypeVar("T")
P = ParamSpec("P")


class _AsyncRaw(Generic[P, T]):
    """`with_raw_response.name(...)`: the client method `name`, answering a RawResponse."""

    def __init__(self, method: Callable[Concatenate[_AsyncRoutes, P], Awaitable[T]]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _AsyncRaw[P, T]: ...
    @overload
    def __get__(self, obj: AsyncRawResponses, owner: type[Any]) -> Callable[P, Awaitable[RawResponse[T]]]: ...
    def __get__(self, obj: AsyncRawResponses | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        method = getattr(obj._client, self._method.__name__)  # the client's own: TypeErrors name its class

        async def raw(*args: P.args, **kwargs: P.kwargs) -> RawResponse[T]:
            # The call's own options carry the request for the raw response (RequestOptions' hidden key).
            options: dict[str, Any] = {**kwargs, RAW_RESPONSE: True}
            return cast(RawResponse[T], await method(*args, **options))

        raw.__name__ = raw.__qualname__ = method.__name__
        raw.__doc__ = method.__doc__
        return raw


class AsyncRawResponses:
    """Every route method of the client, answering `RawResponse` (typed answer + HTTP response)."""

    def __init__(self, client: _AsyncRoutes) -> None:
        self._client = client

    # -- generated: the raw-response methods, from vllm_devclient/routes/ --
    health = _AsyncRaw(_AsyncRoutes.health)
    version = _AsyncRaw(_AsyncRoutes.version)
    models = _AsyncRaw(_AsyncRoutes.models)
    metrics_text = _AsyncRaw(_AsyncRoutes.metrics_text)
    metrics = _AsyncRaw(_AsyncRoutes.metrics)
    load = _AsyncRaw(_AsyncRoutes.load)
    tokenizer_info = _AsyncRaw(_AsyncRoutes.tokenizer_info)
    server_info = _AsyncRaw(_AsyncRoutes.server_info)
    kv_event_sources = _AsyncRaw(_AsyncRoutes.kv_event_sources)
    get_world_size = _AsyncRaw(_AsyncRoutes.get_world_size)
    reset_prefix_cache = _AsyncRaw(_AsyncRoutes.reset_prefix_cache)
    reset_mm_cache = _AsyncRaw(_AsyncRoutes.reset_mm_cache)
    reset_encoder_cache = _AsyncRaw(_AsyncRoutes.reset_encoder_cache)
    release_kv_cache_memory = _AsyncRaw(_AsyncRoutes.release_kv_cache_memory)
    sleep = _AsyncRaw(_AsyncRoutes.sleep)
    wake_up = _AsyncRaw(_AsyncRoutes.wake_up)
    is_sleeping = _AsyncRaw(_AsyncRoutes.is_sleeping)
    checkpoint_prepare = _AsyncRaw(_AsyncRoutes.checkpoint_prepare)
    checkpoint_status = _AsyncRaw(_AsyncRoutes.checkpoint_status)
    checkpoint_restore = _AsyncRaw(_AsyncRoutes.checkpoint_restore)
    pause = _AsyncRaw(_AsyncRoutes.pause)
    resume = _AsyncRaw(_AsyncRoutes.resume)
    is_paused = _AsyncRaw(_AsyncRoutes.is_paused)
    abort_requests = _AsyncRaw(_AsyncRoutes.abort_requests)
    collective_rpc = _AsyncRaw(_AsyncRoutes.collective_rpc)
    start_profile = _AsyncRaw(_AsyncRoutes.start_profile)
    stop_profile = _AsyncRaw(_AsyncRoutes.stop_profile)
    apply_fault_tolerance = _AsyncRaw(_AsyncRoutes.apply_fault_tolerance)
    init_weight_transfer_engine = _AsyncRaw(_AsyncRoutes.init_weight_transfer_engine)
    start_weight_update = _AsyncRaw(_AsyncRoutes.start_weight_update)
    start_draft_weight_update = _AsyncRaw(_AsyncRoutes.start_draft_weight_update)
    update_weights = _AsyncRaw(_AsyncRoutes.update_weights)
    finish_weight_update = _AsyncRaw(_AsyncRoutes.finish_weight_update)
    update_weight_version = _AsyncRaw(_AsyncRoutes.update_weight_version)
    weight_info = _AsyncRaw(_AsyncRoutes.weight_info)
    weight_checker = _AsyncRaw(_AsyncRoutes.weight_checker)
    shutdown_weight_transfer_engine = _AsyncRaw(_AsyncRoutes.shutdown_weight_transfer_engine)
    load_lora_adapter = _AsyncRaw(_AsyncRoutes.load_lora_adapter)
    unload_lora_adapter = _AsyncRaw(_AsyncRoutes.unload_lora_adapter)
    # -- end generated --
