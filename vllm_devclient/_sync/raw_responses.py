# Generated from vllm_devclient/_async/raw_responses.py by scripts/unasync.py; do not edit.
"""`client.with_raw_response`: the route methods answering the typed result and the HTTP response (the
response object of the stack that answered: httpx's, httpx2's, or the SDK's own `WireResponse`).

The table lists every route record (`vllm_devclient/routes/`, written by `make generate`): one exchange
each, so one raw response each. The call asks for the raw response in its own options, never in ambient
state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

from .._base_client import (
    RAW_RESPONSE,
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
        method = getattr(obj._client, self._method.__name__)  # the client's own: TypeErrors name its class

        def raw(*args: P.args, **kwargs: P.kwargs) -> RawResponse[T]:
            # The call's own options carry the request for the raw response (RequestOptions' hidden key).
            options: dict[str, Any] = {**kwargs, RAW_RESPONSE: True}
            return cast(RawResponse[T], method(*args, **options))

        raw.__name__ = raw.__qualname__ = method.__name__
        raw.__doc__ = method.__doc__
        return raw


class RawResponses:
    """Every route method of the client, answering `RawResponse` (typed answer + HTTP response)."""

    def __init__(self, client: _SyncRoutes) -> None:
        self._client = client

    # -- generated: the raw-response methods, from vllm_devclient/routes/ --
    health = _SyncRaw(_SyncRoutes.health)
    version = _SyncRaw(_SyncRoutes.version)
    models = _SyncRaw(_SyncRoutes.models)
    metrics_text = _SyncRaw(_SyncRoutes.metrics_text)
    metrics = _SyncRaw(_SyncRoutes.metrics)
    load = _SyncRaw(_SyncRoutes.load)
    tokenizer_info = _SyncRaw(_SyncRoutes.tokenizer_info)
    server_info = _SyncRaw(_SyncRoutes.server_info)
    kv_event_sources = _SyncRaw(_SyncRoutes.kv_event_sources)
    get_world_size = _SyncRaw(_SyncRoutes.get_world_size)
    reset_prefix_cache = _SyncRaw(_SyncRoutes.reset_prefix_cache)
    reset_mm_cache = _SyncRaw(_SyncRoutes.reset_mm_cache)
    reset_encoder_cache = _SyncRaw(_SyncRoutes.reset_encoder_cache)
    release_kv_cache_memory = _SyncRaw(_SyncRoutes.release_kv_cache_memory)
    sleep = _SyncRaw(_SyncRoutes.sleep)
    wake_up = _SyncRaw(_SyncRoutes.wake_up)
    is_sleeping = _SyncRaw(_SyncRoutes.is_sleeping)
    checkpoint_prepare = _SyncRaw(_SyncRoutes.checkpoint_prepare)
    checkpoint_status = _SyncRaw(_SyncRoutes.checkpoint_status)
    checkpoint_restore = _SyncRaw(_SyncRoutes.checkpoint_restore)
    pause = _SyncRaw(_SyncRoutes.pause)
    resume = _SyncRaw(_SyncRoutes.resume)
    is_paused = _SyncRaw(_SyncRoutes.is_paused)
    abort_requests = _SyncRaw(_SyncRoutes.abort_requests)
    collective_rpc = _SyncRaw(_SyncRoutes.collective_rpc)
    start_profile = _SyncRaw(_SyncRoutes.start_profile)
    stop_profile = _SyncRaw(_SyncRoutes.stop_profile)
    apply_fault_tolerance = _SyncRaw(_SyncRoutes.apply_fault_tolerance)
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
    # -- end generated --
