# Generated from vllm_devclient/_async/raw_responses.py by scripts/generate.py; do not edit.
"""`client.with_raw_response`: the route methods answering the typed result and the httpx.Response.

The table lists every route record (`vllm_devclient/routes.py`, written by `make generate`): one exchange
each, so one raw response each.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from .._base_client import (
    RAW_MODE,
    RawResponse,
)
from .routes import _SyncRoutes

__all__ = ["RawResponses"]

T = TypeVar("T")
P = ParamSpec("P")


class _SyncRaw(Generic[P, T]):
    """`with_raw_response.name(...)`: the client method `name`, answering a RawResponse."""

    def __init__(self, method: Callable[Concatenate[_SyncRoutes, P], T]) -> None:
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

    def __init__(self, client: _SyncRoutes) -> None:
        self._client = client

    # -- generated: raw-response methods (make generate) --
    health = _SyncRaw(_SyncRoutes.health)
    version = _SyncRaw(_SyncRoutes.version)
    models = _SyncRaw(_SyncRoutes.models)
    metrics_text = _SyncRaw(_SyncRoutes.metrics_text)
    metrics = _SyncRaw(_SyncRoutes.metrics)
    load = _SyncRaw(_SyncRoutes.load)
    tokenizer_info = _SyncRaw(_SyncRoutes.tokenizer_info)
    reset_prefix_cache = _SyncRaw(_SyncRoutes.reset_prefix_cache)
    reset_mm_cache = _SyncRaw(_SyncRoutes.reset_mm_cache)
    reset_encoder_cache = _SyncRaw(_SyncRoutes.reset_encoder_cache)
    release_kv_cache_memory = _SyncRaw(_SyncRoutes.release_kv_cache_memory)
    sleep = _SyncRaw(_SyncRoutes.sleep)
    wake_up = _SyncRaw(_SyncRoutes.wake_up)
    is_sleeping = _SyncRaw(_SyncRoutes.is_sleeping)
    pause = _SyncRaw(_SyncRoutes.pause)
    resume = _SyncRaw(_SyncRoutes.resume)
    is_paused = _SyncRaw(_SyncRoutes.is_paused)
    abort_requests = _SyncRaw(_SyncRoutes.abort_requests)
    collective_rpc = _SyncRaw(_SyncRoutes.collective_rpc)
    server_info = _SyncRaw(_SyncRoutes.server_info)
    kv_event_sources = _SyncRaw(_SyncRoutes.kv_event_sources)
    get_world_size = _SyncRaw(_SyncRoutes.get_world_size)
    init_weight_transfer_engine = _SyncRaw(_SyncRoutes.init_weight_transfer_engine)
    start_weight_update = _SyncRaw(_SyncRoutes.start_weight_update)
    start_draft_weight_update = _SyncRaw(_SyncRoutes.start_draft_weight_update)
    update_weights = _SyncRaw(_SyncRoutes.update_weights)
    finish_weight_update = _SyncRaw(_SyncRoutes.finish_weight_update)
    update_weight_version = _SyncRaw(_SyncRoutes.update_weight_version)
    weight_info = _SyncRaw(_SyncRoutes.weight_info)
    weight_checker = _SyncRaw(_SyncRoutes.weight_checker)
    shutdown_weight_transfer_engine = _SyncRaw(_SyncRoutes.shutdown_weight_transfer_engine)
    load_lora_adapter = _SyncRaw(_SyncRoutes.load_lora_adapter)
    unload_lora_adapter = _SyncRaw(_SyncRoutes.unload_lora_adapter)
    start_profile = _SyncRaw(_SyncRoutes.start_profile)
    stop_profile = _SyncRaw(_SyncRoutes.stop_profile)
    # -- end generated --
