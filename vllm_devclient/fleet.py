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
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

import httpx

from .client import DEFAULT_TIMEOUT, NOT_GIVEN, AsyncDevClient, TimeoutArg
from .endpoints import PauseMode
from .errors import DevClientError, InvalidParameterError
from .models import StatusResult

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

DEFAULT_MAX_CONCURRENCY = 64

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


def _normalise(urls: Iterable[str]) -> tuple[str, ...]:
    if isinstance(urls, str):
        raise InvalidParameterError("urls must be a list of base URLs, not a single string")
    out: list[str] = []
    for url in urls:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidParameterError(f"each target must be an http:// or https:// URL, got {url!r}")
        url = url.rstrip("/")
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
            return await obj.map(lambda client: method(client, *args, **kwargs), operation=name)

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
            return obj._run(obj._fleet.map(lambda client: method(client, *args, **kwargs), operation=name))

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
        timeout: float | httpx.Timeout | None = DEFAULT_TIMEOUT,
        max_retries: int = 2,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        raise_on_error: bool = False,
        on_result: OnResult | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise InvalidParameterError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
        self.urls = _normalise(urls)
        self.max_concurrency = max_concurrency
        self.raise_on_error = raise_on_error
        self.on_result = on_result
        # One connection pool per target: httpx's pool does work per request that grows with the number
        # of connections it holds, so a single pool for 32 targets costs twice the CPU of 32 pools. They
        # share one TLS context (building one per client costs milliseconds each).
        if http_client is None:
            tls = httpx.create_ssl_context()
            self._owned = [httpx.AsyncClient(timeout=timeout, verify=tls) for _ in self.urls]
            pools = list(self._owned)
        else:
            self._owned = []
            pools = [http_client] * len(self.urls)
        self.clients: dict[str, AsyncDevClient] = {
            url: AsyncDevClient(
                url, api_key=api_key, timeout=timeout, max_retries=max_retries, http_client=http
            )
            for url, http in zip(self.urls, pools, strict=True)
        }
        self._semaphore = asyncio.Semaphore(max_concurrency)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.urls)} targets)"

    async def close(self) -> None:
        """Close the connection pools this fleet made (not an `http_client` passed in)."""
        owned, self._owned = self._owned, []
        await asyncio.gather(*(client.aclose() for client in owned))

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
        clear_cache: bool | None = None,
        *,
        timeout: TimeoutArg = NOT_GIVEN,
        rollback: bool = False,
    ) -> FleetResult[StatusResult]:
        """Pause every target. With `rollback=True`, when some targets fail, resume the ones that paused.

        Only targets whose pause succeeded are resumed: a target whose pause failed (even by a timeout,
        when its state is unknown) is left alone. The resume outcomes are in `result.rollback`.
        """
        result = await self._gather(
            lambda client: client.pause(mode, clear_cache, timeout=timeout), self.urls, "pause"
        )
        if rollback and result.failed and result.ok:
            undo = await self._gather(
                lambda client: client.resume(timeout=timeout), list(result.ok), "resume"
            )
            result = FleetResult(result.values(), operation="pause", rollback=undo)
        return self._finish(result)

    # ---- every other client method, typed from the client's own signature -------------------------------

    request = _FanOut(AsyncDevClient.request)
    health = _FanOut(AsyncDevClient.health)
    version = _FanOut(AsyncDevClient.version)
    models = _FanOut(AsyncDevClient.models)
    metrics_text = _FanOut(AsyncDevClient.metrics_text)
    metrics = _FanOut(AsyncDevClient.metrics)
    completion = _FanOut(AsyncDevClient.completion)
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
    start_weight_update = _FanOut(AsyncDevClient.start_weight_update)
    update_weights = _FanOut(AsyncDevClient.update_weights)
    finish_weight_update = _FanOut(AsyncDevClient.finish_weight_update)
    update_weight_version = _FanOut(AsyncDevClient.update_weight_version)
    weight_info = _FanOut(AsyncDevClient.weight_info)
    step_engine = _FanOut(AsyncDevClient.step_engine)
    # The barrier over a fleet: all_ok only when every target's reset went through before its deadline.
    reset_prefix_cache_until_success = _FanOut(AsyncDevClient.reset_prefix_cache_until_success)
    barrier = reset_prefix_cache_until_success
    wait_until_ready = _FanOut(AsyncDevClient.wait_until_ready)
    wait_until_sleeping = _FanOut(AsyncDevClient.wait_until_sleeping)
    wait_until_awake = _FanOut(AsyncDevClient.wait_until_awake)
    wait_until_paused = _FanOut(AsyncDevClient.wait_until_paused)
    wait_until_resumed = _FanOut(AsyncDevClient.wait_until_resumed)


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
    ) -> None:
        self._fleet = AsyncFleet(
            urls,
            api_key=api_key,
            timeout=timeout,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            raise_on_error=raise_on_error,
            on_result=on_result,
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
        clear_cache: bool | None = None,
        *,
        timeout: TimeoutArg = NOT_GIVEN,
        rollback: bool = False,
    ) -> FleetResult[StatusResult]:
        return self._run(self._fleet.pause(mode, clear_cache, timeout=timeout, rollback=rollback))

    request = _SyncFanOut(AsyncDevClient.request)
    health = _SyncFanOut(AsyncDevClient.health)
    version = _SyncFanOut(AsyncDevClient.version)
    models = _SyncFanOut(AsyncDevClient.models)
    metrics_text = _SyncFanOut(AsyncDevClient.metrics_text)
    metrics = _SyncFanOut(AsyncDevClient.metrics)
    completion = _SyncFanOut(AsyncDevClient.completion)
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
    start_weight_update = _SyncFanOut(AsyncDevClient.start_weight_update)
    update_weights = _SyncFanOut(AsyncDevClient.update_weights)
    finish_weight_update = _SyncFanOut(AsyncDevClient.finish_weight_update)
    update_weight_version = _SyncFanOut(AsyncDevClient.update_weight_version)
    weight_info = _SyncFanOut(AsyncDevClient.weight_info)
    step_engine = _SyncFanOut(AsyncDevClient.step_engine)
    reset_prefix_cache_until_success = _SyncFanOut(AsyncDevClient.reset_prefix_cache_until_success)
    barrier = reset_prefix_cache_until_success
    wait_until_ready = _SyncFanOut(AsyncDevClient.wait_until_ready)
    wait_until_sleeping = _SyncFanOut(AsyncDevClient.wait_until_sleeping)
    wait_until_awake = _SyncFanOut(AsyncDevClient.wait_until_awake)
    wait_until_paused = _SyncFanOut(AsyncDevClient.wait_until_paused)
    wait_until_resumed = _SyncFanOut(AsyncDevClient.wait_until_resumed)
