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
from typing import Any, TypeVar

from typing_extensions import Unpack

from .._base_client import (
    NOT_GIVEN,
    NotGiven,
    RequestOptions,
    TimeoutArg,
    WeightUpdateOptions,
    name_methods_after,
)
from ..client import AsyncDevClient
from ..constants import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_RETRIES,
    DEFAULT_WAIT_DEADLINE,
    DEFAULT_WATCHDOG_FAILURES,
    DEFAULT_WATCHDOG_INTERVAL,
)
from ..endpoints import PauseMode
from ..errors import DevClientError
from ..models import CheckpointStatus, MessageResult, StatusResult
from ..transports import CertArg, VerifyArg
from ..watchdog import OnTrip, Watch
from .async_fleet import AsyncFleet
from .async_flows import AsyncFleetWeightUpdate
from .fan_out import _rebuild
from .methods import FleetMethod, _ClientMethods
from .results import FleetResult, OnResult
from .watch import watch_fleet

__all__ = ["Fleet", "FleetWeightUpdate"]

T = TypeVar("T")


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


@name_methods_after  # Python's own TypeErrors then name Fleet, not a private base
class Fleet(_ClientMethods):
    """Synchronous fleet: the same methods and results as AsyncFleet, without await (its calls run on a
    private event-loop thread).

    All targets or none, as AsyncFleet: a call that failed on any target raises FleetError once every target
    has finished, every target's outcome on it (`.result`); `raise_on_error=False` gives the FleetResult
    back instead, failures inside. `map(fn)` takes the same callable as AsyncFleet's, given an
    AsyncDevClient: `fleet.map(lambda c: c.reset_prefix_cache(reset_external=True))`.
    """

    def __init__(
        self,
        urls: Iterable[str],
        *,
        api_key: str | None = None,
        timeout: TimeoutArg | NotGiven = NOT_GIVEN,
        total_timeout: float | NotGiven | None = NOT_GIVEN,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        raise_on_error: bool = True,
        on_result: OnResult | None = None,
        default_headers: Mapping[str, str] | None = None,
        verify: VerifyArg = True,
        cert: CertArg | None = None,
    ) -> None:
        """A fleet over `urls` (base URLs, each once); the arguments are AsyncFleet's (without http_client).

        Args:
            urls: the targets' base URLs.
            api_key, timeout, total_timeout, max_retries, default_headers: each target's client's, as
                DevClient takes them. `total_timeout` is one moment for every target of a call.
            max_concurrency: how many targets are in flight at once.
            raise_on_error: True (the default): a call that failed on any target raises FleetError, every
                target's outcome on it; False: the call returns the FleetResult, failures inside.
            on_result: called with each target's outcome as it finishes, on the fleet's loop thread.
            verify, cert: the clients' TLS settings, one for every https target.
        """
        self._fleet = AsyncFleet(
            urls,
            api_key=api_key,
            timeout=timeout,
            total_timeout=total_timeout,
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
    def sleeping(
        self,
        level: int = 1,
        *,
        mode: PauseMode = "abort",
        wait: bool = True,
        reset_connector: bool | None = None,
    ) -> Iterator[Fleet]:
        """Every target asleep for the block, awake after; see AsyncFleet.sleeping."""
        with self._flow(self._fleet.sleeping(level, mode=mode, wait=wait, reset_connector=reset_connector)):
            yield self

    @contextmanager
    def checkpointed(
        self, mode: PauseMode = "wait", *, deadline: float = DEFAULT_WAIT_DEADLINE
    ) -> Iterator[FleetResult[CheckpointStatus]]:
        """Every target prepared for a process checkpoint in the block, restored after; see
        AsyncFleet.checkpointed."""
        with self._flow(self._fleet.checkpointed(mode, deadline=deadline)) as prepared:
            yield prepared

    @contextmanager
    def staged_wake(
        self, *, level: int = 1, wait: bool = True, reset_connector: bool | None = None
    ) -> Iterator[Fleet]:
        """Wake every target's weights, run the block, wake every KV cache; see AsyncFleet.staged_wake."""
        with self._flow(self._fleet.staged_wake(level=level, wait=wait, reset_connector=reset_connector)):
            yield self

    @contextmanager
    def watchdog(
        self,
        interval: float = DEFAULT_WATCHDOG_INTERVAL,
        failures: int = DEFAULT_WATCHDOG_FAILURES,
        *,
        request_timeout: float | None = None,
        on_trip: OnTrip | None = None,
    ) -> Iterator[Watch]:
        """Every target's health checked beside the block, on the fleet's own loop thread (no thread of its
        own); see AsyncFleet.watchdog. Your code is not interrupted: the context raises
        `ServerUnhealthyError` at the block's end (call `watch.check()` in a loop, or act in `on_trip`, which
        runs on the fleet's loop thread: it must not call the fleet)."""
        flow = watch_fleet(
            self._fleet.clients, interval=interval, failures=failures, request_timeout=request_timeout,
            on_trip=on_trip, cancel=False,
        )  # fmt: skip
        with self._flow(flow) as watch:
            yield watch

    @contextmanager
    def weight_update(self, **options: Unpack[WeightUpdateOptions]) -> Iterator[FleetWeightUpdate]:
        """The weight_update() flow on every target; see AsyncFleet.weight_update."""
        with self._flow(self._fleet.weight_update(**options)) as update:
            yield FleetWeightUpdate(self, update)

    # ---- every other client method: derived from the client's (`methods.py`) -------------------------

    def _each(self, method: FleetMethod[..., T], arguments: dict[str, Any]) -> FleetResult[T]:
        """AsyncFleet's method of the same name, given `arguments` (every one by name), on the loop thread."""
        fanned: Callable[..., Coroutine[Any, Any, FleetResult[T]]] = getattr(self._fleet, method.name)
        return self._run(fanned(**arguments))


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
