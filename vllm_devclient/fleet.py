"""Fleet and AsyncFleet: one client call sent to many servers at once, with an outcome for every target.

The fan-out is written once, in `AsyncFleet` (asyncio, a semaphore bounding how many targets are in flight,
one shared connection pool). `Fleet` is the synchronous face of the same object: it drives an `AsyncFleet`
on a private event-loop thread, so both behave identically.

Every client method is available on both fleets with the client's own signature (typed through the
descriptors below, so mypy checks the arguments), plus `call("method_name", ...)` for any client method
by name and `map(fn)` for anything else. Results are a `FleetResult`: target URL -> `TargetOutcome`.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import httpx
from typing_extensions import Unpack

from . import arguments as check
from ._base_client import ClientConfig, RequestOptions, TimeoutArg
from .client import AsyncDevClient
from .constants import (
    DEFAULT_BARRIER_DEADLINE,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_READY_DEADLINE,
    DEFAULT_TIMEOUT,
    DEFAULT_WAIT_DEADLINE,
)
from .endpoints import PauseMode
from .errors import DevClientError, InvalidParameterError
from .models import MessageResult, StatusResult
from .transports import Origin, make_async_transport

__all__ = [
    "CLIENT_METHODS",
    "AsyncFleet",
    "Fleet",
    "FleetError",
    "FleetResult",
    "TargetOutcome",
]

T = TypeVar("T")
P = ParamSpec("P")

# Methods that run until a deadline: over a fleet the deadline is one moment for every target, so targets
# that wait for a slot (more targets than max_concurrency) get what is left of it, not a new one.
_DEADLINES = {
    "reset_prefix_cache_until_success": DEFAULT_BARRIER_DEADLINE,
    "wait_until_ready": DEFAULT_READY_DEADLINE,
    "wait_until_sleeping": DEFAULT_WAIT_DEADLINE,
    "wait_until_awake": DEFAULT_WAIT_DEADLINE,
    "wait_until_paused": DEFAULT_WAIT_DEADLINE,
    "wait_until_resumed": DEFAULT_WAIT_DEADLINE,
}
# The least a late target's deadline is given, so its one try can still be answered.
_LEAST_DEADLINE = 0.001


def _shared_deadline(name: str, kwargs: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    """For a deadline method: the keyword arguments of a target starting now, the deadline made absolute."""
    if name not in _DEADLINES:
        return lambda: kwargs
    given = kwargs.pop("deadline", kwargs.pop("timeout", _DEADLINES[name]))
    end = time.monotonic() + check.seconds(given, "deadline")
    return lambda: {**kwargs, "deadline": max(_LEAST_DEADLINE, end - time.monotonic())}


# Every public coroutine method of the client, found at import time: `call()` accepts exactly these, and a
# test checks that both fleets have a typed method for each, so the fleet cannot fall behind the client.
CLIENT_METHODS: frozenset[str] = frozenset(
    name
    for name, member in inspect.getmembers(AsyncDevClient, inspect.iscoroutinefunction)
    if not name.startswith("_") and name != "close"
)


@dataclass(frozen=True)
class TargetOutcome(Generic[T]):
    """What one target answered: a value, or the error the client raised for it."""

    url: str
    value: T | None
    error: DevClientError | None
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return self.error is None

    def unwrap(self) -> T:
        """The value, or raise this target's error."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]  # None is a valid T for None-returning methods


class FleetResult(Mapping[str, TargetOutcome[T]]):
    """Target URL -> outcome, for every target, in the fleet's order (not completion order)."""

    def __init__(
        self,
        outcomes: Iterable[TargetOutcome[T]],
        *,
        operation: str,
        rollback: FleetResult[Any] | None = None,
    ) -> None:
        self._outcomes = {o.url: o for o in outcomes}
        self.operation = operation
        # Set by pause(rollback=True) when it resumed the targets it had paused.
        self.rollback = rollback

    def __getitem__(self, url: str) -> TargetOutcome[T]:
        return self._outcomes[url.rstrip("/")]

    def __iter__(self) -> Iterator[str]:
        return iter(self._outcomes)

    def __len__(self) -> int:
        return len(self._outcomes)

    def __repr__(self) -> str:
        return f"FleetResult({self.operation}: {len(self.ok)} ok, {len(self.failed)} failed)"

    @property
    def ok(self) -> dict[str, T]:
        """URL -> value for the targets that succeeded."""
        return {url: o.value for url, o in self._outcomes.items() if o.error is None}  # type: ignore[misc]

    @property
    def failed(self) -> dict[str, DevClientError]:
        """URL -> error for the targets that failed."""
        return {url: o.error for url, o in self._outcomes.items() if o.error is not None}

    @property
    def all_ok(self) -> bool:
        return not self.failed

    def raise_for_errors(self) -> FleetResult[T]:
        """All or nothing: raise one FleetError naming every failed target; return self when none failed."""
        if self.failed:
            raise FleetError(self)
        return self


