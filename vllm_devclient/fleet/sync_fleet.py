"""Fleet: the synchronous face of AsyncFleet, driving it on a private event-loop thread."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import (
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from typing_extensions import Unpack

from .._base_client import RequestOptions, TimeoutArg, WeightUpdateOptions
from ..client import AsyncDevClient
from ..constants import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
)
from ..endpoints import PauseMode
from ..errors import DevClientError
from ..models import MessageResult, StatusResult
from ..transports import CertArg, VerifyArg
from .async_fleet import AsyncFleet, AsyncFleetWeightUpdate
from .fan_out import _rebuild
from .results import FleetResult, OnResult

__all__ = ["Fleet", "FleetWeightUpdate"]

T = TypeVar("T")
P = ParamSpec("P")


class _SyncFanOut(Generic[P, T]):
    """`Fleet.name(...)`: the same fan-out as AsyncFleet's, run to completion on the fleet's loop thread."""

    def __init__(self, method: Callable[Concatenate[AsyncDevClient, P], Awaitable[T]]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _SyncFanOut[P, T]: ...

    @overload
    def __get__(self, obj: Fleet, owner: type[Any]) -> Callable[P, FleetResult[T]]: ...

    def __get__(self, obj: Fleet | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        name = self._method.__name__
        fan = getattr(obj._fleet, name)  # AsyncFleet's fan-out of the same method

        def fan_out(*args: P.args, **kwargs: P.kwargs) -> FleetResult[T]:
            return obj._run(fan(*args, **kwargs))

        fan_out.__name__ = fan_out.__qualname__ = name
        fan_out.__doc__ = self.__doc__
        return fan_out


class _LoopThread:
    """A private event loop on a daemon thread (daemon: a fleet never closed cannot hang interpreter exit)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="vllm-devclient-fleet", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a Fleet method was called from the fleet's own loop (an on_result callback?)")
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except BaseException:
            # Ctrl-C while waiting: stop the fan-out too, not just the wait.
            future.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class Fleet:
    """Synchronous fleet: the same methods and results as AsyncFleet, without await.

    `map(fn)` takes the same callable as AsyncFleet's, given an AsyncDevClient:
    `fleet.map(lambda c: c.reset_prefix_cache(reset_external=True))`.
    """

    def __init__(
        self,
        urls: Iterable[str],
        *,
        api_key: str | None = None,
        timeout: TimeoutArg = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        raise_on_error: bool = False,
        on_result: OnResult | None = None,
        default_headers: Mapping[str, str] | None = None,
        verify: VerifyArg = True,
        cert: CertArg | None = None,
    ) -> None:
        self._fleet = AsyncFleet(
            urls,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            raise_on_error=raise_on_error,
            on_result=on_result,
            default_headers=default_headers,
            verify=verify,
            cert=cert,
        )
        self._loop = _LoopThread()
        self._finalizer = weakref.finalize(self, self._loop.close)

    @property
    def urls(self) -> tuple[str, ...]:
        return self._fleet.urls

    @property
    def raise_on_error(self) -> bool:
        return self._fleet.raise_on_error

    def __repr__(self) -> str:
        return f"Fleet({len(self.urls)} targets)"

    def __reduce__(self) -> tuple[Any, ...]:
        settings = self._fleet._settings
        assert settings is not None  # a Fleet always builds its pool from configuration
        self._fleet._tls.refuse_pickling(type(self).__name__)
        return (_rebuild, (type(self), self.urls, settings))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.loop.is_closed():
            coro.close()
            raise DevClientError("this Fleet is closed")
        return self._loop.run(coro)

    def close(self) -> None:
        """Close the fleet's connections and its loop thread. Idempotent."""
        if not self._loop.loop.is_closed():
            self._loop.run(self._fleet.close())
        self._finalizer()

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def map(
        self,
        fn: Callable[[AsyncDevClient], Awaitable[T]],
        *,
        urls: Iterable[str] | None = None,
        operation: str = "map",
    ) -> FleetResult[T]:
        """`fn(client)` for every target's AsyncDevClient (or only those in `urls`); see AsyncFleet.map."""
        return self._run(self._fleet.map(fn, urls=urls, operation=operation))

    def call(self, method: str, /, *args: Any, **kwargs: Any) -> FleetResult[Any]:
        """Any client method by name, e.g. `fleet.call("reset_prefix_cache", reset_external=True)`."""
        return self._run(self._fleet.call(method, *args, **kwargs))

    def pause(
        self,
        mode: PauseMode = "abort",
        *,
        clear_cache: bool | None = None,
        rollback: bool = False,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[StatusResult]:
        """Pause every target; see AsyncFleet.pause."""
        return self._run(self._fleet.pause(mode, clear_cache=clear_cache, rollback=rollback, **options))

    @contextmanager
    def _flow(self, flow: AbstractAsyncContextManager[T]) -> Iterator[T]:
        value = self._run(flow.__aenter__())
        try:
            yield value
        except BaseException as exc:
            if not self._run(flow.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self._run(flow.__aexit__(None, None, None))

    @contextmanager
    def paused(
        self, mode: PauseMode = "keep", *, clear_cache: bool | None = None, wait: bool = True
    ) -> Iterator[Fleet]:
        """Pause every target for the block, resume every one after; see AsyncFleet.paused."""
        with self._flow(self._fleet.paused(mode, clear_cache=clear_cache, wait=wait)):
            yield self

    @contextmanager
    def sleeping(self, level: int = 1, *, mode: PauseMode = "abort", wait: bool = True) -> Iterator[Fleet]:
        """Every target asleep for the block, awake after; see AsyncFleet.sleeping."""
        with self._flow(self._fleet.sleeping(level, mode=mode, wait=wait)):
            yield self

    @contextmanager
    def weight_update(self, **options: Unpack[WeightUpdateOptions]) -> Iterator[FleetWeightUpdate]:
        """The weight_update() flow on every target; see AsyncFleet.weight_update."""
        with self._flow(self._fleet.weight_update(**options)) as update:
            yield FleetWeightUpdate(self, update)

    # -- generated: sync fleet methods (make generate) --
    health = _SyncFanOut(AsyncDevClient.health)
    version = _SyncFanOut(AsyncDevClient.version)
    models = _SyncFanOut(AsyncDevClient.models)
    metrics_text = _SyncFanOut(AsyncDevClient.metrics_text)
    metrics = _SyncFanOut(AsyncDevClient.metrics)
    load = _SyncFanOut(AsyncDevClient.load)
    tokenizer_info = _SyncFanOut(AsyncDevClient.tokenizer_info)
    reset_prefix_cache = _SyncFanOut(AsyncDevClient.reset_prefix_cache)
    reset_mm_cache = _SyncFanOut(AsyncDevClient.reset_mm_cache)
    reset_encoder_cache = _SyncFanOut(AsyncDevClient.reset_encoder_cache)
    release_kv_cache_memory = _SyncFanOut(AsyncDevClient.release_kv_cache_memory)
    sleep = _SyncFanOut(AsyncDevClient.sleep)
    wake_up = _SyncFanOut(AsyncDevClient.wake_up)
    is_sleeping = _SyncFanOut(AsyncDevClient.is_sleeping)
    resume = _SyncFanOut(AsyncDevClient.resume)
    is_paused = _SyncFanOut(AsyncDevClient.is_paused)
    abort_requests = _SyncFanOut(AsyncDevClient.abort_requests)
    collective_rpc = _SyncFanOut(AsyncDevClient.collective_rpc)
    server_info = _SyncFanOut(AsyncDevClient.server_info)
    kv_event_sources = _SyncFanOut(AsyncDevClient.kv_event_sources)
    get_world_size = _SyncFanOut(AsyncDevClient.get_world_size)
    init_weight_transfer_engine = _SyncFanOut(AsyncDevClient.init_weight_transfer_engine)
    start_weight_update = _SyncFanOut(AsyncDevClient.start_weight_update)
    start_draft_weight_update = _SyncFanOut(AsyncDevClient.start_draft_weight_update)
    update_weights = _SyncFanOut(AsyncDevClient.update_weights)
    finish_weight_update = _SyncFanOut(AsyncDevClient.finish_weight_update)
    update_weight_version = _SyncFanOut(AsyncDevClient.update_weight_version)
    weight_info = _SyncFanOut(AsyncDevClient.weight_info)
    weight_checker = _SyncFanOut(AsyncDevClient.weight_checker)
    shutdown_weight_transfer_engine = _SyncFanOut(AsyncDevClient.shutdown_weight_transfer_engine)
    load_lora_adapter = _SyncFanOut(AsyncDevClient.load_lora_adapter)
    unload_lora_adapter = _SyncFanOut(AsyncDevClient.unload_lora_adapter)
    start_profile = _SyncFanOut(AsyncDevClient.start_profile)
    stop_profile = _SyncFanOut(AsyncDevClient.stop_profile)
    reset_prefix_cache_until_success = _SyncFanOut(AsyncDevClient.reset_prefix_cache_until_success)
    reset_prefix_cache_verified = _SyncFanOut(AsyncDevClient.reset_prefix_cache_verified)
    wait_until_ready = _SyncFanOut(AsyncDevClient.wait_until_ready)
    wait_until_sleeping = _SyncFanOut(AsyncDevClient.wait_until_sleeping)
    wait_until_awake = _SyncFanOut(AsyncDevClient.wait_until_awake)
    wait_until_paused = _SyncFanOut(AsyncDevClient.wait_until_paused)
    wait_until_resumed = _SyncFanOut(AsyncDevClient.wait_until_resumed)
    completion = _SyncFanOut(AsyncDevClient.completion)
    step_engine = _SyncFanOut(AsyncDevClient.step_engine)
    request = _SyncFanOut(AsyncDevClient.request)
    # -- end generated --
    barrier = reset_prefix_cache_until_success


class FleetWeightUpdate:
    """The handle of a sync fleet's `weight_update()` block."""

    def __init__(self, fleet: Fleet, update: AsyncFleetWeightUpdate) -> None:
        self._fleet = fleet
        self._update = update

    def update(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> FleetResult[MessageResult]:
        """Send one batch to every target; FleetError when any failed."""
        return self._fleet._run(self._update.update(update_info))

    def start(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> Future[FleetResult[MessageResult]]:
        """Send one batch to every target in the background; the block's end waits for it."""

        async def started() -> asyncio.Task[FleetResult[MessageResult]]:
            return self._update.start(update_info)

        task = self._fleet._run(started())
        future: Future[FleetResult[MessageResult]] = Future()

        def done(t: asyncio.Task[FleetResult[MessageResult]]) -> None:
            if t.cancelled():
                future.cancel()
            elif (error := t.exception()) is not None:
                future.set_exception(error)
            else:
                future.set_result(t.result())

        task.add_done_callback(done)
        return future
