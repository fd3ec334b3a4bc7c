"""The fleets' client methods: every route and call record's client method on every target, derived from
the client's typed method (its parameters, signature and docstring), answering `FleetResult`.

One table (`_ClientMethods`, a base of both fleets) lists them; the fleet each is read from runs it
(`_each`): AsyncFleet fans the client method out over its targets and awaits every outcome, Fleet runs
AsyncFleet's method of the same name on its loop thread. A method with parameters of the fleet's own
(`Cli.fleet_params`: pause's rollback) is written by both fleets instead, and AsyncFleet writes its
init_weight_transfer_engine (a rank plan per target) over the table's. A test checks that every record
has its method on both fleets.
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from .._derived import DerivedMethod
from ..calls import CALLS
from ..client import AsyncDevClient
from ..records import Method
from ..routes import ROUTES
from .results import FleetResult

__all__ = ["FleetMethod"]

T = TypeVar("T")
P = ParamSpec("P")

RECORDS: dict[str, Method] = {m.name: m for m in (*ROUTES, *CALLS)}

_ON_EVERY_TARGET = (
    "On every target at once: a FleetResult of each target's answer; when any target failed, FleetError "
    "with every target's outcome (a fleet made with raise_on_error=False returns the FleetResult, failures "
    "inside)."
)


class _Awaiting(Protocol):
    """A fleet whose methods are awaited (AsyncFleet)."""

    def _each(
        self, method: FleetMethod[..., T], arguments: dict[str, Any]
    ) -> Coroutine[Any, Any, FleetResult[T]]: ...


class _Blocking(Protocol):
    """A fleet whose methods block (Fleet)."""

    def _each(self, method: FleetMethod[..., T], arguments: dict[str, Any]) -> FleetResult[T]: ...


class FleetMethod(DerivedMethod, Generic[P, T]):
    """`fleet.name(...)`: the client method `name` on every target, answering FleetResult (awaited on an
    AsyncFleet). `deadline`: its record's default deadline, one moment for every target of a call; None
    for a method without one."""

    def __init__(self, method: Callable[Concatenate[AsyncDevClient, P], Awaitable[T]]) -> None:
        super().__init__(method)
        record = RECORDS.get(self.name)
        if record is None:
            raise TypeError(
                f"{self.name}: a fleet method needs the client method's record (routes/, calls.py)"
            )
        self.deadline: float | None = record.deadline.default if record.deadline is not None else None

    def signature(self) -> inspect.Signature:
        signature = super().signature()
        answer = signature.return_annotation
        answer = answer if isinstance(answer, str) else inspect.formatannotation(answer)
        return signature.replace(return_annotation=f"FleetResult[{answer}]")

    def doc(self) -> str:
        note = _ON_EVERY_TARGET + (
            " The deadline is one moment for all targets." if self.deadline is not None else ""
        )
        return f"{inspect.cleandoc(super().doc() or '')}\n\n{textwrap.fill(note, 100)}"

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> FleetMethod[P, T]: ...
    @overload
    def __get__(
        self, obj: _Awaiting, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, FleetResult[T]]]: ...
    @overload
    def __get__(self, obj: _Blocking, owner: type[Any]) -> Callable[P, FleetResult[T]]: ...
    def __get__(self, obj: object | None, owner: type[Any]) -> Any:
        return self.bound(obj, owner)

    def runner(self, owner: type[Any]) -> tuple[Callable[..., Any], bool]:
        def run(fleet: Any, arguments: dict[str, Any], options: dict[str, Any]) -> Any:
            return fleet._each(self, {**arguments, **options})

        return run, inspect.iscoroutinefunction(owner._each)


class _ClientMethods:
    """Every client method on every target: one line per route and call record (`routes/`, `calls.py`),
    in their order, but pause (each fleet writes it)."""

    health = FleetMethod(AsyncDevClient.health)
    version = FleetMethod(AsyncDevClient.version)
    models = FleetMethod(AsyncDevClient.models)
    metrics_text = FleetMethod(AsyncDevClient.metrics_text)
    metrics = FleetMethod(AsyncDevClient.metrics)
    load = FleetMethod(AsyncDevClient.load)
    tokenizer_info = FleetMethod(AsyncDevClient.tokenizer_info)
    server_info = FleetMethod(AsyncDevClient.server_info)
    kv_event_sources = FleetMethod(AsyncDevClient.kv_event_sources)
    get_world_size = FleetMethod(AsyncDevClient.get_world_size)
    reset_prefix_cache = FleetMethod(AsyncDevClient.reset_prefix_cache)
    reset_mm_cache = FleetMethod(AsyncDevClient.reset_mm_cache)
    reset_encoder_cache = FleetMethod(AsyncDevClient.reset_encoder_cache)
    release_kv_cache_memory = FleetMethod(AsyncDevClient.release_kv_cache_memory)
    sleep = FleetMethod(AsyncDevClient.sleep)
    wake_up = FleetMethod(AsyncDevClient.wake_up)
    is_sleeping = FleetMethod(AsyncDevClient.is_sleeping)
    checkpoint_prepare = FleetMethod(AsyncDevClient.checkpoint_prepare)
    checkpoint_status = FleetMethod(AsyncDevClient.checkpoint_status)
    checkpoint_restore = FleetMethod(AsyncDevClient.checkpoint_restore)
    resume = FleetMethod(AsyncDevClient.resume)
    is_paused = FleetMethod(AsyncDevClient.is_paused)
    abort_requests = FleetMethod(AsyncDevClient.abort_requests)
    collective_rpc = FleetMethod(AsyncDevClient.collective_rpc)
    start_profile = FleetMethod(AsyncDevClient.start_profile)
    stop_profile = FleetMethod(AsyncDevClient.stop_profile)
    apply_fault_tolerance = FleetMethod(AsyncDevClient.apply_fault_tolerance)
    init_weight_transfer_engine = FleetMethod(AsyncDevClient.init_weight_transfer_engine)
    start_weight_update = FleetMethod(AsyncDevClient.start_weight_update)
    start_draft_weight_update = FleetMethod(AsyncDevClient.start_draft_weight_update)
    update_weights = FleetMethod(AsyncDevClient.update_weights)
    finish_weight_update = FleetMethod(AsyncDevClient.finish_weight_update)
    update_weight_version = FleetMethod(AsyncDevClient.update_weight_version)
    weight_info = FleetMethod(AsyncDevClient.weight_info)
    weight_checker = FleetMethod(AsyncDevClient.weight_checker)
    shutdown_weight_transfer_engine = FleetMethod(AsyncDevClient.shutdown_weight_transfer_engine)
    load_lora_adapter = FleetMethod(AsyncDevClient.load_lora_adapter)
    unload_lora_adapter = FleetMethod(AsyncDevClient.unload_lora_adapter)
    # The calls, written by hand on the client (calls.py).
    reset_prefix_cache_until_success = FleetMethod(AsyncDevClient.reset_prefix_cache_until_success)
    reset_prefix_cache_verified = FleetMethod(AsyncDevClient.reset_prefix_cache_verified)
    wait_until_ready = FleetMethod(AsyncDevClient.wait_until_ready)
    wait_until_sleeping = FleetMethod(AsyncDevClient.wait_until_sleeping)
    wait_until_awake = FleetMethod(AsyncDevClient.wait_until_awake)
    wait_until_paused = FleetMethod(AsyncDevClient.wait_until_paused)
    wait_until_resumed = FleetMethod(AsyncDevClient.wait_until_resumed)
    wait_until_checkpoint_prepared = FleetMethod(AsyncDevClient.wait_until_checkpoint_prepared)
    completion = FleetMethod(AsyncDevClient.completion)
    step_engine = FleetMethod(AsyncDevClient.step_engine)
    request = FleetMethod(AsyncDevClient.request)
    # The barrier over a fleet: all_ok only when every target's reset went through before the deadline.
    barrier = FleetMethod(AsyncDevClient.reset_prefix_cache_until_success)