class FleetError(DevClientError):
    """At least one target failed; `.errors` maps each failed target's URL to its error."""

    def __init__(self, result: FleetResult[Any]) -> None:
        self.result = result
        self.errors: dict[str, DevClientError] = result.failed
        self.operation = result.operation
        lines = [
            f"{result.operation} failed on {len(self.errors)} of {len(result)} targets:",
            *(f"  {url}: {type(err).__name__}: {err}" for url, err in self.errors.items()),
        ]
        if result.rollback is not None:
            undo = result.rollback
            lines.append(f"rolled back with {undo.operation} on {len(undo)} targets:")
            lines += [f"  {url}: ok" for url in undo.ok]
            lines += [f"  {url}: {type(e).__name__}: {e}" for url, e in undo.failed.items()]
        super().__init__("\n".join(lines))


def _client_method(name: str) -> Callable[..., Awaitable[Any]]:
    if name not in CLIENT_METHODS:
        raise InvalidParameterError(
            f"{name!r} is not a client method; use one of: {', '.join(sorted(CLIENT_METHODS))}"
        )
    method: Callable[..., Awaitable[Any]] = getattr(AsyncDevClient, name)
    return method


def _listed(urls: Iterable[str]) -> list[str]:
    if isinstance(urls, str) or not isinstance(urls, Iterable):
        raise InvalidParameterError("urls must be a list of base URLs, not a single string")
    out = list(urls)
    if not out:
        raise InvalidParameterError("a fleet needs at least one target URL")
    return out


