"""The route methods of the blocking client, derived from the async ones (`_async/routes.py`, written from
the records): each with its async twin's signature and docstring, sending the same request, built from
the route's record, through the blocking transport (`_SyncCore._send`).

Written by hand, unlike the rest of `_sync/`; the table below is written by `make generate`, one line per
route record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from .._async.routes import _AsyncRoutes
from .._derived import DerivedMethod
from ..routes import endpoint
from .core import _SyncCore

__all__ = ["_SyncRoutes"]

T = TypeVar("T")
P = ParamSpec("P")


class _SyncRoute(DerivedMethod, Generic[P, T]):
    """`client.name(...)`: the async route method `name`, blocking: the same parameters, answer and
    docstring, the same request."""

    def __init__(self, method: Callable[Concatenate[_AsyncRoutes, P], Awaitable[T]]) -> None:
        super().__init__(method)  # typed here: P and T are the async method's parameters and answer

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[Concatenate[_SyncRoutes, P], T]: ...
    @overload
    def __get__(self, obj: _SyncRoutes, owner: type[Any]) -> Callable[P, T]: ...
    def __get__(self, obj: _SyncRoutes | None, owner: type[Any]) -> Any:
        return self.bound(obj, owner)

    def runner(self, owner: type[Any]) -> tuple[Callable[..., Any], bool]:
        name = self.name

        def send(client: _SyncRoutes, arguments: dict[str, Any], options: dict[str, Any]) -> Any:
            return client._send(endpoint(name, **arguments), options)

        return send, False


class _SyncRoutes(_SyncCore):
    """Every route, one method each (derived from the async client's)."""

    # -- generated: the sync route methods, from vllm_devclient/routes/ --
    health = _SyncRoute(_AsyncRoutes.health)
    version = _SyncRoute(_AsyncRoutes.version)
    models = _SyncRoute(_AsyncRoutes.models)
    metrics_text = _SyncRoute(_AsyncRoutes.metrics_text)
    metrics = _SyncRoute(_AsyncRoutes.metrics)
    load = _SyncRoute(_AsyncRoutes.load)
    tokenizer_info = _SyncRoute(_AsyncRoutes.tokenizer_info)
    server_info = _SyncRoute(_AsyncRoutes.server_info)
    kv_event_sources = _SyncRoute(_AsyncRoutes.kv_event_sources)
    get_world_size = _SyncRoute(_AsyncRoutes.get_world_size)
    reset_prefix_cache = _SyncRoute(_AsyncRoutes.reset_prefix_cache)
    reset_mm_cache = _SyncRoute(_AsyncRoutes.reset_mm_cache)
    reset_encoder_cache = _SyncRoute(_AsyncRoutes.reset_encoder_cache)
    release_kv_cache_memory = _SyncRoute(_AsyncRoutes.release_kv_cache_memory)
    sleep = _SyncRoute(_AsyncRoutes.sleep)
    wake_up = _SyncRoute(_AsyncRoutes.wake_up)
    is_sleeping = _SyncRoute(_AsyncRoutes.is_sleeping)
    checkpoint_prepare = _SyncRoute(_AsyncRoutes.checkpoint_prepare)
    checkpoint_status = _SyncRoute(_AsyncRoutes.checkpoint_status)
    checkpoint_restore = _SyncRoute(_AsyncRoutes.checkpoint_restore)
    pause = _SyncRoute(_AsyncRoutes.pause)
    resume = _SyncRoute(_AsyncRoutes.resume)
    is_paused = _SyncRoute(_AsyncRoutes.is_paused)
    abort_requests = _SyncRoute(_AsyncRoutes.abort_requests)
    collective_rpc = _SyncRoute(_AsyncRoutes.collective_rpc)
    start_profile = _SyncRoute(_AsyncRoutes.start_profile)
    stop_profile = _SyncRoute(_AsyncRoutes.stop_profile)
    apply_fault_tolerance = _SyncRoute(_AsyncRoutes.apply_fault_tolerance)
    init_weight_transfer_engine = _SyncRoute(_AsyncRoutes.init_weight_transfer_engine)
    start_weight_update = _SyncRoute(_AsyncRoutes.start_weight_update)
    start_draft_weight_update = _SyncRoute(_AsyncRoutes.start_draft_weight_update)
    update_weights = _SyncRoute(_AsyncRoutes.update_weights)
    finish_weight_update = _SyncRoute(_AsyncRoutes.finish_weight_update)
    update_weight_version = _SyncRoute(_AsyncRoutes.update_weight_version)
    weight_info = _SyncRoute(_AsyncRoutes.weight_info)
    weight_checker = _SyncRoute(_AsyncRoutes.weight_checker)
    shutdown_weight_transfer_engine = _SyncRoute(_AsyncRoutes.shutdown_weight_transfer_engine)
    load_lora_adapter = _SyncRoute(_AsyncRoutes.load_lora_adapter)
    unload_lora_adapter = _SyncRoute(_AsyncRoutes.unload_lora_adapter)
    # -- end generated --