def _normalise(urls: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for url in _listed(urls):
        url = check.base_url(url).url
        if url in out:
            raise InvalidParameterError(f"target {url} is listed twice; each server must appear once")
        out.append(url)
    if not out:
        raise InvalidParameterError("a fleet needs at least one target URL")
    return tuple(out)


class _FanOut(Generic[P, T]):
    """`AsyncFleet.name(...)`: the client method `name` on every target, with the client's signature."""

    def __init__(self, method: Callable[Concatenate[AsyncDevClient, P], Awaitable[T]]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> _FanOut[P, T]: ...

    @overload
    def __get__(
        self, obj: AsyncFleet, owner: type[Any]
    ) -> Callable[P, Coroutine[Any, Any, FleetResult[T]]]: ...

    def __get__(self, obj: AsyncFleet | None, owner: type[Any]) -> Any:
        if obj is None:
            return self
        method, name = self._method, self._method.__name__

        async def fan_out(*args: P.args, **kwargs: P.kwargs) -> FleetResult[T]:
            per_target = _shared_deadline(name, dict(kwargs))
            return await obj.map(lambda client: method(client, *args, **per_target()), operation=name)

        fan_out.__name__ = fan_out.__qualname__ = name
        fan_out.__doc__ = self.__doc__
        return fan_out


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
        method, name = self._method, self._method.__name__

        def fan_out(*args: P.args, **kwargs: P.kwargs) -> FleetResult[T]:
            per_target = _shared_deadline(name, dict(kwargs))
            return obj._run(
                obj._fleet.map(lambda client: method(client, *args, **per_target()), operation=name)
            )

        fan_out.__name__ = fan_out.__qualname__ = name
        fan_out.__doc__ = self.__doc__
        return fan_out


OnResult = Callable[[TargetOutcome[Any]], None]


class AsyncFleet:
    """Many servers, one call: `await fleet.reset_prefix_cache()` -> FleetResult.

    `max_concurrency` bounds how many targets are in flight at once (across concurrent calls on this
    fleet). `raise_on_error=True` makes every call all-or-nothing (FleetError when any target failed);
    otherwise call `.raise_for_errors()` on the result. `on_result` is called as each target finishes
    (for progress display). Arguments that are invalid everywhere (InvalidParameterError) are raised as
    they are, since nothing was sent; anything that is not a DevClientError is a bug and propagates.
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
        http_client: httpx.AsyncClient | None = None,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.max_concurrency = check.positive_int(max_concurrency, "max_concurrency")
        self.raise_on_error = check.flag(raise_on_error, "raise_on_error")
        self.on_result = on_result
        configs = [
            ClientConfig.of(
                url,
                api_key=api_key,
                timeout=timeout,
                max_retries=max_retries,
                model=None,
                default_headers=default_headers,
                transport=None,
            )
            for url in _listed(urls)
        ]
        self.urls = _normalise([c.url.url for c in configs])
        # One connection pool for every target: aiohttp keys its connections by host, and one pool's
        # bookkeeping costs less per request than many (an http_client passed in is shared the same way).
        first = configs[0]
        origin = Origin(first.url.scheme, first.url.host, first.url.port, first.url.prefix)  # type: ignore[arg-type]
        self._transport = make_async_transport(first.transport, origin, http_client)
        self.clients: dict[str, AsyncDevClient] = {
            c.url.url: AsyncDevClient._from_config(c, self._transport) for c in configs
        }
        self._semaphore = asyncio.Semaphore(self.max_concurrency)
        self._closed = False
        # What a pickled fleet is rebuilt from (a Ray actor hand-off): the configuration, not the pool.
        self._settings: dict[str, Any] | None = (
            None
            if http_client is not None
            else {
                "api_key": api_key,
                "timeout": timeout,
                "max_retries": max_retries,
                "max_concurrency": max_concurrency,
                "raise_on_error": raise_on_error,
                "on_result": on_result,
                "default_headers": default_headers,
            }
        )

    def __reduce__(self) -> tuple[Any, ...]:
        if self._settings is None:
            raise TypeError(
                "a fleet made with http_client= cannot be pickled; pickle one made from configuration"
            )
        return (_rebuild, (type(self), self.urls, self._settings))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.urls)} targets)"

    async def close(self) -> None:
        """Close the connections this fleet opened (not an `http_client` passed in). Idempotent."""
        if not self._closed:
            self._closed = True
            for client in self.clients.values():
                client._closed = True
            await self._transport.aclose()

    async def __aenter__(self) -> AsyncFleet:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- the fan-out -------------------------------------------------------------------------------------

    async def _gather(
        self, fn: Callable[[AsyncDevClient], Awaitable[T]], urls: Sequence[str], operation: str
    ) -> FleetResult[T]:
        async def one(url: str) -> TargetOutcome[T]:
            async with self._semaphore:
                start = time.perf_counter()
                try:
                    value = await fn(self.clients[url])
                except DevClientError as exc:
                    outcome = TargetOutcome[T](url, None, exc, time.perf_counter() - start)
                else:
                    outcome = TargetOutcome(url, value, None, time.perf_counter() - start)
            if self.on_result is not None:
                self.on_result(outcome)
            return outcome

        tasks = [asyncio.ensure_future(one(url)) for url in urls]
        try:
            outcomes = await asyncio.gather(*tasks)
        except BaseException:
            # A bug in `fn` or a cancellation: leave no target's request running behind us.
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        for outcome in outcomes:
            if isinstance(outcome.error, InvalidParameterError):
                raise outcome.error
        return FleetResult(outcomes, operation=operation)

    def _finish(self, result: FleetResult[T]) -> FleetResult[T]:
        return result.raise_for_errors() if self.raise_on_error else result

    def _targets(self, urls: Iterable[str] | None) -> tuple[str, ...]:
        if urls is None:
            return self.urls
        chosen = _normalise(urls)
        unknown = [u for u in chosen if u not in self.clients]
        if unknown:
            raise InvalidParameterError(f"not in this fleet: {', '.join(unknown)}")
        return chosen

    async def map(
        self,
        fn: Callable[[AsyncDevClient], Awaitable[T]],
        *,
        urls: Iterable[str] | None = None,
        operation: str = "map",
    ) -> FleetResult[T]:
        """`await fn(client)` for every target's AsyncDevClient (or only those in `urls`)."""
        return self._finish(await self._gather(fn, self._targets(urls), operation))

    async def call(self, method: str, /, *args: Any, **kwargs: Any) -> FleetResult[Any]:
        """Any client method by name, e.g. `await fleet.call("reset_prefix_cache", reset_external=True)`."""
        fn = _client_method(method)
        return await self.map(lambda client: fn(client, *args, **kwargs), operation=method)

    async def pause(
        self,
        mode: PauseMode = "abort",
        *,
        clear_cache: bool | None = None,
        rollback: bool = False,
        **options: Unpack[RequestOptions],
    ) -> FleetResult[StatusResult]:
        """Pause every target. With `rollback=True`, when some targets fail, resume the ones that paused.

        Only targets whose pause succeeded are resumed: a target whose pause failed (even by a timeout,
        when its state is unknown) is left alone. The resume outcomes are in `result.rollback`.
        """
        result = await self._gather(
            lambda client: client.pause(mode, clear_cache=clear_cache, **options), self.urls, "pause"
        )
        if rollback and result.failed and result.ok:
            undo = await self._gather(lambda client: client.resume(**options), list(result.ok), "resume")
            result = FleetResult(result.values(), operation="pause", rollback=undo)
        return self._finish(result)

    # ---- flows: all targets or none --------------------------------------------------------------------

    @asynccontextmanager
    async def paused(
        self, mode: PauseMode = "keep", *, clear_cache: bool | None = None, wait: bool = True
    ) -> AsyncIterator[AsyncFleet]:
        """Pause every target for the block and resume every one when it ends, however it ends.

        All or none: when some targets fail to pause, the ones that paused are resumed and FleetError is
        raised before the block runs.

        Args:
            mode: what happens to requests in flight: abort, wait or keep.
            clear_cache: also clear the caches when pausing.
            wait: wait until every target says it is paused before entering the block.
        """
        (await self.pause(mode, clear_cache=clear_cache, rollback=True)).raise_for_errors()
        try:
            if wait:
                (
                    await self._gather(lambda c: c.wait_until_paused(), self.urls, "wait_until_paused")
                ).raise_for_errors()
            yield self
        finally:
            resumed = await self._gather(lambda c: c.resume(), self.urls, "resume")
        resumed.raise_for_errors()

    @asynccontextmanager
    async def sleeping(
        self, level: int = 1, *, mode: PauseMode = "abort", wait: bool = True
    ) -> AsyncIterator[AsyncFleet]:
        """Put every target to sleep for the block and wake every one when it ends, however it ends.

        All or none: when some targets fail to sleep, the ones that slept are woken and FleetError is raised.

        Args:
            level: 0, 1 (offload weights) or 2 (discard them).
            mode: what happens to requests in flight: abort, wait or keep.
            wait: wait until every target says it sleeps before entering, and is awake after waking.
        """
        slept = await self._gather(lambda c: c.sleep(level, mode=mode), self.urls, "sleep")
        if slept.failed:
            if slept.ok:
                undo = await self._gather(lambda c: c.wake_up(), list(slept.ok), "wake_up")
                slept = FleetResult(slept.values(), operation="sleep", rollback=undo)
            raise FleetError(slept)
        try:
            if wait:
                (
                    await self._gather(lambda c: c.wait_until_sleeping(), self.urls, "wait_until_sleeping")
                ).raise_for_errors()
            yield self
        finally:
            woke = await self._gather(lambda c: c.wake_up(), self.urls, "wake_up")
            if wait and woke.all_ok:
                awake = await self._gather(lambda c: c.wait_until_awake(), self.urls, "wait_until_awake")
                awake.raise_for_errors()
        woke.raise_for_errors()

    @asynccontextmanager
    async def weight_update(
        self,
        *,
        weight_version: str | None = None,
        pause_mode: PauseMode = "keep",
        clear_cache: bool | None = None,
        draft: bool = False,
    ) -> AsyncIterator[AsyncFleetWeightUpdate]:
        """The single-server weight_update() flow on every target: pause, start, your batches, finish, resume.

        Every step is all-or-nothing (FleetError naming the failed targets); resume always runs.

        Args:
            weight_version: the version the new weights carry, set by the finish.
            pause_mode: what happens to requests in flight while paused.
            clear_cache: also clear the caches when pausing.
            draft: update the draft (speculative) model instead.
        """
        async with self.paused(pause_mode, clear_cache=clear_cache):
            start = "start_draft_weight_update" if draft else "start_weight_update"
            (await self._gather(lambda c: getattr(c, start)(), self.urls, start)).raise_for_errors()
            update = AsyncFleetWeightUpdate(self)
            yield update
            await update.wait()
            finish = await self._gather(
                lambda c: c.finish_weight_update(weight_version=weight_version),
                self.urls,
                "finish_weight_update",
            )
            finish.raise_for_errors()

    # ---- every other client method, typed from the client's own signature -------------------------------

    # -- generated: async fleet methods (make generate) --
    request = _FanOut(AsyncDevClient.request)
    health = _FanOut(AsyncDevClient.health)
    version = _FanOut(AsyncDevClient.version)
    models = _FanOut(AsyncDevClient.models)
    metrics_text = _FanOut(AsyncDevClient.metrics_text)
    metrics = _FanOut(AsyncDevClient.metrics)
    load = _FanOut(AsyncDevClient.load)
    tokenizer_info = _FanOut(AsyncDevClient.tokenizer_info)
    reset_prefix_cache = _FanOut(AsyncDevClient.reset_prefix_cache)
    reset_mm_cache = _FanOut(AsyncDevClient.reset_mm_cache)
    reset_encoder_cache = _FanOut(AsyncDevClient.reset_encoder_cache)
    sleep = _FanOut(AsyncDevClient.sleep)
    wake_up = _FanOut(AsyncDevClient.wake_up)
    is_sleeping = _FanOut(AsyncDevClient.is_sleeping)
    release_kv_cache_memory = _FanOut(AsyncDevClient.release_kv_cache_memory)
    resume = _FanOut(AsyncDevClient.resume)
    is_paused = _FanOut(AsyncDevClient.is_paused)
    abort_requests = _FanOut(AsyncDevClient.abort_requests)
    collective_rpc = _FanOut(AsyncDevClient.collective_rpc)
    server_info = _FanOut(AsyncDevClient.server_info)
    kv_event_sources = _FanOut(AsyncDevClient.kv_event_sources)
    get_world_size = _FanOut(AsyncDevClient.get_world_size)
    init_weight_transfer_engine = _FanOut(AsyncDevClient.init_weight_transfer_engine)
    shutdown_weight_transfer_engine = _FanOut(AsyncDevClient.shutdown_weight_transfer_engine)
    start_weight_update = _FanOut(AsyncDevClient.start_weight_update)
    start_draft_weight_update = _FanOut(AsyncDevClient.start_draft_weight_update)
    update_weights = _FanOut(AsyncDevClient.update_weights)
    finish_weight_update = _FanOut(AsyncDevClient.finish_weight_update)
    update_weight_version = _FanOut(AsyncDevClient.update_weight_version)
    weight_info = _FanOut(AsyncDevClient.weight_info)
    weight_checker = _FanOut(AsyncDevClient.weight_checker)
    load_lora_adapter = _FanOut(AsyncDevClient.load_lora_adapter)
    unload_lora_adapter = _FanOut(AsyncDevClient.unload_lora_adapter)
    start_profile = _FanOut(AsyncDevClient.start_profile)
    stop_profile = _FanOut(AsyncDevClient.stop_profile)
    completion = _FanOut(AsyncDevClient.completion)
    step_engine = _FanOut(AsyncDevClient.step_engine)
    reset_prefix_cache_until_success = _FanOut(AsyncDevClient.reset_prefix_cache_until_success)
    wait_until_ready = _FanOut(AsyncDevClient.wait_until_ready)
    wait_until_sleeping = _FanOut(AsyncDevClient.wait_until_sleeping)
    wait_until_awake = _FanOut(AsyncDevClient.wait_until_awake)
    wait_until_paused = _FanOut(AsyncDevClient.wait_until_paused)
    wait_until_resumed = _FanOut(AsyncDevClient.wait_until_resumed)
    # -- end generated --
    # The barrier over a fleet: all_ok only when every target's reset went through before the deadline.
    barrier = reset_prefix_cache_until_success


def _rebuild(cls: type[Any], urls: tuple[str, ...], settings: dict[str, Any]) -> Any:
    return cls(urls, **settings)


class AsyncFleetWeightUpdate:
    """The handle of a fleet's `weight_update()` block: one batch to every target."""

    def __init__(self, fleet: AsyncFleet) -> None:
        self._fleet = fleet
        self._pending: list[asyncio.Task[FleetResult[MessageResult]]] = []

    async def update(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> FleetResult[MessageResult]:
        """Send one batch to every target; FleetError when any failed."""
        result = await self._fleet._gather(
            lambda c: c.update_weights(update_info), self._fleet.urls, "update_weights"
        )
        return result.raise_for_errors()

    def start(
        self, update_info: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> asyncio.Task[FleetResult[MessageResult]]:
        """Send one batch to every target in the background; the block's end waits for it."""
        task = asyncio.ensure_future(self.update(update_info))
        self._pending.append(task)
        return task

    async def wait(self) -> list[FleetResult[MessageResult]]:
        pending, self._pending = self._pending, []
        return [await task for task in pending]


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
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        raise_on_error: bool = False,
        on_result: OnResult | None = None,
        default_headers: Mapping[str, str] | None = None,
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
        return (_rebuild, (type(self), self.urls, settings))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop.loop.is_closed():
            coro.close()
            raise DevClientError("this Fleet is closed")
        return self._loop.run(coro)

    def close(self) -> None:
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
    def weight_update(
        self,
        *,
        weight_version: str | None = None,
        pause_mode: PauseMode = "keep",
        clear_cache: bool | None = None,
        draft: bool = False,
    ) -> Iterator[FleetWeightUpdate]:
        """The weight_update() flow on every target; see AsyncFleet.weight_update."""
        flow = self._fleet.weight_update(
            weight_version=weight_version, pause_mode=pause_mode, clear_cache=clear_cache, draft=draft
        )
        with self._flow(flow) as update:
            yield FleetWeightUpdate(self, update)

    # -- generated: sync fleet methods (make generate) --
    request = _SyncFanOut(AsyncDevClient.request)
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
    sleep = _SyncFanOut(AsyncDevClient.sleep)
    wake_up = _SyncFanOut(AsyncDevClient.wake_up)
    is_sleeping = _SyncFanOut(AsyncDevClient.is_sleeping)
    release_kv_cache_memory = _SyncFanOut(AsyncDevClient.release_kv_cache_memory)
    resume = _SyncFanOut(AsyncDevClient.resume)
    is_paused = _SyncFanOut(AsyncDevClient.is_paused)
    abort_requests = _SyncFanOut(AsyncDevClient.abort_requests)
    collective_rpc = _SyncFanOut(AsyncDevClient.collective_rpc)
    server_info = _SyncFanOut(AsyncDevClient.server_info)
    kv_event_sources = _SyncFanOut(AsyncDevClient.kv_event_sources)
    get_world_size = _SyncFanOut(AsyncDevClient.get_world_size)
    init_weight_transfer_engine = _SyncFanOut(AsyncDevClient.init_weight_transfer_engine)
    shutdown_weight_transfer_engine = _SyncFanOut(AsyncDevClient.shutdown_weight_transfer_engine)
    start_weight_update = _SyncFanOut(AsyncDevClient.start_weight_update)
    start_draft_weight_update = _SyncFanOut(AsyncDevClient.start_draft_weight_update)
    update_weights = _SyncFanOut(AsyncDevClient.update_weights)
    finish_weight_update = _SyncFanOut(AsyncDevClient.finish_weight_update)
    update_weight_version = _SyncFanOut(AsyncDevClient.update_weight_version)
    weight_info = _SyncFanOut(AsyncDevClient.weight_info)
    weight_checker = _SyncFanOut(AsyncDevClient.weight_checker)
    load_lora_adapter = _SyncFanOut(AsyncDevClient.load_lora_adapter)
    unload_lora_adapter = _SyncFanOut(AsyncDevClient.unload_lora_adapter)
    start_profile = _SyncFanOut(AsyncDevClient.start_profile)
    stop_profile = _SyncFanOut(AsyncDevClient.stop_profile)
    completion = _SyncFanOut(AsyncDevClient.completion)
    step_engine = _SyncFanOut(AsyncDevClient.step_engine)
    reset_prefix_cache_until_success = _SyncFanOut(AsyncDevClient.reset_prefix_cache_until_success)
    wait_until_ready = _SyncFanOut(AsyncDevClient.wait_until_ready)
    wait_until_sleeping = _SyncFanOut(AsyncDevClient.wait_until_sleeping)
    wait_until_awake = _SyncFanOut(AsyncDevClient.wait_until_awake)
    wait_until_paused = _SyncFanOut(AsyncDevClient.wait_until_paused)
    wait_until_resumed = _SyncFanOut(AsyncDevClient.wait_until_resumed)
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
